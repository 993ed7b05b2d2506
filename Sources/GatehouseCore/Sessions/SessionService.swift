import GatehouseCrypto

/// What a successful sign-in, sign-up or refresh hands to the client.
public struct SessionGrant: Sendable {
    public let user: User
    public let identities: [Identity]
    public let accessToken: String
    public let expiresIn: Int64
    public let refreshToken: String
    public let isNewUser: Bool
    /// The sign-in restored an account pending deletion.
    public var isRestored = false
}

/// Sessions: every sign-in's session and token pair (``startSession(app:_:user:method:isNewUser:origin:passwordHash:secondStep:)``),
/// refresh-token rotation, signing out, the user's devices, and recent login (`auth_time`).
public final class SessionService: Sendable {
    private let tokens: TokenService
    /// Runs the service's units of work and applies what follows their commit.
    private let units: UnitOfWork
    private let limiter: RateLimiter
    private let store: any Store
    private let cache: AccountCache
    private let clock: any Clock
    private let refreshGraceMillis: Int64
    private let metrics: any DomainMetrics

    public init(
        store: any Store, cache: AccountCache, tokens: TokenService, units: UnitOfWork, clock: any Clock, refreshGraceSeconds: Int,
        metrics: any DomainMetrics = NoDomainMetrics()
    ) {
        self.store = store
        self.cache = cache
        self.tokens = tokens
        self.units = units
        self.limiter = RateLimiter(clock: clock)
        self.clock = clock
        self.refreshGraceMillis = Int64(refreshGraceSeconds) * 1000
        self.metrics = metrics
    }

    // MARK: - Opening a session

    /// Creates a session and its first token pair; records `user.signed_in`. Every sign-in ends
    /// here, whatever its method: a banned user gets no session, and an account pending deletion
    /// is restored (`user.restored`, in the session's transaction). `user` may be a reading from
    /// before the sign-in's checks: the store refuses the session if the account was deleted or
    /// banned since, or (given `passwordHash`, the hash a password sign-in matched) its password
    /// changed.
    ///
    /// A first factor (`secondStep: .ask`) of a user with a confirmed factor, or of an app that
    /// requires one, opens no session: the outcome is the second step, its challenge stored in
    /// `data` (the caller's unit of work, which must commit before the caller answers
    /// ``SignInOutcome/session()``'s `auth/mfa-required`). `.done(amr:)` opens the session with
    /// that `amr`: the second step was answered, or the method is multi-factor by itself.
    /// `detail` adds to the `user.signed_in` event's data (a password sign-in's `rehashed`; a
    /// tenant provider's id as `method`, which names it instead of `external`).
    public func startSession(
        app: AppContext, _ data: any AppScopedStore, user: User, method: SignInMethod, isNewUser: Bool, origin: RequestOrigin, passwordHash: String? = nil,
        secondStep rule: SecondStepRule = .ask, detail: [String: JSON] = [:]
    ) throws -> SignInOutcome {
        let now = clock.nowMillis()
        if let ban = user.ban, ban.holds(at: now) { throw Self.disabled(ban) }
        var amr: [String]?
        switch rule {
        case .ask:
            let provider = method == .external ? detail["method"]?.stringValue : nil
            if let step = try secondStep(app: app, data, user: user, method: method, provider: provider, isNewUser: isNewUser, now: now) {
                return .secondStep(step)
            }
        case .done(let methods):
            amr = methods
        }
        func open(_ data: any AppScopedStore, _ user: User) throws -> SessionGrant {
            do {
                return try openSession(
                    app: app, data, user: user, method: method, amr: amr, isNewUser: isNewUser, origin: origin, passwordHash: passwordHash, detail: detail, now: now)
            } catch let refusal as SessionRefusal {
                throw Self.refused(refusal)
            }
        }
        guard user.pendingDeletion != nil else { return .session(try open(data, user)) }
        return .session(try units.run(data) { tx in
            guard try tx.deletion.cancel(user.id, now: now) else {
                // Another sign-in restored it meanwhile, or the purge took it.
                guard let current = try tx.users.user(user.id) else { throw Self.refused(.accountGone) }
                return try open(tx, current)
            }
            try tx.auditLog.record(Event(
                type: .userRestored, userID: user.id, sessionID: nil, ip: origin.ip, userAgent: origin.userAgent, data: ["method": detail["method"] ?? .string(method.rawValue)],
                createdAt: now))
            var restored = user
            restored.pendingDeletion = nil
            var grant = try open(tx, restored)
            grant.isRestored = true
            return grant
        })
    }

    /// What a sign-in answers when the account changed under it (see `insertSession`).
    private static func refused(_ refusal: SessionRefusal) -> GatehouseError {
        switch refusal {
        case .accountGone: GatehouseError(.invalidCredential, "This account has been deleted.")
        case .banned(let ban): disabled(ban)
        case .passwordChanged: GatehouseError(.invalidCredential, "The email or password is wrong.")
        }
    }

    private func openSession(
        app: AppContext, _ data: any AppScopedStore, user: User, method: SignInMethod, amr: [String]?, isNewUser: Bool, origin: RequestOrigin,
        passwordHash: String?, detail: [String: JSON], now: Int64
    ) throws -> SessionGrant {
        let session = Session(
            id: .generate(), userID: user.id, method: method, authTime: now, createdAt: now, lastUsedAt: now,
            expiresAt: now + app.settings.refreshTokenTTLSeconds * 1000, ip: origin.ip, userAgent: origin.userAgent, amr: amr,
            // A tenant's provider signs in with method `external` and names its id in `detail`'s `method`.
            provider: method == .external ? detail["method"]?.stringValue : nil)
        let refreshToken = tokens.newRefreshToken()
        var signInData = detail.merging(["method": .string(method.rawValue)]) { given, _ in given }
        if let amr { signInData["amr"] = .strings(amr) }
        // Its own transaction already (or the caller's): as a unit of work, its event is fanned out.
        try units.run(data) { tx in
            try tx.sessions.insertSession(
                session, refreshTokenHash: tokens.hash(refreshToken: refreshToken),
                event: Event(type: .userSignedIn, userID: user.id, sessionID: session.id, ip: origin.ip, userAgent: origin.userAgent, data: .object(signInData), createdAt: now),
                passwordHash: passwordHash)
        }
        var signedIn = user
        signedIn.lastSignInAt = now
        let identities = try data.identities.all(of: user.id)
        let access = try tokens.accessToken(app: app, user: signedIn, session: session)
        return SessionGrant(user: signedIn, identities: identities, accessToken: access.token, expiresIn: access.expiresIn, refreshToken: refreshToken, isNewUser: isNewUser)
    }

    // MARK: - Refresh and sign-out

    /// Rotates a refresh token (see `RefreshOutcome`).
    public func refresh(app: AppContext, refreshToken: String, origin: RequestOrigin) throws -> SessionGrant {
        guard !refreshToken.isEmpty, refreshToken.utf8.count <= 256 else { throw GatehouseError(.invalidRefreshToken, "The refresh token is not valid.") }
        let data = store.app(app.id)
        let successor = tokens.successor(of: refreshToken)
        let now = clock.nowMillis()
        // A reuse's events commit with the session's end, in the rotation's own transaction.
        // (Not a transaction around it: the common case stays one statement on PostgreSQL.)
        let outcome = try units.autocommit(data) { data in
            try data.sessions.rotateRefreshToken(
                presentedHash: tokens.hash(refreshToken: refreshToken), successorHash: tokens.hash(refreshToken: successor), graceMillis: refreshGraceMillis,
                usedSince: Self.usedSince(app, now: now), origin: origin, now: now
            ) { session in
                [
                    Event(type: .sessionRefreshReused, userID: session.userID, sessionID: session.id, ip: origin.ip, userAgent: origin.userAgent, createdAt: now),
                    Event(type: .sessionRevoked, userID: session.userID, sessionID: session.id, ip: origin.ip, userAgent: origin.userAgent, data: ["reason": "refresh_reused"], createdAt: now),
                ]
            }
        }
        switch outcome {
        case .invalid:
            throw GatehouseError(.invalidRefreshToken, "The refresh token is not valid: sign in again.")
        case .reused:
            metrics.refreshTokenReused()
            throw GatehouseError(.refreshTokenReused, "This refresh token was already used; the session has been ended. Sign in again.")
        case .rotated(let session), .retried(let session):
            guard let account = try cache.account(app: app.id, user: session.userID, store: store) else {
                throw GatehouseError(.invalidRefreshToken, "The refresh token is not valid.")
            }
            // An anonymous account is seen when it refreshes (it has no other way in): its expiry
            // counts from here (``AnonymousUsers``). At most one write an hour.
            if account.user.isAnonymous {
                try data.users.markAnonymousSeen(session.userID, now: now, before: now - AnonymousUsers.seenResolutionMillis)
            }
            let access = try tokens.accessToken(app: app, user: account.user, session: session)
            return SessionGrant(user: account.user, identities: account.identities, accessToken: access.token, expiresIn: access.expiresIn, refreshToken: successor, isNewUser: false)
        }
    }

    public enum SignOutScope: String, Sendable {
        case current, others, all
    }

    public func signOut(app: AppContext, claims: AccessClaims, scope: SignOutScope, origin: RequestOrigin) throws {
        let now = clock.nowMillis()
        try units.run(store.app(app.id)) { tx in
            let ended: [SessionID]
            switch scope {
            case .current:
                ended = try tx.sessions.endSession(claims.sessionID, user: claims.userID, reason: .signedOut, now: now) ? [claims.sessionID] : []
            case .others:
                ended = try tx.sessions.endSessions(of: claims.userID, keeping: claims.sessionID, reason: .signedOut, now: now)
            case .all:
                ended = try tx.sessions.endSessions(of: claims.userID, keeping: nil, reason: .signedOut, now: now)
                try tx.mfa.abandonChallenges(of: claims.userID)
            }
            for id in ended {
                try tx.auditLog.record(Event(type: .sessionSignedOut, userID: claims.userID, sessionID: id, ip: origin.ip, userAgent: origin.userAgent, data: ["scope": .string(scope.rawValue)], createdAt: now))
            }
        }
    }

    // MARK: - The user's sessions

    public func sessions(app: AppContext, claims: AccessClaims) throws -> [Session] {
        try sessions(app: app, user: claims.userID)
    }

    /// The user's live sessions (not ended, not expired, used within the app's idle timeout), as
    /// the user's own list shows them (`GET /v1/admin/users/{id}/sessions` too).
    public func sessions(app: AppContext, user: UserID) throws -> [Session] {
        let now = clock.nowMillis()
        return try store.app(app.id).sessions.activeSessions(user, now: now, usedSince: Self.usedSince(app, now: now))
    }

    /// The oldest last use of a live session: the app's idle timeout before `now`, or 0 without one.
    private static func usedSince(_ app: AppContext, now: Int64) -> Int64 {
        app.settings.refreshTokenIdleSeconds.map { now - $0 * 1000 } ?? 0
    }

    /// Signs one of the user's devices out. Another user's session (or an unknown one) is 404.
    public func endSession(app: AppContext, claims: AccessClaims, id: SessionID, origin: RequestOrigin) throws {
        let now = clock.nowMillis()
        try units.run(store.app(app.id)) { tx in
            guard try tx.sessions.endSession(id, user: claims.userID, reason: .revoked, now: now) else { throw GatehouseError(.notFound, "No such session.") }
            try tx.auditLog.record(Event(type: .sessionRevoked, userID: claims.userID, sessionID: id, ip: origin.ip, userAgent: origin.userAgent, data: ["reason": "user"], createdAt: now))
        }
    }

    // MARK: - Recent login

    /// The signed-in user's budget of failed reauthentications (whatever the method) and current
    /// passwords: 10 in 15 minutes, forgotten at the next success (``refreshAuthTime(app:claims:)``).
    public func requireReauthenticationGuessesLeft(_ app: AppContext, claims: AccessClaims) throws {
        try requireGuessesLeft(store.app(app.id), bucket: Self.reauthGuessBucket, subject: claims.userID.rawValue)
    }

    /// Counts one failed reauthentication against the signed-in user.
    public func countFailedReauthentication(_ app: AppContext, claims: AccessClaims) throws {
        try countFailedGuess(store.app(app.id), bucket: Self.reauthGuessBucket, subject: claims.userID.rawValue)
    }

    /// After a successful reauthentication: `auth_time` is now, and a new access token says so.
    public func refreshAuthTime(app: AppContext, claims: AccessClaims) throws -> (token: String, expiresIn: Int64) {
        let data = store.app(app.id)
        try limiter.reset(data, bucket: Self.reauthGuessBucket, subject: claims.userID.rawValue)
        let now = clock.nowMillis()
        try data.sessions.setAuthTime(claims.sessionID, now: now)
        guard var session = try data.sessions.session(claims.sessionID), session.endedAt == nil, let user = try data.users.user(claims.userID) else {
            throw GatehouseError(.sessionRevoked, "This session has ended; sign in again.")
        }
        session.authTime = now
        return try tokens.accessToken(app: app, user: user, session: session)
    }

    /// The recent-login policy for a change to `user`'s account or sign-in methods, where an
    /// anonymous user is exempt: it has no method to reauthenticate with, and nobody but the
    /// session's holder to protect (the session is the account's only key). So an anonymous
    /// user upgrades, and deletes its account, within any live session, as Firebase lets it.
    public func requireRecentLogin(app: AppContext, claims: AccessClaims, user: User) throws(GatehouseError) {
        guard !user.isAnonymous else { return }
        try requireRecentLogin(app: app, claims: claims)
    }

    /// The recent-login policy: `auth_time` within the app's `recent_login_seconds`, else 403 `auth/requires-recent-login`.
    public func requireRecentLogin(app: AppContext, claims: AccessClaims) throws(GatehouseError) {
        if clock.nowSeconds - claims.authTime > app.settings.recentLoginSeconds {
            throw GatehouseError(.requiresRecentLogin, "Sign in again (POST /v1/auth/reauthenticate) before doing this.")
        }
    }

    /// 403 `auth/user-disabled`, with the ban's `sanction_code` and `suspended_until` (null: permanent).
    static func disabled(_ ban: Ban) -> GatehouseError {
        var error = GatehouseError(.userDisabled, "This account is disabled.")
        error.extensions = [
            "sanction_code": .string(ban.sanctionCode), "suspended_until": ban.suspendedUntil.map { .string(rfc3339(millis: $0)) } ?? .null,
        ]
        return error
    }

    static let reauthGuessBucket = "reauth_user"

    private func requireGuessesLeft(_ data: any AppScopedStore, bucket: String, subject: String) throws {
        try limiter.requireAccountGuessesLeft(data, bucket: bucket, subject: subject)
    }

    private func countFailedGuess(_ data: any AppScopedStore, bucket: String, subject: String) throws {
        try limiter.countFailedAccountGuess(data, bucket: bucket, subject: subject)
    }
}
