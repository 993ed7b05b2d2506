import Foundation
import GatehouseApp
import GatehouseCore
import GatehouseMail
import Synchronization

/// Gatehouse's domain services on a fresh database, composed as the executable composes them
/// (`Gatehouse.open`), with no HTTP server and no background work: the tests below HTTP
/// (GatehouseCoreTests) call the services' public methods directly. Every service a test uses is
/// built here, and only here, so a change to a service's initialiser is one edit.
///
/// Time is a ``ManualClock`` the test moves; the outbox is stepped by hand (``mails(to:)``).
public final class CoreWorld: Sendable {
    public let database: TestDatabase
    public let clock: ManualClock
    /// The platform's store (every app's data): tests that look past the services read it.
    public let store: any Store
    public let apps: AppService
    public let directory: AppDirectory
    public let accounts: AccountService
    public let sessions: SessionService
    public let passwords: PasswordService
    public let emailFlows: EmailFlowService
    public let tokens: TokenService
    public let deletion: AccountDeletion
    public let passkeys: PasskeyService
    /// The tenant admin's view of its users (`/v1/admin/users…`).
    public let adminUsers: AdminUsers
    /// The tenant admin's audit log (`/v1/admin/events`).
    public let auditLog: AuditLog
    /// Second factors and the second step.
    public let mfa: MFAService
    /// The admin's export of the app's users (`GET /v1/admin/users/export`), its page size the configuration's.
    public let userExport: UserExport
    private let gatehouse: Gatehouse
    /// Mail taken from the outbox so far, oldest first.
    private let mailbox = Mutex<[(app: AppID, mail: QueuedMail)]>([])

    /// Where the tests' calls come from.
    public static let origin = RequestOrigin(ip: "203.0.113.7", userAgent: "gatehouse-core-tests")

    /// Composes Gatehouse on a fresh database of `kind`; `configure` may change the configuration
    /// (``Configuration/forTests(on:)``) before it opens. ``close()`` drops the database.
    public init(_ kind: TestDatabaseKind, configure: (inout Configuration) -> Void = { _ in }) throws {
        let database = try TestDatabase.make(kind)
        let clock = ManualClock()
        var configuration = Configuration.forTests(on: database)
        configure(&configuration)
        let gatehouse: Gatehouse
        do {
            gatehouse = try Gatehouse.open(configuration: configuration, clock: clock, environment: [:], log: Log(enabled: false))
        } catch {
            database.drop()
            throw error
        }
        self.database = database
        self.clock = clock
        self.gatehouse = gatehouse
        store = gatehouse.store
        apps = gatehouse.apps
        directory = gatehouse.directory
        accounts = gatehouse.accounts
        sessions = gatehouse.sessions
        passwords = gatehouse.passwords
        emailFlows = gatehouse.emailFlows
        tokens = gatehouse.tokens
        deletion = gatehouse.deletion
        passkeys = gatehouse.passkeys
        adminUsers = AdminUsers(store: gatehouse.store, units: gatehouse.units, clock: clock)
        auditLog = AuditLog(store: gatehouse.store)
        mfa = gatehouse.mfa
        userExport = gatehouse.userExport
    }

    /// Runs `body` in a world on `kind`, then closes it (its database dropped).
    public static func with<T>(
        _ kind: TestDatabaseKind, configure: (inout Configuration) -> Void = { _ in }, _ body: (CoreWorld) throws -> T
    ) throws -> T {
        let world = try CoreWorld(kind, configure: configure)
        defer { world.close() }
        return try body(world)
    }

    /// Ends the hash threads, closes the database and drops it.
    public func close() {
        gatehouse.close()
        database.drop()
    }

    // MARK: - Conveniences

    /// An app made as the admin API makes one; `settings` as `POST /v1/admin/apps` takes them.
    public func createApp(_ settings: JSON = ["name": "Test App"]) throws -> AppContext {
        try apps.create(settings: settings).app
    }

    /// What the access token of `grant` says, as the app checks it.
    public func claims(_ grant: SessionGrant, app: AppContext) throws -> AccessClaims {
        try tokens.verifyAccessToken(grant.accessToken, app: app)
    }

    /// The mail sent so far to `address` by `app`, oldest first: the outbox's due mail is taken and
    /// opened as its worker would (and marked delivered), then kept here.
    public func mails(to address: String, app: AppContext) throws -> [QueuedMail] {
        let node = "core-tests"
        let now = clock.nowMillis()
        let items = try store.outbox.claim(kinds: [.mail], limit: 1_000, leaseMillis: 60_000, node: node, now: now)
        var taken: [(AppID, QueuedMail)] = []
        for item in items {
            guard let appID = item.appID else { continue }
            let opened = try gatehouse.sealer.open(item.payload, app: appID, field: QueuedMail.sealedField)
            let json = try JSON.parse(Array(opened.utf8))
            taken.append((appID, QueuedMail(
                to: json["to"]?.stringValue ?? "", subject: json["subject"]?.stringValue ?? "", text: json["text"]?.stringValue ?? "",
                html: json["html"]?.stringValue ?? "")))
            try store.outbox.markDelivered(item.id, node: node, now: now, destination: item.destination)
        }
        return mailbox.withLock { box in
            box.append(contentsOf: taken)
            return box.filter { $0.app == app.id && $0.mail.to == address }.map(\.mail)
        }
    }

    /// The 6-digit code of the newest mail to `address` by `app`; nil when none holds one.
    public func newestCode(to address: String, app: AppContext) throws -> String? {
        guard let text = try mails(to: address, app: app).last?.text else { return nil }
        return text.range(of: #"\b[0-9]{6}\b"#, options: .regularExpression).map { String(text[$0]) }
    }
}
