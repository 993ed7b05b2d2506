import GatehouseCrypto

/// Apple's server-to-server notifications for Sign in with Apple (API.md, "Apple, to the end"):
/// `POST /v1/apps/{app_id}/apple/notifications`, the endpoint an app registers with Apple.
///
/// The notification's JWT is verified with Apple's keys for one of the app's Apple client ids
/// (no other call leaves the request: a key fetch only for a `kid` not cached). Each event is acted
/// on in one unit of work with its audit events (and so its webhooks), and recorded by
/// (`sub`, `type`, `event_time`) in the same unit: Apple retries until it is answered 200, and a
/// repeat changes nothing.
///
/// - `email-disabled` / `email-enabled`: the relay address's forwarding is marked off / on
///   (``AppleRelayForwarding`` keeps mail to it from being sent); `user.email_relay_changed` and
///   `user.updated` when it changed. An older event than the one that set it changes nothing.
/// - `consent-revoked`: the Apple identity is unlinked, its kept Apple tokens dropped (Apple has
///   revoked them) and the sessions it started ended; if it was the account's only way in, every
///   session ends and the account stays. The identity is remembered: the same Apple account
///   signing in again links to the same account anew
///   (``ProviderSignInService``'s `relinkRevokedApple`).
/// - `account-delete`: as `consent-revoked` (nothing remembered: the Apple account is gone); an
///   account it was the only way into is erased (``AccountDeletion/eraseAfterAppleAccountDeletion(_:user:now:)``).
///
/// An event of an Apple account no user of the app has, or of a type this version does not
/// know, is answered 200 and changes nothing.
public final class AppleNotifications: Sendable {
    /// What became of a verified notification.
    public enum Outcome: String, Sendable {
        /// Acted on (possibly changing nothing, when the state already was what it says).
        case applied
        /// Handled before: nothing changed.
        case repeated = "repeat"
        /// No user of the app has this Apple account.
        case unknownSubject = "unknown_subject"
        /// A type this version does not act on.
        case ignored
    }

    private let store: any Store
    private let providers: any IdentityProviders
    private let deletion: AccountDeletion
    private let units: UnitOfWork
    private let clock: any Clock
    private let log: any LogSink

    /// Longest `payload` accepted.
    public static let maxPayloadLength = 8192
    /// How long a handled notification is remembered (the maintenance job drops older ones).
    public static let retentionMillis: Int64 = 30 * 86_400_000

    public init(store: any Store, providers: any IdentityProviders, deletion: AccountDeletion, units: UnitOfWork, clock: any Clock, log: any LogSink = DiscardingLog()) {
        self.store = store
        self.providers = providers
        self.deletion = deletion
        self.units = units
        self.clock = clock
        self.log = log
    }

    /// Verifies and acts on one notification for `app`. A JWT that does not verify (signature,
    /// issuer, audience, times, `events`) throws 400 `auth/invalid-credential` and changes
    /// nothing; Apple's keys out of reach, 503 `provider/unavailable` (Apple retries).
    public func receive(app: AppContext, payload: String) throws -> Outcome {
        guard !payload.isEmpty, payload.utf8.count <= Self.maxPayloadLength else {
            throw GatehouseError.validation("payload", "Must be Apple's signed notification (a JWT of at most \(Self.maxPayloadLength) characters).")
        }
        let apple = app.settings.apple
        let audiences = apple.clientIDs + (apple.servicesID.map { [$0] } ?? [])
        guard !audiences.isEmpty else { throw GatehouseError(.providerNotConfigured, "Sign in with Apple is not configured for this app.") }
        let event: AppleAccountEvent
        do {
            event = try providers.verifyAppleNotification(payload, audiences: audiences)
        } catch {
            switch error {
            case .unreachable: throw error.clientError
            case .invalidToken(let reason, _), .rejected(let reason):
                log.info("an Apple notification was refused", ["reason": .string(reason)])
                throw GatehouseError(.invalidCredential, "The notification could not be verified with Apple's keys for this app.")
            }
        }
        guard let kind = event.kind else {
            log.info("an Apple notification of an unknown type was ignored", ["type": .string(String(event.type.prefix(64)))])
            return .ignored
        }
        let now = clock.nowMillis()
        return try units.run(store.app(app.id)) { tx -> Outcome in
            let linked = try tx.identities.user(provider: .apple, subject: event.subject)?.id
            guard let owner = try linked ?? tx.appleAccounts.revokedAppleIdentityOwner(subject: event.subject) else { return .unknownSubject }
            guard try tx.appleAccounts.recordAppleNotification(subjectDigest: Self.digest(event.subject), type: event.type, eventTime: event.eventTime, now: now)
            else { return .repeated }
            switch kind {
            case .emailDisabled, .emailEnabled: try relayChanged(tx, user: owner, event: event, forwarding: kind == .emailEnabled, now: now)
            case .consentRevoked: try consentRevoked(tx, user: owner, event: event, now: now)
            case .accountDeleted: try accountDeleted(tx, user: owner, event: event, now: now)
            }
            return .applied
        }
    }

    // MARK: - The events

    private func relayChanged(_ tx: any AppScopedStore, user: UserID, event: AppleAccountEvent, forwarding: Bool, now: Int64) throws {
        let identity = try tx.identities.all(of: user).first { $0.provider == .apple && $0.subject == event.subject }
        let address = try (event.email ?? identity?.email ?? tx.users.user(user)?.email).map { $0.lowercased() }
        guard let address, !address.isEmpty else { return }
        guard try tx.appleAccounts.setRelayForwarding(address, user: user, forwarding: forwarding, eventTime: event.eventTime, now: now) else { return }
        try tx.auditLog.record(Event(
            type: .userEmailRelayChanged, userID: user, sessionID: nil, ip: nil, userAgent: nil,
            data: ["forwarding": forwarding ? "on" : "off", "email": .string(address)], createdAt: now))
        try tx.auditLog.record(Event(
            type: .userUpdated, userID: user, sessionID: nil, ip: nil, userAgent: nil, data: ["fields": ["email_relay_forwarding"], "by": "apple"],
            createdAt: now))
    }

    private func consentRevoked(_ tx: any AppScopedStore, user: UserID, event: AppleAccountEvent, now: Int64) throws {
        let identities = try tx.identities.all(of: user)
        guard identities.contains(where: { $0.provider == .apple && $0.subject == event.subject }) else { return }  // revoked already
        let onlyMethod = identities.count == 1
        guard try tx.appleAccounts.revokeAppleIdentity(user, subject: event.subject, remember: true, now: now) else { return }
        let ended = try endSessions(tx, user: user, all: onlyMethod, reason: .appleConsentRevoked, now: now)
        try tx.auditLog.record(Event(
            type: .identityAppleConsentRevoked, userID: user, sessionID: nil, ip: nil, userAgent: nil,
            data: ["provider": "apple", "only_method": .bool(onlyMethod), "sessions_ended": .int(Int64(ended))], createdAt: now))
    }

    private func accountDeleted(_ tx: any AppScopedStore, user: UserID, event: AppleAccountEvent, now: Int64) throws {
        let identities = try tx.identities.all(of: user)
        let isThisAppleAccount = { (identity: Identity) in identity.provider == .apple && identity.subject == event.subject }
        // The Apple account was the only way in (or, its consent revoked before, the account has none left).
        let onlyMethod = identities.allSatisfy(isThisAppleAccount)
        _ = try tx.appleAccounts.takeRevokedAppleIdentity(subject: event.subject)
        if onlyMethod {
            try tx.auditLog.record(Event(
                type: .identityAppleAccountDeleted, userID: user, sessionID: nil, ip: nil, userAgent: nil,
                data: ["provider": "apple", "only_method": true, "erased": true], createdAt: now))
            _ = try deletion.eraseAfterAppleAccountDeletion(tx, user: user, now: now)
            return
        }
        var ended = 0
        if identities.contains(where: isThisAppleAccount), try tx.appleAccounts.revokeAppleIdentity(user, subject: event.subject, remember: false, now: now) {
            ended = try endSessions(tx, user: user, all: false, reason: .appleAccountDeleted, now: now)
        }
        try tx.auditLog.record(Event(
            type: .identityAppleAccountDeleted, userID: user, sessionID: nil, ip: nil, userAgent: nil,
            data: ["provider": "apple", "only_method": false, "erased": false, "sessions_ended": .int(Int64(ended))], createdAt: now))
    }

    /// Ends every session of the user (`all`), or those started with Apple; each with its `session.revoked`.
    private func endSessions(_ tx: any AppScopedStore, user: UserID, all: Bool, reason: SessionEndReason, now: Int64) throws -> Int {
        let ended = all
            ? try tx.sessions.endSessions(of: user, keeping: nil, reason: reason, now: now)
            : try tx.appleAccounts.endSessions(of: user, startedWith: .apple, reason: reason, now: now)
        for session in ended {
            try tx.auditLog.record(Event(
                type: .sessionRevoked, userID: user, sessionID: session, ip: nil, userAgent: nil, data: ["reason": .string(reason.rawValue)], createdAt: now))
        }
        return ended.count
    }

    /// The subject as the idempotency record keeps it: a digest, so that an erased account's
    /// Apple id does not stay behind for 30 days.
    static func digest(_ subject: String) -> String { Digest.hex(Digest.sha256(Array(subject.utf8))) }
}

/// Whether mail to an address may go: a private relay address (`@privaterelay.appleid.com`)
/// whose forwarding the user turned off at Apple is not mailed (``AppleNotifications``). The
/// mail outbox asks before each send, so a later `email-enabled` lets new mail go.
public struct AppleRelayForwarding: Sendable {
    /// Apple's private relay domain.
    public static let relayDomain = "privaterelay.appleid.com"
    /// The dead letter's reason, for the admin who reads it.
    public static let turnedOffReason = "the user's Apple private relay address has forwarding turned off (Hide My Email); the mail was not sent"

    private let store: any Store

    public init(store: any Store) {
        self.store = store
    }

    /// True when `address` is a relay address of `app` whose forwarding is off. Other addresses
    /// cost no query.
    public func isTurnedOff(app: AppID, address: String) throws -> Bool {
        let lowered = address.lowercased()
        guard lowered.hasSuffix("@" + Self.relayDomain) else { return false }
        return try store.app(app).appleAccounts.isRelayForwardingOff(lowered)
    }
}
