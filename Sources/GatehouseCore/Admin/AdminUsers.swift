/// The tenant admin's view of its users (`/v1/admin/users/{id}…`). Only the app's own users: any
/// other id, well formed or not, is 404 `request/not-found`, like an unknown one.
public struct AdminUsers: Sendable {
    private let store: any Store
    /// Runs the service's units of work and applies what follows their commit.
    private let units: UnitOfWork
    private let clock: any Clock

    public init(store: any Store, units: UnitOfWork, clock: any Clock) {
        self.store = store
        self.units = units
        self.clock = clock
    }

    /// A place in the user list's order.
    public typealias Position = KeysetPosition<UserID>

    /// `GET /v1/admin/users`: a page of the app's users, newest first, and where the next starts.
    /// `query`: an exact user id, or a case-insensitive substring of email, first or last name or
    /// display name; `anonymous`: only anonymous users (true), only the others (false), or all (nil).
    public func list(app: AppContext, query: String?, anonymous: Bool? = nil, after: Position?, limit: Int) throws -> (users: [(User, [Identity])], next: Position?) {
        let found = try store.app(app.id).users.users(matching: query, anonymous: anonymous, after: after.map { ($0.createdAt, $0.id) }, limit: limit + 1)
        return Position.page(found, limit: limit) { Position(createdAt: $0.0.createdAt, id: $0.0.id) }
    }

    /// `GET /v1/admin/users/{id}`: the user and their identities.
    public func user(app: AppContext, id rawID: String) throws -> (User, [Identity]) {
        guard let id = UserID(parsing: rawID), let found = try store.app(app.id).users.userWithIdentities(id) else { throw Self.notFound }
        return found
    }

    /// `DELETE /v1/admin/users/{id}/sessions`: every session of the user ends, on every node as a
    /// sign-out does (each recorded as `session.revoked` with reason `admin`).
    public func endSessions(app: AppContext, id rawID: String) throws {
        guard let id = UserID(parsing: rawID) else { throw Self.notFound }
        let now = clock.nowMillis()
        try units.run(store.app(app.id)) { tx in
            guard try tx.users.user(id) != nil else { throw Self.notFound }
            let ended = try tx.sessions.endSessions(of: id, keeping: nil, reason: .revoked, now: now)
            try tx.mfa.abandonChallenges(of: id)
            for session in ended {
                try tx.auditLog.record(Event(type: .sessionRevoked, userID: id, sessionID: session, ip: nil, userAgent: nil, data: ["reason": "admin"], createdAt: now))
            }
        }
    }

    /// `POST /v1/admin/users/{id}/ban`: the ban is set, every session ends at once on every node
    /// (`session.revoked`, reason `banned`), and `user.banned` is recorded, in one transaction.
    /// `suspendedUntil` must lie in the future.
    public func ban(app: AppContext, id rawID: String, sanctionCode rawCode: String, reason rawReason: String?, suspendedUntil: Int64?) throws -> (User, [Identity]) {
        guard let id = UserID(parsing: rawID) else { throw Self.notFound }
        let now = clock.nowMillis()
        var checks = FieldChecks()
        var code = ""
        var reason: String?
        try checks.run { () throws(GatehouseError) in
            let trimmed = rawCode.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty, trimmed.count <= 64, !InputRules.hasControlOrFormatCharacters(trimmed) else {
                throw .validation("sanction_code", "1 to 64 characters, no control characters.")
            }
            code = trimmed
        }
        try checks.run { () throws(GatehouseError) in
            guard let rawReason else { return }
            guard rawReason.count <= 500, !InputRules.hasControlOrFormatCharacters(rawReason) else {
                throw .validation("reason", "At most 500 characters, no control characters.")
            }
            reason = rawReason
        }
        try checks.run { () throws(GatehouseError) in
            if let until = suspendedUntil, until <= now { throw .validation("suspended_until", "Must be in the future (or null: permanent).") }
        }
        try checks.finish()
        let ban = Ban(sanctionCode: code, reason: reason, suspendedUntil: suspendedUntil)
        let user = try units.run(store.app(app.id)) { tx -> User in
            guard let user = try tx.users.setBan(id, ban, now: now) else { throw Self.notFound }
            let ended = try tx.sessions.endSessions(of: id, keeping: nil, reason: .revoked, now: now)
            try tx.mfa.abandonChallenges(of: id)
            for session in ended {
                try tx.auditLog.record(Event(type: .sessionRevoked, userID: id, sessionID: session, ip: nil, userAgent: nil, data: ["reason": "banned"], createdAt: now))
            }
            try tx.auditLog.record(Event(
                type: .userBanned, userID: id, sessionID: nil, ip: nil, userAgent: nil,
                data: ["sanction_code": .string(code), "suspended_until": suspendedUntil.map { .string(rfc3339(millis: $0)) } ?? .null], createdAt: now))
            return user
        }
        return (user, try store.app(app.id).identities.all(of: id))
    }

    /// `PATCH /v1/admin/users/{id}`: the user's custom data. `appMetadata` and `userMetadata`:
    /// absent (nil) keeps, an object replaces the whole of it, null empties it (``UserMetadata``);
    /// `displayName`: absent keeps, null or empty clears (``InputRules/displayName(_:field:)``).
    /// Every field is checked first; the change and its `user.updated` event (naming the fields it
    /// changed) commit together, the user's row locked, and every node's account cache learns of
    /// it, so the next access token minted (at a refresh) carries the new `app_metadata`. Nothing
    /// changed: nothing is written or recorded.
    public func update(app: AppContext, id rawID: String, appMetadata: JSON??, userMetadata: JSON??, displayName: String??) throws -> (User, [Identity]) {
        guard let id = UserID(parsing: rawID) else { throw Self.notFound }
        var checks = FieldChecks()
        var appData: UserMetadata?
        var userData: UserMetadata?
        var shown: String?? = nil
        try checks.run { () throws(GatehouseError) in
            if let appMetadata { appData = try UserMetadata.checked(appMetadata, field: "app_metadata") }
        }
        try checks.run { () throws(GatehouseError) in
            if let userMetadata { userData = try UserMetadata.checked(userMetadata, field: "user_metadata") }
        }
        try checks.run { () throws(GatehouseError) in
            if case .some(.some(let value)) = displayName { shown = .some(try InputRules.displayName(value)) } else { shown = displayName }
        }
        try checks.finish()
        let now = clock.nowMillis()
        let user = try units.run(store.app(app.id)) { tx -> User in
            guard let account = try tx.users.lockUser(id) else { throw Self.notFound }
            let newApp = appData ?? account.appMetadata
            let newUser = userData ?? account.userMetadata
            let newName = shown ?? account.displayName
            let changed = [
                ("app_metadata", newApp != account.appMetadata), ("user_metadata", newUser != account.userMetadata),
                ("display_name", newName != account.displayName),
            ].filter(\.1).map { JSON.string($0.0) }
            guard !changed.isEmpty else { return account }
            guard let updated = try tx.users.setCustomData(id, displayName: newName, appMetadata: newApp, userMetadata: newUser, now: now) else {
                throw Self.notFound
            }
            try tx.auditLog.record(Event(
                type: .userUpdated, userID: id, sessionID: nil, ip: nil, userAgent: nil, data: ["fields": .array(changed), "by": "admin"], createdAt: now))
            return updated
        }
        return (user, try store.app(app.id).identities.all(of: id))
    }

    /// `DELETE /v1/admin/users/{id}/ban`: the ban is lifted (`user.unbanned`).
    public func unban(app: AppContext, id rawID: String) throws -> (User, [Identity]) {
        guard let id = UserID(parsing: rawID) else { throw Self.notFound }
        let now = clock.nowMillis()
        let user = try units.run(store.app(app.id)) { tx -> User in
            guard let user = try tx.users.setBan(id, nil, now: now) else { throw Self.notFound }
            try tx.auditLog.record(Event(type: .userUnbanned, userID: id, sessionID: nil, ip: nil, userAgent: nil, createdAt: now))
            return user
        }
        return (user, try store.app(app.id).identities.all(of: id))
    }

    private static let notFound = GatehouseError(.notFound, "No such user in this app.")
}
