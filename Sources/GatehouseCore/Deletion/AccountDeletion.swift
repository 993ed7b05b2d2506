import GatehouseCrypto
import Synchronization

/// Removes what belongs to an account besides the rows the store erases itself, in the erasing
/// transaction. The files of issue 13 register one; until then the list is empty.
public protocol AccountDataEraser: Sendable {
    func erase(_ tx: any AppScopedStore, user: UserID, now: Int64) throws
}

/// The end of an account (API.md, "Deleting the account"): `DELETE /v1/me`, the tenant admin's
/// `DELETE /v1/admin/users/{id}` and the purge of accounts whose grace period has passed.
///
/// In one transaction: every session ends (on every node, as sign-out does), `user.deleted` is
/// recorded, and either the account is erased — its stored Apple tokens queued for revocation in
/// the outbox — or, with the app's `deletion_grace_days`, it is marked pending deletion and keeps
/// its sign-in methods (and so its email) until the purge, unless a sign-in restores it
/// (``SessionService/startSession(app:_:user:method:isNewUser:origin:passwordHash:)``).
public final class AccountDeletion: Sendable {
    private let store: any Store
    private let directory: AppDirectory
    private let sessions: SessionService
    private let sealer: SecretSealer
    private let clock: any Clock
    private let erasers: [any AccountDataEraser]
    /// Runs the service's units of work and applies what follows their commit.
    private let units: UnitOfWork
    private let log: any LogSink
    /// The app the next expiry round of anonymous accounts starts with (its index among them),
    /// when the last one stopped at its limit: the others' turn first.
    private let anonymousTurn = Atomic<Int>(0)

    /// A deleted account's tombstone is kept as long as an access token lives, plus a day: every
    /// node's revocation poll reads its ended sessions until then.
    public static let tombstoneMillis: Int64 = 2 * 86_400_000

    public init(
        store: any Store, directory: AppDirectory, sessions: SessionService, sealer: SecretSealer, clock: any Clock,
        erasers: [any AccountDataEraser] = [], units: UnitOfWork, log: any LogSink = DiscardingLog()
    ) {
        self.store = store
        self.directory = directory
        self.sessions = sessions
        self.sealer = sealer
        self.clock = clock
        self.erasers = erasers
        self.units = units
        self.log = log
    }

    /// `DELETE /v1/me`: needs a recent login (not of an anonymous account). `appleAuthorizationCode` is used only when no Apple
    /// token is stored for the account: redeemed at Apple (by the outbox) and what it yields revoked.
    public func deleteOwnAccount(app: AppContext, claims: AccessClaims, reason rawReason: String?, appleAuthorizationCode: String?, origin: RequestOrigin) throws {
        var checks = FieldChecks()
        var reason: String?
        try checks.run { () throws(GatehouseError) in reason = try Self.reason(rawReason) }
        try checks.run { () throws(GatehouseError) in
            if let code = appleAuthorizationCode, code.trimmingCharacters(in: .whitespaces).isEmpty || code.utf8.count > 1024 || InputRules.hasControlOrFormatCharacters(code) {
                throw .validation("apple_authorization_code", "Must be Apple's authorization code (at most 1024 characters).")
            }
        }
        try checks.finish()
        let gone = GatehouseError(.sessionRevoked, "This account no longer exists.")
        // An anonymous account is exempt: it has no way to reauthenticate (``SessionService/requireRecentLogin(app:claims:user:)``).
        guard let user = try store.app(app.id).users.user(claims.userID) else { throw gone }
        try sessions.requireRecentLogin(app: app, claims: claims, user: user)
        try delete(
            app: app, user: claims.userID, graceDays: app.settings.deletionGraceDays, reason: reason, appleAuthorizationCode: appleAuthorizationCode,
            by: "user", sessionID: claims.sessionID, origin: origin, missing: gone)
    }

    /// `DELETE /v1/admin/users/{id}`: the same deletion, without a recent login, and final: the
    /// account is erased at once whatever `deletion_grace_days` says (the grace period protects a
    /// user from their own mistake, not from an admin), also when its user had asked for its
    /// deletion and it is pending. An erased or unknown one, or another app's, is 404.
    public func deleteByAdmin(app: AppContext, id rawID: String) throws {
        let notFound = GatehouseError(.notFound, "No such user in this app.")
        guard let id = UserID(parsing: rawID) else { throw notFound }
        try delete(app: app, user: id, graceDays: 0, reason: nil, appleAuthorizationCode: nil, by: "admin", sessionID: nil, origin: nil, missing: notFound)
    }

    /// - Parameter graceDays: 0 erases at once; else the account is pending deletion that long.
    private func delete(
        app: AppContext, user id: UserID, graceDays: Int64, reason: String?, appleAuthorizationCode: String?, by actor: String, sessionID: SessionID?,
        origin: RequestOrigin?, missing: GatehouseError
    ) throws {
        let now = clock.nowMillis()
        try units.run(store.app(app.id)) { tx in
            // The user's row first, held to the end: a sign-in or a kept Apple token racing this
            // deletion either committed before (and is ended or revoked below) or finds it done.
            guard let user = try tx.users.lockUser(id) else { throw missing }
            let ended = try tx.sessions.endSessions(of: id, keeping: nil, reason: .deleted, now: now)
            for session in ended {
                try tx.auditLog.record(Event(
                    type: .sessionRevoked, userID: id, sessionID: session, ip: origin?.ip, userAgent: origin?.userAgent, data: ["reason": "deleted"],
                    createdAt: now))
            }
            // Already pending, and no erase asked for now: nothing more to do.
            guard user.pendingDeletion == nil || graceDays == 0 else { return }
            var data: [String: JSON] = ["by": .string(actor), "reason": .optional(reason)]
            let tokens = try tx.identities.providerTokens(id).filter { $0.provider == .apple }
            if let code = appleAuthorizationCode, tokens.isEmpty {
                // A code lives minutes: it cannot wait for the purge, so it is redeemed and revoked now.
                data["apple_authorization_code"] = .string(try queueCode(tx, code, app: app, user: id, now: now))
            }
            if graceDays > 0 {
                let pending = PendingDeletion(requestedAt: now, purgeAt: now + graceDays * 86_400_000)
                guard try tx.deletion.schedule(id, pending, now: now) else { throw missing }
                data["purge_at"] = .string(rfc3339(millis: pending.purgeAt))
                try tx.auditLog.record(Event(type: .userDeleted, userID: id, sessionID: sessionID, ip: origin?.ip, userAgent: origin?.userAgent, data: .object(data), createdAt: now))
            } else {
                // Recorded before the erase, while the account can still be read (its webhooks carry it).
                // The tokens read above are the ones the erase deletes: the row is held.
                data["apple_revocations"] = try queueRevocations(tx, tokens, app: app, user: id, now: now)
                try tx.auditLog.record(Event(type: .userDeleted, userID: id, sessionID: sessionID, ip: origin?.ip, userAgent: origin?.userAgent, data: .object(data), createdAt: now))
                guard try erase(tx, user: id, dueBy: nil, now: now) != nil else { throw missing }
            }
        }
    }

    /// Erases an account at once, in the caller's unit of work `tx`, because Apple told the app
    /// the user deleted the Apple account that was its only way in (``AppleNotifications``): as
    /// an admin's deletion (every session ends, `user.deleted` with `by: "apple"`, then the
    /// erase), except that its kept Apple tokens are dropped unrevoked: Apple revoked them with
    /// the Apple account. No grace period: nothing could sign in to restore it. False when the
    /// account is gone already.
    public func eraseAfterAppleAccountDeletion(_ tx: any AppScopedStore, user id: UserID, now: Int64) throws -> Bool {
        guard try tx.users.lockUser(id) != nil else { return false }
        let ended = try tx.sessions.endSessions(of: id, keeping: nil, reason: .deleted, now: now)
        for session in ended {
            try tx.auditLog.record(Event(type: .sessionRevoked, userID: id, sessionID: session, ip: nil, userAgent: nil, data: ["reason": "deleted"], createdAt: now))
        }
        let tokens = try tx.identities.providerTokens(id).filter { $0.provider == .apple }
        try tx.auditLog.record(Event(
            type: .userDeleted, userID: id, sessionID: nil, ip: nil, userAgent: nil,
            data: ["by": "apple", "reason": .null, "apple_revocations": ["status": "revoked_by_apple", "count": .int(Int64(tokens.count))]],
            createdAt: now))
        return try erase(tx, user: id, dueBy: nil, now: now) != nil
    }

    // MARK: - The purge

    /// Erases the accounts whose grace period has passed, up to `limit` of them, queuing their Apple
    /// revocations then; and drops tombstones older than ``tombstoneMillis``. Safe on several nodes
    /// at once: an account is erased by one of them (the erase is guarded), the others skip it.
    /// Returns the accounts erased and the tombstones dropped.
    public func purge(now: Int64, limit: Int = 500) throws -> Int {
        var handled = 0
        var failures = 0
        for (appID, userID) in try store.accountsDueForPurge(now: now, limit: limit) {
            // One account that cannot be erased (logged) does not hold up the others.
            do {
                if try purge(app: appID, user: userID, now: now) { handled += 1 }
            } catch {
                failures += 1
                log.error("an account due for purge could not be erased", ["app_id": .string(appID.rawValue), "user_id": .string(userID.rawValue), "error": .string("\(error)")])
            }
        }
        while case let bite = try store.purgeErasedAccounts(before: now - Self.tombstoneMillis, limit: 1_000), bite > 0 {
            handled += bite
            if bite < 1_000 { break }
        }
        return handled
    }

    /// Erases one account whose grace period has passed; false when another node did, or a sign-in restored it.
    private func purge(app appID: AppID, user userID: UserID, now: Int64) throws -> Bool {
        guard let app = try directory.current(id: appID) else { return false }
        return try units.run(store.app(appID)) { tx -> Bool in
            // First, and guarded: it holds the row, and of two nodes only one erases.
            guard let tokens = try erase(tx, user: userID, dueBy: now, now: now) else { return false }
            _ = try tx.sessions.endSessions(of: userID, keeping: nil, reason: .deleted, now: now)
            let revocations = try queueRevocations(tx, tokens.filter { $0.provider == .apple }, app: app, user: userID, now: now)
            try tx.auditLog.record(Event(type: .userPurged, userID: userID, sessionID: nil, ip: nil, userAgent: nil, data: ["apple_revocations": revocations], createdAt: now))
            return true
        }
    }

    // MARK: - Anonymous accounts

    /// Erases the anonymous accounts not seen (signed in or refreshed) for their app's
    /// `anonymous_ttl_days`, as an admin's deletion erases an account (sessions, files,
    /// factors; `user.deleted` with `by: "expiry"` and `reason: "anonymous_expired"`, so the app's
    /// `user.deleted` webhook hears of it and can drop what it kept for the user id). Each app in
    /// turn, at most `perApp` of one app and `limit` in all a round: an app with a backlog does
    /// not hold up the others, and the next round starts after the last app served. Safe on
    /// several nodes at once: each erase is guarded (still anonymous, still unseen). Returns the
    /// accounts erased.
    public func eraseUnseenAnonymousUsers(now: Int64, perApp: Int = 200, limit: Int = 2_000) throws -> Int {
        let apps = try store.appsWithAnonymousUsers()
        guard !apps.isEmpty else { return 0 }
        let first = anonymousTurn.load(ordering: .relaxed) % apps.count
        var erased = 0
        var next = first
        for index in Array(first..<apps.count) + Array(0..<first) where erased < limit {
            do {
                erased += try eraseUnseenAnonymousUsers(of: apps[index], now: now, limit: min(perApp, limit - erased))
            } catch {
                // One app's trouble (logged) does not hold up the others.
                log.error("anonymous accounts could not be expired", ["app_id": .string(apps[index].rawValue), "error": .string("\(error)")])
            }
            next = (index + 1) % apps.count
        }
        anonymousTurn.store(next, ordering: .relaxed)
        return erased
    }

    private func eraseUnseenAnonymousUsers(of appID: AppID, now: Int64, limit: Int) throws -> Int {
        guard let app = try directory.app(id: appID) else { return 0 }
        let cutoff = now - app.settings.anonymousTTLDays * 86_400_000
        let data = store.app(appID)
        var erased = 0
        for id in try data.users.anonymousUsers(unseenBefore: cutoff, limit: limit) {
            let done = try units.run(data) { tx -> Bool in
                // The row held, then checked again: a refresh (or an upgrade) since the listing keeps it.
                guard try tx.users.lockUser(id) != nil, let seen = try tx.users.anonymousLastSeen(id), seen < cutoff else { return false }
                for session in try tx.sessions.endSessions(of: id, keeping: nil, reason: .deleted, now: now) {
                    try tx.auditLog.record(Event(type: .sessionRevoked, userID: id, sessionID: session, ip: nil, userAgent: nil, data: ["reason": "deleted"], createdAt: now))
                }
                try tx.auditLog.record(Event(
                    type: .userDeleted, userID: id, sessionID: nil, ip: nil, userAgent: nil,
                    data: ["by": "expiry", "reason": "anonymous_expired", "last_seen_at": .string(rfc3339(millis: seen))], createdAt: now))
                return try erase(tx, user: id, dueBy: nil, now: now) != nil
            }
            if done { erased += 1 }
        }
        return erased
    }

    // MARK: -

    private func erase(_ tx: any AppScopedStore, user: UserID, dueBy: Int64?, now: Int64) throws -> [StoredProviderToken]? {
        guard let tokens = try tx.deletion.erase(user, dueBy: dueBy, now: now) else { return nil }
        for eraser in erasers { try eraser.erase(tx, user: user, now: now) }
        return tokens
    }

    /// Queues the revocation of each stored Apple token (``AppleRevocation/queue(_:in:app:user:sealer:now:log:)``).
    private func queueRevocations(_ tx: any AppScopedStore, _ tokens: [StoredProviderToken], app: AppContext, user: UserID, now: Int64) throws -> JSON {
        try AppleRevocation.queue(tokens, in: tx, app: app, user: user, sealer: sealer, now: now, log: log)
    }

    /// Queues the redemption and revocation of an Apple authorization code, for the user's Apple
    /// accounts only (the code's account is checked against them). What the event says of it.
    private func queueCode(_ tx: any AppScopedStore, _ code: String, app: AppContext, user: UserID, now: Int64) throws -> String {
        let apple = app.settings.apple
        let clientIDs = apple.clientIDs + (apple.servicesID.map { [$0] } ?? [])
        guard apple.credentials != nil, !clientIDs.isEmpty else { return "not_configured" }
        let subjects = try tx.identities.all(of: user).filter { $0.provider == .apple }.map(\.subject)
        guard !subjects.isEmpty else { return "no_apple_identity" }
        let item = AppleRevocation.redeemAndRevoke(code: code, clientIDs: clientIDs, subjects: subjects, of: user, app: app.id, sealer: sealer)
        return try tx.outbox.enqueue(item, now: now) ? "queued" : "already_queued"
    }

    private static func reason(_ raw: String?) throws(GatehouseError) -> String? {
        guard let raw else { return nil }
        guard raw.count <= 500, !InputRules.hasControlOrFormatCharacters(raw) else {
            throw .validation("reason", "At most 500 characters, no control characters.")
        }
        let trimmed = raw.trimmingCharacters(in: .whitespaces)
        return trimmed.isEmpty ? nil : trimmed
    }
}
