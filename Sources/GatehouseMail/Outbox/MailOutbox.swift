import Foundation
import GatehouseCore
import GatehouseCrypto
import Synchronization

/// A mail as the outbox keeps it until it is sent. Sealed in the table (it may hold a code in
/// clear), and erased once delivered or dead.
public struct QueuedMail: Sendable, Equatable {
    public var to: String
    public var subject: String
    public var text: String
    public var html: String

    public init(to: String, subject: String, text: String, html: String) {
        self.to = to
        self.subject = subject
        self.text = text
        self.html = html
    }

    var json: JSON { ["to": .string(to), "subject": .string(subject), "text": .string(text), "html": .string(html)] }

    init?(json: JSON) {
        guard let to = json["to"]?.stringValue, let subject = json["subject"]?.stringValue, let text = json["text"]?.stringValue,
            let html = json["html"]?.stringValue
        else { return nil }
        self.init(to: to, subject: subject, text: text, html: html)
    }

    /// The sealing field of a queued mail's payload (with the app, the AAD of ``SecretSealer``).
    public static let sealedField = "outbox/mail"

    /// The outbox item that sends this mail for `app`, its payload sealed: queue it in the
    /// transaction of the change it belongs to, or with ``OutboxStore/enqueue(_:now:)``.
    public func outboxItem(app: AppID, idempotencyKey: String, sealer: SecretSealer) -> NewOutboxItem {
        NewOutboxItem(
            appID: app, kind: .mail, idempotencyKey: idempotencyKey,
            payload: sealer.seal(json.serializedString, app: app, field: Self.sealedField), sealed: true)
    }
}

/// Delivers the outbox's mail: opens the payload, picks the app's SMTP server (else the
/// platform's), and sends. A 4xx or an unreachable server is tried again; a 5xx, a refused
/// address or a payload that cannot be opened is a dead letter.
public struct MailOutboxHandler: OutboxHandler {
    public var kind: OutboxKind { .mail }
    let directory: AppDirectory
    let sealer: SecretSealer
    let platformSMTPURL: String
    let platformSender: MailAddress
    let allowPrivateOutbound: Bool
    let clock: any Clock
    let log: @Sendable (String) -> Void
    /// Relay addresses whose forwarding the user turned off at Apple are not mailed (nil: no check).
    let relayForwarding: AppleRelayForwarding?
    /// One mailer per SMTP server and login, kept across deliveries so that their connections are
    /// reused (``SMTPMailer``).
    private let mailers = MailerCache()

    /// - Parameter platformSender: the sender of every app over the platform's mailer
    ///   (`GATEHOUSE_SMTP_FROM`), and of an app with its own server that sets no `email.from`.
    /// - Parameter relayForwarding: asked before each send; a relay address whose forwarding is
    ///   off makes the mail a dead letter that says so.
    public init(
        directory: AppDirectory, sealer: SecretSealer, platformSMTPURL: String, platformSender: MailAddress, allowPrivateOutbound: Bool,
        clock: any Clock, log: @escaping @Sendable (String) -> Void, relayForwarding: AppleRelayForwarding? = nil
    ) {
        self.relayForwarding = relayForwarding
        self.directory = directory
        self.sealer = sealer
        self.platformSMTPURL = platformSMTPURL
        self.platformSender = platformSender
        self.allowPrivateOutbound = allowPrivateOutbound
        self.clock = clock
        self.log = log
    }

    /// The SMTP server the app's mail goes through now: its own, else the platform's.
    public func destination(of item: OutboxItem) -> String? {
        let own = item.appID.flatMap { try? directory.app(id: $0) }?.settings.email.smtpURL
        return OutboxDestination.of(url: own ?? platformSMTPURL)
    }

    public func deliver(_ item: OutboxItem) -> OutboxDelivery {
        guard let appID = item.appID else { return .dead(reason: "a mail item names no app") }
        let app: AppContext
        do {
            guard let found = try directory.app(id: appID) else { return .dead(reason: "the app no longer exists") }
            app = found
        } catch {
            return .retry(reason: "the app's settings cannot be read now")
        }
        guard let opened = try? sealer.open(item.payload, app: appID, field: QueuedMail.sealedField),
            let parsed = try? JSON.parse(Array(opened.utf8)), let mail = QueuedMail(json: parsed)
        else { return .dead(reason: "the payload cannot be opened with this master key") }
        if let relayForwarding {
            do {
                if try relayForwarding.isTurnedOff(app: appID, address: mail.to) { return .dead(reason: AppleRelayForwarding.turnedOffReason) }
            } catch {
                return .retry(reason: "whether the relay address forwards cannot be read now")
            }
        }
        let message: MailMessage
        do {
            let (from, replyTo) = try MailerSelection.addressing(for: app.settings.email, appName: app.settings.name, platformSender: platformSender)
            message = MailMessage(
                from: from, to: try MailAddress(mail.to), replyTo: replyTo, subject: try HeaderText(mail.subject), textBody: mail.text, htmlBody: mail.html,
                clock: clock)
        } catch {
            return .dead(reason: "the message cannot be written: \(error)")
        }
        do {
            let mailer = try mailers.mailer(for: app.settings.email, platformSMTPURL: platformSMTPURL) { () throws(MailDeliveryError) in
                try MailerSelection.mailer(for: app.settings.email, platformSMTPURL: platformSMTPURL, allowPrivateOutbound: allowPrivateOutbound, log: log)
            }
            try mailer.send(message)
            return .delivered
        } catch {
            if error.blamesServer { return .unreachable(reason: error.reason) }
            return error.isTransient ? .retry(reason: error.reason) : .dead(reason: error.reason)
        }
    }
}

/// The outbox handler's mailers by server and login. Keyed by a digest (no password is a key in
/// memory), and bounded: past 64 servers it starts over (a mailer in use lives on until its send
/// ends; dropped ones close their connections, outside the lock).
final class MailerCache: Sendable {
    private let mailers = Mutex<[String: any Mailer]>([:])
    static let capacity = 64

    func mailer(
        for email: AppSettings.Email, platformSMTPURL: String, make: () throws(MailDeliveryError) -> any Mailer
    ) throws(MailDeliveryError) -> any Mailer {
        // The platform's mailer is one, whatever login an app without its own server has set.
        let identity = email.smtpURL.map { [$0, email.smtpUsername ?? "", email.smtpPassword ?? "", "app"] } ?? [platformSMTPURL, "", "", "platform"]
        let key = Digest.hex(Digest.sha256(Array(identity.joined(separator: "\u{0}").utf8)))
        if let mailer = mailers.withLock({ $0[key] }) { return mailer }
        let made = try make()
        var evicted: [String: any Mailer] = [:]
        let mailer = mailers.withLock { cache -> any Mailer in
            if let raced = cache[key] { return raced }
            if cache.count >= Self.capacity { swap(&evicted, &cache) }
            cache[key] = made
            return made
        }
        evicted.removeAll()  // closes their connections here, not under the lock
        return mailer
    }
}
