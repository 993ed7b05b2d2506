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

/// Accounts with passwords, sessions and tokens: every behaviour of API.md's "Tokens", the
/// password rows of "Sign-in and tokens" and the account rows that need no outside provider.
public final class AccountService: Sendable {
    let tokens: TokenService
    private let hasher: PasswordHasher
    let limiter: RateLimiter
    private let store: any Store
    private let cache: AccountCache
    private let clock: any Clock
    private let refreshGraceMillis: Int64
    private let limiterSubjectKey: HMACKey
    /// Sign-up's verification mail.
    private let emailCodes: EmailCodes
    /// Runs the service's units of work and applies what follows their commit.
    let units: UnitOfWork
    private let log: any LogSink
    /// Sign-ins and refresh reuse, for the operator's metrics (the other sign-in services count through it too).
    let metrics: any DomainMetrics

    /// - Parameter cache: the cache the store reports user changes to.
    /// - Parameter masterKey: for the key that turns emails into limiter subjects (``MasterKeyDerivation``).
    public init(
        store: any Store, cache: AccountCache, tokens: TokenService, hasher: PasswordHasher, clock: any Clock, refreshGraceSeconds: Int, masterKey: [UInt8],
        emailCodes: EmailCodes, units: UnitOfWork, log: any LogSink = DiscardingLog(), metrics: any DomainMetrics = NoDomainMetrics()
    ) {
        self.units = units
        self.log = log
        self.metrics = metrics
        self.emailCodes = emailCodes
        self.limiterSubjectKey = HMACKey(MasterKeyDerivation.key(for: .limiterSubjects, from: masterKey))
        self.store = store
        self.cache = cache
        self.tokens = tokens
        self.hasher = hasher
        self.limiter = RateLimiter(clock: clock)
        self.clock = clock
        self.refreshGraceMillis = Int64(refreshGraceSeconds) * 1000
    }

    // MARK: - Signing up and in

    public func signUp(app: AppContext, email rawEmail: String, password: String, firstName: String?, lastName: String?, origin: RequestOrigin) throws -> SessionGrant {
        try metrics.countingSignIn(.password) { try createAccount(app: app, email: rawEmail, password: password, firstName: firstName, lastName: lastName, origin: origin) }
    }

    private func createAccount(app: AppContext, email rawEmail: String, password: String, firstName: String?, lastName: String?, origin: RequestOrigin) throws -> SessionGrant {
        let data = store.app(app.id)
        try limitAuth(app, data, origin)
        guard app.settings.allowSignup else { throw GatehouseError(.signupDisabled, "This app does not accept new accounts.") }
        try requireMethod(.password, app)
        var checks = FieldChecks()
        var email = ""
        var first: String?
        var last: String?
        try checks.run { () throws(GatehouseError) in email = try InputRules.email(rawEmail) }
        try checks.run { () throws(GatehouseError) in try InputRules.presentedPassword(password) }
        try checks.run { () throws(GatehouseError) in first = try firstName.flatMap { name throws(GatehouseError) in try InputRules.name(name, field: "first_name") } }
        try checks.run { () throws(GatehouseError) in last = try lastName.flatMap { name throws(GatehouseError) in try InputRules.name(name, field: "last_name") } }
        try checks.finish()
        try InputRules.newPassword(password, minimum: app.settings.passwordMinLength)
        // Also an account that signs in with a provider and has this email, unless the app keeps
        // such accounts separate (`email_collision`, as for provider sign-in).
        if try data.passwordUser(email: email) != nil || (app.settings.emailCollision == "reject" && data.emailInUse(email, except: nil)) {
            throw GatehouseError(.emailAlreadyInUse, "An account with this email already exists.")
        }

        let hash = try hasher.hash(password)
        let now = clock.nowMillis()
        let user = User(id: .generate(), email: email, emailVerified: false, firstName: first, lastName: last, createdAt: now, updatedAt: now, lastSignInAt: now)
        // The account, its event, its verification mail and its first session commit together.
        let grant = try units.run(data) { tx in
            // Checked again holding the address: another sign-up or a code sign-in may have taken it.
            try emailCodes.lockAddress(tx, email)
            if try tx.passwordUser(email: email) != nil || (app.settings.emailCollision == "reject" && tx.emailInUse(email, except: nil)) {
                throw GatehouseError(.emailAlreadyInUse, "An account with this email already exists.")
            }
            try tx.insertUser(
                user, passwordHash: hash, identity: Identity(provider: "password", subject: email, email: email, createdAt: now),
                event: Event(type: .userSignedUp, userID: user.id, sessionID: nil, ip: origin.ip, userAgent: origin.userAgent, data: ["method": "password"], createdAt: now))
            try queueVerification(tx, app: app, email: email, user: user.id)
            return try startSession(app: app, tx, user: user, method: .password, isNewUser: true, origin: origin)
        }
        return grant
    }

    /// Sign-up's verification code. Past the address's send windows (an address signed up,
    /// deleted and signed up again and again), or to an address the mailer cannot write, the
    /// account is made all the same, without the mail.
    private func queueVerification(_ tx: any AppScopedStore, app: AppContext, email: String, user: UserID) throws {
        do {
            try emailCodes.send(tx, app: app, purpose: .verification, address: email, userID: user, mail: EmailToSend(.verification, to: email, app: app), deliver: true)
        } catch let error as GatehouseError where error.code == .tooManyRequests || error.code == .validationFailed {
            log.info("sign-up sent no verification mail", ["app_id": .string(app.id.rawValue), "user_id": .string(user.rawValue), "reason": .string(error.code.rawValue)])
        }
    }

    public func signIn(app: AppContext, email rawEmail: String, password: String, origin: RequestOrigin) throws -> SessionGrant {
        try metrics.countingSignIn(.password) { try checkPassword(app: app, email: rawEmail, password: password, origin: origin) }
    }

    private func checkPassword(app: AppContext, email rawEmail: String, password: String, origin: RequestOrigin) throws -> SessionGrant {
        let data = store.app(app.id)
        try limitAuth(app, data, origin)
        try requireMethod(.password, app)
        var checks = FieldChecks()
        var email = ""
        try checks.run { () throws(GatehouseError) in email = try InputRules.email(rawEmail) }
        try checks.run { () throws(GatehouseError) in try InputRules.presentedPassword(password) }
        try checks.finish()
        // Per account too, or a botnet (or one IPv6 /48) guesses one password without bound.
        let guesses = guessSubject(email: email)
        let failuresBefore = try requireGuessesLeft(data, bucket: Self.signInGuessBucket, subject: guesses)
        var found = try data.passwordUser(email: email)
        // An account stored before emails were put in NFC is found by the form it was typed in.
        let typed = rawEmail.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        // (Compared by scalars: Swift's == holds the two forms equal.)
        if found == nil, !typed.unicodeScalars.elementsEqual(email.unicodeScalars) { found = try data.passwordUser(email: typed) }
        // Unknown email and wrong password: the same answer after the same work.
        guard try hasher.verify(password, encoded: found?.1), let (user, hash) = found else {
            try countFailedGuess(data, bucket: Self.signInGuessBucket, subject: guesses)
            try units.record(Event(type: .userSignInFailed, userID: found?.0.id, sessionID: nil, ip: origin.ip, userAgent: origin.userAgent, data: ["method": "password"], createdAt: clock.nowMillis()), in: data)
            throw GatehouseError(.invalidCredential, "The email or password is wrong.")
        }
        // A write only when there were failures to forget: most sign-ins have none.
        if failuresBefore > 0 { try limiter.reset(data, bucket: Self.signInGuessBucket, subject: guesses) }
        // The session opens only while the account's hash is the one the password matched.
        var matched = hash
        if hasher.needsRehash(hash) {
            let rehashed = try hasher.hash(password)
            if try data.setPasswordHash(user.id, hash: rehashed, replacing: hash, addIdentity: nil, now: clock.nowMillis()) {
                matched = rehashed
            } else if let current = try data.passwordHash(user.id), try hasher.verify(password, encoded: current) {
                // Another sign-in with this password rehashed it first (the first after the
                // parameters changed, from two devices at once). Else the password changed, and
                // the session is refused.
                matched = current
            }
        }
        return try startSession(app: app, data, user: user, method: .password, isNewUser: false, origin: origin, passwordHash: matched)
    }

    /// Creates a session and its first token pair; records `user.signed_in`. Every sign-in ends
    /// here, whatever its method: a banned user gets no session, and an account pending deletion
    /// is restored (`user.restored`, in the session's transaction). `user` may be a reading from
    /// before the sign-in's checks: the store refuses the session if the account was deleted or
    /// banned since, or (given `passwordHash`, the hash a password sign-in matched) its password
    /// changed.
    public func startSession(
        app: AppContext, _ data: any AppScopedStore, user: User, method: SignInMethod, isNewUser: Bool, origin: RequestOrigin, passwordHash: String? = nil
    ) throws -> SessionGrant {
        let now = clock.nowMillis()
        if let ban = user.ban, ban.holds(at: now) { throw Self.disabled(ban) }
        func open(_ data: any AppScopedStore, _ user: User) throws -> SessionGrant {
            do {
                return try openSession(app: app, data, user: user, method: method, isNewUser: isNewUser, origin: origin, passwordHash: passwordHash, now: now)
            } catch let refusal as SessionRefusal {
                throw Self.refused(refusal)
            }
        }
        guard user.pendingDeletion != nil else { return try open(data, user) }
        return try units.run(data) { tx in
            guard try tx.deletion.cancel(user.id, now: now) else {
                // Another sign-in restored it meanwhile, or the purge took it.
                guard let current = try tx.user(user.id) else { throw Self.refused(.accountGone) }
                return try open(tx, current)
            }
            try tx.record(Event(
                type: .userRestored, userID: user.id, sessionID: nil, ip: origin.ip, userAgent: origin.userAgent, data: ["method": .string(method.rawValue)],
                createdAt: now))
            var restored = user
            restored.pendingDeletion = nil
            var grant = try open(tx, restored)
            grant.isRestored = true
            return grant
        }
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
        app: AppContext, _ data: any AppScopedStore, user: User, method: SignInMethod, isNewUser: Bool, origin: RequestOrigin, passwordHash: String?, now: Int64
    ) throws -> SessionGrant {
        let session = Session(
            id: .generate(), userID: user.id, method: method, authTime: now, createdAt: now, lastUsedAt: now,
            expiresAt: now + app.settings.refreshTokenTTLSeconds * 1000, ip: origin.ip, userAgent: origin.userAgent)
        let refreshToken = tokens.newRefreshToken()
        // Its own transaction already (or the caller's): as a unit of work, its event is fanned out.
        try units.run(data) { tx in
            try tx.insertSession(
                session, refreshTokenHash: tokens.hash(refreshToken: refreshToken),
                event: Event(type: .userSignedIn, userID: user.id, sessionID: session.id, ip: origin.ip, userAgent: origin.userAgent, data: ["method": .string(method.rawValue)], createdAt: now),
                passwordHash: passwordHash)
        }
        var signedIn = user
        signedIn.lastSignInAt = now
        let identities = try data.identities(user.id)
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
        let outcome = try units.autocommit(data) { data in
            try data.rotateRefreshToken(
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
                ended = try tx.endSession(claims.sessionID, user: claims.userID, reason: .signedOut, now: now) ? [claims.sessionID] : []
            case .others:
                ended = try tx.endSessions(of: claims.userID, keeping: claims.sessionID, reason: .signedOut, now: now)
            case .all:
                ended = try tx.endSessions(of: claims.userID, keeping: nil, reason: .signedOut, now: now)
            }
            for id in ended {
                try tx.record(Event(type: .sessionSignedOut, userID: claims.userID, sessionID: id, ip: origin.ip, userAgent: origin.userAgent, data: ["scope": .string(scope.rawValue)], createdAt: now))
            }
        }
    }

    // MARK: - Recent login

    /// A new access token with a fresh `auth_time`, after checking the password again. The refresh token stays.
    public func reauthenticate(app: AppContext, claims: AccessClaims, password: String, origin: RequestOrigin) throws -> (token: String, expiresIn: Int64) {
        let data = store.app(app.id)
        try limitAuth(app, data, origin)
        try InputRules.presentedPassword(password)
        try requireReauthenticationGuessesLeft(app, claims: claims)
        guard try hasher.verify(password, encoded: try data.passwordHash(claims.userID)) else {
            try countFailedReauthentication(app, claims: claims)
            try units.record(Event(type: .userSignInFailed, userID: claims.userID, sessionID: claims.sessionID, ip: origin.ip, userAgent: origin.userAgent, data: ["method": "password", "reauthentication": true], createdAt: clock.nowMillis()), in: data)
            throw GatehouseError(.invalidCredential, "The password is wrong.")
        }
        return try refreshAuthTime(app: app, claims: claims)
    }

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
        try data.setAuthTime(claims.sessionID, now: now)
        guard var session = try data.session(claims.sessionID), session.endedAt == nil, let user = try data.user(claims.userID) else {
            throw GatehouseError(.sessionRevoked, "This session has ended; sign in again.")
        }
        session.authTime = now
        return try tokens.accessToken(app: app, user: user, session: session)
    }

    /// The recent-login policy: `auth_time` within the app's `recent_login_seconds`, else 403 `auth/requires-recent-login`.
    public func requireRecentLogin(app: AppContext, claims: AccessClaims) throws(GatehouseError) {
        if clock.nowSeconds - claims.authTime > app.settings.recentLoginSeconds {
            throw GatehouseError(.requiresRecentLogin, "Sign in again (POST /v1/auth/reauthenticate) before doing this.")
        }
    }

    // MARK: - The signed-in user

    public func me(app: AppContext, claims: AccessClaims) throws -> Account {
        guard let found = try cache.account(app: app.id, user: claims.userID, store: store) else {
            throw GatehouseError(.sessionRevoked, "This account no longer exists.")
        }
        return found
    }

    /// `PATCH /v1/me`: names (absent keeps, null or empty clears) and, through Files, the photo
    /// (``FilesService/photoChange(app:user:session:fileID:origin:)``). Every field is checked
    /// before anything is written; the change, its `user.updated` event (naming the fields it
    /// changed) and the photo's files commit in one unit of work, the user's row locked (a photo
    /// not committed is abandoned). Nothing changed: no change and no event recorded (with a photo
    /// field the row is still locked, which marks it changed).
    public func updateProfile(
        app: AppContext, user id: UserID, session: SessionID?, firstName: String??, lastName: String??, photo: PhotoChange? = nil,
        origin: RequestOrigin
    ) throws -> (User, [Identity]) {
        var committed = false
        defer { if !committed { photo?.abandoned() } }
        func checked(_ change: String??, _ field: String) throws(GatehouseError) -> String?? {
            guard case .some(.some(let value)) = change else { return change }
            return .some(try InputRules.name(value, field: field))
        }
        var checks = FieldChecks()
        var first: String?? = nil
        var last: String?? = nil
        try checks.run { () throws(GatehouseError) in first = try checked(firstName, "first_name") }
        try checks.run { () throws(GatehouseError) in last = try checked(lastName, "last_name") }
        try checks.finish()
        guard let (user, identities) = try cache.account(app: app.id, user: id, store: store).map({ ($0.user, $0.identities) }) else { throw Self.accountGone }
        if photo == nil, (first ?? user.firstName) == user.firstName, (last ?? user.lastName) == user.lastName { return (user, identities) }
        let now = clock.nowMillis()
        let (updated, removed) = try units.run(store.app(app.id)) { tx -> (User, [BlobKey]) in
            guard let account = try tx.lockUser(id) else { throw Self.accountGone }
            let (photoURL, removed) = try photo?.apply(tx, id, now) ?? (account.photoURL, [])
            let firstName = first ?? account.firstName
            let lastName = last ?? account.lastName
            let changed = [("first_name", account.firstName != firstName), ("last_name", account.lastName != lastName), ("photo_url", account.photoURL != photoURL)]
                .filter(\.1).map { JSON.string($0.0) }
            guard !changed.isEmpty else { return (account, removed) }
            guard let updated = try tx.updateProfile(id, firstName: firstName, lastName: lastName, photoURL: photoURL, now: now) else { throw Self.accountGone }
            try tx.record(Event(
                type: .userUpdated, userID: id, sessionID: session, ip: origin.ip, userAgent: origin.userAgent, data: ["fields": .array(changed)],
                createdAt: now))
            return (updated, removed)
        }
        committed = true
        photo?.committed(removed)
        // A profile change leaves the identities as they were.
        return (updated, identities)
    }

    static let accountGone = GatehouseError(.sessionRevoked, "This account no longer exists.")

    public func sessions(app: AppContext, claims: AccessClaims) throws -> [Session] {
        let now = clock.nowMillis()
        return try store.app(app.id).activeSessions(claims.userID, now: now, usedSince: Self.usedSince(app, now: now))
    }

    /// The oldest last use of a live session: the app's idle timeout before `now`, or 0 without one.
    private static func usedSince(_ app: AppContext, now: Int64) -> Int64 {
        app.settings.refreshTokenIdleSeconds.map { now - $0 * 1000 } ?? 0
    }

    /// Signs one of the user's devices out. Another user's session (or an unknown one) is 404.
    public func endSession(app: AppContext, claims: AccessClaims, id: SessionID, origin: RequestOrigin) throws {
        let now = clock.nowMillis()
        try units.run(store.app(app.id)) { tx in
            guard try tx.endSession(id, user: claims.userID, reason: .revoked, now: now) else { throw GatehouseError(.notFound, "No such session.") }
            try tx.record(Event(type: .sessionRevoked, userID: claims.userID, sessionID: id, ip: origin.ip, userAgent: origin.userAgent, data: ["reason": "user"], createdAt: now))
        }
    }

    /// Checks the current password, sets the new one and ends every other session.
    public func changePassword(app: AppContext, claims: AccessClaims, current: String, new: String, origin: RequestOrigin) throws {
        let data = store.app(app.id)
        try limitAuth(app, data, origin)
        try limiter.hit(data, bucket: "password", subject: claims.userID.rawValue, limit: app.settings.rateLimits.authPerMinutePerIP)
        var checks = FieldChecks()
        try checks.run { () throws(GatehouseError) in try InputRules.presentedPassword(current, field: "current_password") }
        try checks.run { () throws(GatehouseError) in try InputRules.presentedPassword(new) }
        try checks.finish()
        // The current password is a guess like any other: the same per-user budget as reauthentication.
        try requireReauthenticationGuessesLeft(app, claims: claims)
        let stored = try data.passwordHash(claims.userID)
        guard try hasher.verify(current, encoded: stored) else {
            try countFailedReauthentication(app, claims: claims)
            try units.record(Event(type: .userSignInFailed, userID: claims.userID, sessionID: claims.sessionID, ip: origin.ip, userAgent: origin.userAgent, data: ["method": "password", "password_change": true], createdAt: clock.nowMillis()), in: data)
            throw GatehouseError(.invalidCredential, "The current password is wrong.", fieldErrors: [FieldError("current_password", "Wrong password.")])
        }
        try limiter.reset(data, bucket: Self.reauthGuessBucket, subject: claims.userID.rawValue)
        try InputRules.newPassword(new, minimum: app.settings.passwordMinLength)
        let hash = try hasher.hash(new)
        let now = clock.nowMillis()
        try units.run(data) { tx in
            // Only if the password is still the one just checked: of two concurrent changes, one
            // wins and the other is told its current password is no longer current.
            guard try tx.setPasswordHash(claims.userID, hash: hash, replacing: stored, addIdentity: nil, now: now) else {
                throw GatehouseError(
                    .invalidCredential, "The password was changed meanwhile; the current password is not that one any more.",
                    fieldErrors: [FieldError("current_password", "Wrong password.")])
            }
            let ended = try tx.endSessions(of: claims.userID, keeping: claims.sessionID, reason: .passwordChanged, now: now)
            try tx.record(Event(type: .userPasswordChanged, userID: claims.userID, sessionID: claims.sessionID, ip: origin.ip, userAgent: origin.userAgent, createdAt: now))
            for id in ended {
                try tx.record(Event(type: .sessionRevoked, userID: claims.userID, sessionID: id, ip: origin.ip, userAgent: origin.userAgent, data: ["reason": "password_changed"], createdAt: now))
            }
        }
    }

    public func identities(app: AppContext, claims: AccessClaims) throws -> [Identity] {
        try store.app(app.id).identities(claims.userID)
    }

    /// Adds password sign-in to an account that has an email but no password yet.
    public func addPassword(app: AppContext, claims: AccessClaims, password: String, origin: RequestOrigin) throws -> [Identity] {
        try requireRecentLogin(app: app, claims: claims)
        let account = try me(app: app, claims: claims)
        let (user, identities) = (account.user, account.identities)
        if identities.contains(where: { $0.provider == "password" }) {
            throw GatehouseError(.credentialAlreadyInUse, "This account already signs in with a password; change it with PUT /v1/me/password.")
        }
        guard let email = user.email else { throw GatehouseError.validation("email", "The account has no email address to sign in with.") }
        // An address a provider did not vouch for is nobody's proof of owning it: as a password
        // identity it would let whoever typed it into that provider take the address over here.
        guard user.emailVerified else {
            throw GatehouseError.validation("email", "The account's email address is not verified, so it cannot sign in with a password.")
        }
        try InputRules.newPassword(password, minimum: app.settings.passwordMinLength)
        let now = clock.nowMillis()
        let data = store.app(app.id)
        try limitAuth(app, data, origin)
        let identity = Identity(provider: "password", subject: email, email: email, createdAt: now)
        let hash = try hasher.hash(password)
        return try units.run(data) { tx in
            guard try tx.setPasswordHash(user.id, hash: hash, replacing: nil, addIdentity: identity, now: now) else {
                throw GatehouseError(.credentialAlreadyInUse, "This account already signs in with a password; change it with PUT /v1/me/password.")
            }
            try tx.record(Event(type: .identityLinked, userID: user.id, sessionID: claims.sessionID, ip: origin.ip, userAgent: origin.userAgent, data: ["provider": "password"], createdAt: now))
            return try tx.identities(user.id)
        }
    }

    // MARK: -

    /// 403 `auth/user-disabled`, with the ban's `sanction_code` and `suspended_until` (null: permanent).
    static func disabled(_ ban: Ban) -> GatehouseError {
        var error = GatehouseError(.userDisabled, "This account is disabled.")
        error.extensions = [
            "sanction_code": .string(ban.sanctionCode), "suspended_until": ban.suspendedUntil.map { .string(rfc3339(millis: $0)) } ?? .null,
        ]
        return error
    }

    static let signInGuessBucket = "signin_email"
    static let reauthGuessBucket = "reauth_user"

    /// The subject of the per-email limiter: keyed, so the counters table tells a dump neither the
    /// addresses tried nor, by hashing guesses, whether one was.
    func guessSubject(email: String) -> String { Digest.hex(limiterSubjectKey.tag(Array(email.utf8))) }

    @discardableResult
    private func requireGuessesLeft(_ data: any AppScopedStore, bucket: String, subject: String) throws -> Int64 {
        try limiter.requireUnder(
            data, bucket: bucket, subject: subject, limit: RateLimiter.accountGuesses.limit, windowSeconds: RateLimiter.accountGuesses.windowSeconds)
    }

    private func countFailedGuess(_ data: any AppScopedStore, bucket: String, subject: String) throws {
        try limiter.count(data, bucket: bucket, subject: subject, windowSeconds: RateLimiter.accountGuesses.windowSeconds)
    }

    func limitAuth(_ app: AppContext, _ data: any AppScopedStore, _ origin: RequestOrigin) throws {
        try limiter.hit(data, bucket: "auth", subject: rateLimitSubject(ip: origin.ip), limit: app.settings.rateLimits.authPerMinutePerIP)
    }

    func requireMethod(_ method: SignInMethod, _ app: AppContext) throws {
        guard app.settings.signInMethods.contains(method) else {
            throw GatehouseError(.signInMethodDisabled, "This app does not offer \(method.rawValue) sign-in.")
        }
    }
}
