import Synchronization

/// Sends an app's test message through the app's own SMTP server (GatehouseMail's mailer, in
/// production): the fixed text of ``TestMail``, from the app's `email.from`, under the same
/// outbound-address rules as its real mail, within a time limit. Blocks the calling thread.
public protocol TestMailSending: Sendable {
    /// Nil when the server took the message; else why not (never a password or username).
    func sendTest(app: AppContext, to: String) -> TestMailFailure?
    /// Whether `address` can be written as a recipient (checked before anything is spent on it).
    func acceptsRecipient(_ address: String) -> Bool
}

/// Why a test message was not sent, sorted as an admin fixes it.
public struct TestMailFailure: Sendable, Equatable, Error {
    public struct Cause: RawRepresentable, Hashable, Sendable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// Nothing answered at the server's address and port (refused, unreachable, no such host).
        public static let connection = Cause(rawValue: "connection")
        /// TLS failed: no STARTTLS offered, a handshake or certificate error.
        public static let tls = Cause(rawValue: "tls")
        /// The server refused the username and password.
        public static let authentication = Cause(rawValue: "authentication")
        /// The server refused the sender (`MAIL FROM`).
        public static let sender = Cause(rawValue: "sender")
        /// The server refused the recipient (`RCPT TO`).
        public static let recipient = Cause(rawValue: "recipient")
        /// No answer within the time limit.
        public static let timeout = Cause(rawValue: "timeout")
        /// The server's address is one a tenant's mail may not reach (a private address).
        public static let refusedAddress = Cause(rawValue: "refused_address")
        /// Anything else the server said.
        public static let other = Cause(rawValue: "other")
    }

    public var cause: Cause
    /// The server (scheme, host, port) and what it answered.
    public var detail: String

    public init(_ cause: Cause, _ detail: String) {
        self.cause = cause
        self.detail = detail
    }
}

/// `POST /v1/admin/app/email/test`: an admin's check of the app's SMTP settings (ADR 0035). The
/// message goes through the app's own server only (`email.smtp_url`; with none there is nothing
/// of the app's to test, and the platform's server is not lent for it), with a fixed subject and
/// text naming the app, to any address: it is the admin's own test, and what could be abused
/// is bounded. At most one test at a time per app on a node, and ``perMinute`` a minute per app
/// across the nodes, each bounded in time by the mailer (10 s to connect, 20 s in all); and every
/// test counts against the node's ``TenantCallBudget`` with the apps' own issuers, since it runs
/// on the same threads as every app's provider calls.
public final class TestMail: Sendable {
    /// Test sends an app may make in a minute.
    public static let perMinute: Int64 = 10
    private let store: any Store
    private let sender: any TestMailSending
    private let limiter: RateLimiter
    private let inFlight = Mutex<Set<AppID>>([])
    private let tenantCalls: TenantCallBudget

    public init(store: any Store, sender: any TestMailSending, tenantCalls: TenantCallBudget, clock: any Clock) {
        self.store = store
        self.sender = sender
        self.tenantCalls = tenantCalls
        self.limiter = RateLimiter(clock: clock)
    }

    /// Sends the test message to `to`; throws the failure as a `502 email/test-failed`.
    public func send(app: AppContext, to raw: String) throws {
        let to = try InputRules.email(raw, field: "to")
        guard sender.acceptsRecipient(to) else {
            throw GatehouseError.validation("to", "Must be an email address a message can be sent to.")
        }
        guard app.settings.email.smtpURL != nil else {
            throw GatehouseError.validation(
                "email.smtp_url", "The app has no SMTP server of its own to test: set email.smtp_url (its mail goes through the platform's server).")
        }
        guard inFlight.withLock({ $0.insert(app.id).inserted }) else {
            throw GatehouseError(.tooManyRequests, "A test message of this app is being sent; wait for its answer.", retryAfter: 5)
        }
        defer { _ = inFlight.withLock { $0.remove(app.id) } }
        guard tenantCalls.acquire() else {
            throw GatehouseError(.busy, "Too many calls to servers apps set are running on this node; try again shortly.", retryAfter: 5)
        }
        defer { tenantCalls.release() }
        try limiter.hit(store.app(app.id), bucket: "email_test", subject: "app", limit: Self.perMinute)
        if let failure = sender.sendTest(app: app, to: to) {
            var error = GatehouseError(.emailTestFailed, failure.detail)
            error.extensions["reason"] = .string(failure.cause.rawValue)
            throw error
        }
    }

    /// The test message's subject and text.
    public static func subject(appName: String) -> String { "Test message from \(appName)" }
    public static func text(appName: String) -> String {
        "This is a test message sent by Gatehouse through the SMTP server set for \(appName), at its admin's request.\n"
            + "It shows that the server takes this app's mail. There is nothing to do.\n"
    }
}
