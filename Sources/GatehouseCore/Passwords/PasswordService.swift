import GatehouseCrypto

/// Accounts with passwords: signing up and in with one, reauthenticating with it, changing it,
/// and adding one to an account that signs in otherwise (API.md's password rows).
public final class PasswordService: Sendable {
    private let sessions: SessionService
    private let gate: SignInGate
    private let hasher: PasswordHasher
    private let limiter: RateLimiter
    private let store: any Store
    private let cache: AccountCache
    private let clock: any Clock
    private let limiterSubjectKey: HMACKey
    /// Runs the service's units of work and applies what follows their commit.
    private let units: UnitOfWork
    /// Sign-up's verification mail.
    private let emailCodes: EmailCodes
    private let log: any LogSink
    private let metrics: any DomainMetrics

    /// - Parameter masterKey: for the key that turns emails into limiter subjects (``MasterKeyDerivation``).
    public init(
        store: any Store, cache: AccountCache, sessions: SessionService, gate: SignInGate, units: UnitOfWork, hasher: PasswordHasher,
        clock: any Clock, masterKey: [UInt8], emailCodes: EmailCodes, log: any LogSink = DiscardingLog(), metrics: any DomainMetrics = NoDomainMetrics()
    ) {
        self.store = store
        self.cache = cache
        self.sessions = sessions
        self.gate = gate
        self.units = units
        self.hasher = hasher
        self.limiter = RateLimiter(clock: clock)
        self.clock = clock
        self.limiterSubjectKey = HMACKey(MasterKeyDerivation.key(for: .limiterSubjects, from: masterKey))
        self.emailCodes = emailCodes
        self.log = log
        self.metrics = metrics
    }

    // MARK: - Signing up and in

    /// `POST /v1/auth/signup`; `locale` is the user's language (a tag, ``InputRules/locale(_:field:)``).
    public func signUp(
        app: AppContext, email rawEmail: String, password: String, firstName: String?, lastName: String?, locale: String? = nil,
        displayName: String? = nil, origin: RequestOrigin
    ) throws -> SessionGrant {
        try metrics.countingSignIn(.password) {
            try createAccount(
                app: app, email: rawEmail, password: password, firstName: firstName, lastName: lastName, locale: locale, displayName: displayName,
                origin: origin)
        }
    }

    private func createAccount(
        app: AppContext, email rawEmail: String, password: String, firstName: String?, lastName: String?, locale rawLocale: String?,
        displayName rawDisplayName: String?, origin: RequestOrigin
    ) throws -> SessionGrant {
        let data = store.app(app.id)
        try gate.limitAuth(app, data, origin)
        guard app.settings.allowSignup else { throw GatehouseError(.signupDisabled, "This app does not accept new accounts.") }
        try gate.requireMethod(.password, app)
        var checks = FieldChecks()
        var email = ""
        var first: String?
        var last: String?
        var locale: String?
        var displayName: String?
        try checks.run { () throws(GatehouseError) in email = try InputRules.email(rawEmail) }
        try checks.run { () throws(GatehouseError) in try InputRules.presentedPassword(password) }
        try checks.run { () throws(GatehouseError) in first = try firstName.flatMap { name throws(GatehouseError) in try InputRules.name(name, field: "first_name") } }
        try checks.run { () throws(GatehouseError) in last = try lastName.flatMap { name throws(GatehouseError) in try InputRules.name(name, field: "last_name") } }
        try checks.run { () throws(GatehouseError) in locale = try rawLocale.map { tag throws(GatehouseError) in try InputRules.locale(tag) } }
        // The rule of PATCH /v1/me: empty (after trimming) is no name.
        try checks.run { () throws(GatehouseError) in displayName = try rawDisplayName.flatMap { name throws(GatehouseError) in try InputRules.displayName(name) } }
        try checks.finish()
        try InputRules.newPassword(password, minimum: app.settings.passwordMinLength)
        // Also an account that signs in with a provider and has this email, unless the app keeps
        // such accounts separate (`email_collision`, as for provider sign-in).
        if try data.passwords.passwordUser(email: email) != nil || (app.settings.emailCollision == "reject" && data.users.emailInUse(email, except: nil)) {
            throw GatehouseError(.emailAlreadyInUse, "An account with this email already exists.")
        }

        let hash = try hasher.hash(password)
        let now = clock.nowMillis()
        let user = User(
            id: .generate(), email: email, emailVerified: false, firstName: first, lastName: last, createdAt: now, updatedAt: now, lastSignInAt: now, locale: locale,
            displayName: displayName)
        // The account, its event, its verification mail and its first session (or its second
        // step, answered once all of it has committed) commit together.
        return try units.run(data) { tx in
            // Checked again holding the address: another sign-up or a code sign-in may have taken it.
            try emailCodes.lockAddress(tx, email)
            if try tx.passwords.passwordUser(email: email) != nil || (app.settings.emailCollision == "reject" && tx.users.emailInUse(email, except: nil)) {
                throw GatehouseError(.emailAlreadyInUse, "An account with this email already exists.")
            }
            try UserConflict.answering {
                try tx.users.insertUser(
                    user, passwordHash: hash, identity: Identity(provider: .password, subject: email, email: email, createdAt: now),
                    event: Event(type: .userSignedUp, userID: user.id, sessionID: nil, ip: origin.ip, userAgent: origin.userAgent, data: ["method": "password"], createdAt: now))
            }
            try queueVerification(tx, app: app, email: email, user: user, origin: origin)
            return try sessions.startSession(app: app, tx, user: user, method: .password, isNewUser: true, origin: origin)
        }.session()
    }

    /// Sign-up's verification code. Past the address's send windows (an address signed up,
    /// deleted and signed up again and again), or to an address the mailer cannot write, the
    /// account is made all the same, without the mail.
    private func queueVerification(_ tx: any AppScopedStore, app: AppContext, email: String, user: User, origin: RequestOrigin) throws {
        do {
            try emailCodes.send(
                tx, app: app, purpose: .verification, address: email, userID: user.id,
                mail: EmailToSend(.verification, to: email, app: app, user: user, origin: origin), deliver: true)
        } catch let error as GatehouseError where error.code == .tooManyRequests || error.code == .validationFailed {
            log.info("sign-up sent no verification mail", ["app_id": .string(app.id.rawValue), "user_id": .string(user.id.rawValue), "reason": .string(error.code.rawValue)])
        }
    }

    public func signIn(app: AppContext, email rawEmail: String, password: String, origin: RequestOrigin) throws -> SessionGrant {
        try metrics.countingSignIn(.password) { try checkPassword(app: app, email: rawEmail, password: password, origin: origin) }
    }

    private func checkPassword(app: AppContext, email rawEmail: String, password: String, origin: RequestOrigin) throws -> SessionGrant {
        let data = store.app(app.id)
        try gate.limitAuth(app, data, origin)
        try gate.requireMethod(.password, app)
        var checks = FieldChecks()
        var email = ""
        try checks.run { () throws(GatehouseError) in email = try InputRules.email(rawEmail) }
        try checks.run { () throws(GatehouseError) in try InputRules.presentedPassword(password) }
        try checks.finish()
        // Per account too, or a botnet (or one IPv6 /48) guesses one password without bound.
        let guesses = guessSubject(email: email)
        let failuresBefore = try requireGuessesLeft(data, bucket: Self.signInGuessBucket, subject: guesses)
        var found = try data.passwords.passwordUser(email: email)
        // An account stored before emails were put in NFC is found by the form it was typed in.
        let typed = rawEmail.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        // (Compared by scalars: Swift's == holds the two forms equal.)
        if found == nil, !typed.unicodeScalars.elementsEqual(email.unicodeScalars) { found = try data.passwords.passwordUser(email: typed) }
        // Unknown email and wrong password: the same answer after the same work.
        guard try hasher.verify(password, encoded: found?.1, app: app.id), let (user, hash) = found else {
            try countFailedGuess(data, bucket: Self.signInGuessBucket, subject: guesses)
            try units.record(Event(type: .userSignInFailed, userID: found?.0.id, sessionID: nil, ip: origin.ip, userAgent: origin.userAgent, data: ["method": "password"], createdAt: clock.nowMillis()), in: data)
            throw GatehouseError(.invalidCredential, "The email or password is wrong.")
        }
        // A write only when there were failures to forget: most sign-ins have none.
        if failuresBefore > 0 { try limiter.reset(data, bucket: Self.signInGuessBucket, subject: guesses) }
        // The session opens only while the account's hash is the one the password matched.
        var matched = hash
        var detail: [String: JSON] = [:]
        // Also every hash imported from another system (ADR 0030): replaced by argon2id at its
        // first sign-in, only while it is still the one the password matched.
        if hasher.needsRehash(hash) {
            let rehashed = try hasher.hash(password)
            if try data.passwords.setPasswordHash(user.id, hash: rehashed, replacing: hash, addIdentity: nil, now: clock.nowMillis()) {
                matched = rehashed
                if ImportedPasswordHash.isStoredForm(hash) { detail["rehashed"] = true }
            } else if let current = try data.passwords.passwordHash(user.id), try hasher.verify(password, encoded: current, app: app.id) {
                // Another sign-in with this password rehashed it first (the first after the
                // parameters changed, from two devices at once). Else the password changed, and
                // the session is refused.
                matched = current
            }
        }
        return try sessions.startSession(app: app, data, user: user, method: .password, isNewUser: false, origin: origin, passwordHash: matched, detail: detail).session()
    }

    // MARK: - Recent login

    /// A new access token with a fresh `auth_time`, after checking the password again. The refresh token stays.
    public func reauthenticate(app: AppContext, claims: AccessClaims, password: String, origin: RequestOrigin) throws -> (token: String, expiresIn: Int64) {
        let data = store.app(app.id)
        try gate.limitAuth(app, data, origin)
        try InputRules.presentedPassword(password)
        try sessions.requireReauthenticationGuessesLeft(app, claims: claims)
        guard try hasher.verify(password, encoded: try data.passwords.passwordHash(claims.userID), app: app.id) else {
            try sessions.countFailedReauthentication(app, claims: claims)
            try units.record(Event(type: .userSignInFailed, userID: claims.userID, sessionID: claims.sessionID, ip: origin.ip, userAgent: origin.userAgent, data: ["method": "password", "reauthentication": true], createdAt: clock.nowMillis()), in: data)
            throw GatehouseError(.invalidCredential, "The password is wrong.")
        }
        return try sessions.refreshAuthTime(app: app, claims: claims)
    }


    // MARK: - Changing and adding a password

    /// Checks the current password, sets the new one and ends every other session.
    public func changePassword(app: AppContext, claims: AccessClaims, current: String, new: String, origin: RequestOrigin) throws {
        let data = store.app(app.id)
        try gate.limitAuth(app, data, origin)
        try limiter.hit(data, bucket: "password", subject: claims.userID.rawValue, limit: app.settings.rateLimits.authPerMinutePerIP)
        var checks = FieldChecks()
        try checks.run { () throws(GatehouseError) in try InputRules.presentedPassword(current, field: "current_password") }
        try checks.run { () throws(GatehouseError) in try InputRules.presentedPassword(new) }
        try checks.finish()
        // The current password is a guess like any other: the same per-user budget as reauthentication.
        try sessions.requireReauthenticationGuessesLeft(app, claims: claims)
        let stored = try data.passwords.passwordHash(claims.userID)
        guard try hasher.verify(current, encoded: stored, app: app.id) else {
            try sessions.countFailedReauthentication(app, claims: claims)
            try units.record(Event(type: .userSignInFailed, userID: claims.userID, sessionID: claims.sessionID, ip: origin.ip, userAgent: origin.userAgent, data: ["method": "password", "password_change": true], createdAt: clock.nowMillis()), in: data)
            throw GatehouseError(.invalidCredential, "The current password is wrong.", fieldErrors: [FieldError("current_password", "Wrong password.")])
        }
        try limiter.reset(data, bucket: SessionService.reauthGuessBucket, subject: claims.userID.rawValue)
        try InputRules.newPassword(new, minimum: app.settings.passwordMinLength)
        let hash = try hasher.hash(new)
        let now = clock.nowMillis()
        try units.run(data) { tx in
            // Only if the password is still the one just checked: of two concurrent changes, one
            // wins and the other is told its current password is no longer current.
            guard try tx.passwords.setPasswordHash(claims.userID, hash: hash, replacing: stored, addIdentity: nil, now: now) else {
                throw GatehouseError(
                    .invalidCredential, "The password was changed meanwhile; the current password is not that one any more.",
                    fieldErrors: [FieldError("current_password", "Wrong password.")])
            }
            let ended = try tx.sessions.endSessions(of: claims.userID, keeping: claims.sessionID, reason: .passwordChanged, now: now)
            try tx.mfa.abandonChallenges(of: claims.userID)
            try tx.auditLog.record(Event(type: .userPasswordChanged, userID: claims.userID, sessionID: claims.sessionID, ip: origin.ip, userAgent: origin.userAgent, createdAt: now))
            for id in ended {
                try tx.auditLog.record(Event(type: .sessionRevoked, userID: claims.userID, sessionID: id, ip: origin.ip, userAgent: origin.userAgent, data: ["reason": "password_changed"], createdAt: now))
            }
        }
    }

    /// Adds password sign-in to an account that has an email but no password yet; or upgrades an
    /// anonymous account (``AnonymousUsers``), which has no email: then `email` is required, and
    /// the account takes it as a sign-up would (unverified, a verification code mailed; 409
    /// `auth/email-already-in-use` where a sign-up would get it). `email` is refused for any other
    /// account: its address changes through `POST /v1/me/email`.
    public func addPassword(app: AppContext, claims: AccessClaims, password: String, email rawEmail: String? = nil, origin: RequestOrigin) throws -> [Identity] {
        guard let account = try cache.account(app: app.id, user: claims.userID, store: store) else { throw AccountService.accountGone }
        let (user, identities) = (account.user, account.identities)
        try sessions.requireRecentLogin(app: app, claims: claims, user: user)
        if user.isAnonymous { return try upgrade(app: app, claims: claims, user: user, password: password, email: rawEmail, origin: origin) }
        if rawEmail != nil {
            throw GatehouseError.validation(
                "email", user.email == nil
                    ? "Only an anonymous account takes an email here; add a verified address with POST /v1/me/email first."
                    : "The account has an email address already; change it with POST /v1/me/email.")
        }
        if identities.contains(where: { $0.provider == .password }) {
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
        try gate.limitAuth(app, data, origin)
        let identity = Identity(provider: .password, subject: email, email: email, createdAt: now)
        let hash = try hasher.hash(password)
        return try units.run(data) { tx in
            guard try PasswordConflict.answering({ try tx.passwords.setPasswordHash(user.id, hash: hash, replacing: nil, addIdentity: identity, now: now) }) else {
                throw GatehouseError(.credentialAlreadyInUse, "This account already signs in with a password; change it with PUT /v1/me/password.")
            }
            try tx.auditLog.record(Event(type: .identityLinked, userID: user.id, sessionID: claims.sessionID, ip: origin.ip, userAgent: origin.userAgent, data: ["provider": "password"], createdAt: now))
            return try tx.identities.all(of: user.id)
        }
    }

    /// An anonymous account takes an email and a password, as a sign-up makes an account with
    /// them, the same checks in the same order, but keeps its user id, its sessions and its data.
    private func upgrade(app: AppContext, claims: AccessClaims, user: User, password: String, email rawEmail: String?, origin: RequestOrigin) throws -> [Identity] {
        let data = store.app(app.id)
        try gate.limitAuth(app, data, origin)
        try gate.requireMethod(.password, app)
        guard let rawEmail else { throw GatehouseError.validation("email", "Required: an anonymous account has no email address to sign in with.") }
        var checks = FieldChecks()
        var email = ""
        try checks.run { () throws(GatehouseError) in email = try InputRules.email(rawEmail) }
        try checks.run { () throws(GatehouseError) in try InputRules.presentedPassword(password) }
        try checks.finish()
        try InputRules.newPassword(password, minimum: app.settings.passwordMinLength)
        // No more than a sign-up tells: the same 409 for the same addresses.
        func requireFree(_ data: any AppScopedStore) throws {
            if try data.passwords.passwordUser(email: email) != nil || (app.settings.emailCollision == "reject" && data.users.emailInUse(email, except: user.id)) {
                throw GatehouseError(.emailAlreadyInUse, "An account with this email already exists.")
            }
        }
        try requireFree(data)
        let hash = try hasher.hash(password)
        let now = clock.nowMillis()
        return try units.run(data) { tx in
            try emailCodes.lockAddress(tx, email)
            try requireFree(tx)
            guard let upgraded = try AnonymousUsers.upgrade(tx, user: user.id, email: email, emailVerified: false, method: "password", sessionID: claims.sessionID, origin: origin, now: now) else {
                // Upgraded meanwhile by another way in: this is an ordinary account now; ask again.
                throw GatehouseError(.credentialAlreadyInUse, "This account was upgraded meanwhile; add a password to it as to any account.")
            }
            let identity = Identity(provider: .password, subject: email, email: email, createdAt: now)
            guard try PasswordConflict.answering({ try tx.passwords.setPasswordHash(user.id, hash: hash, replacing: nil, addIdentity: identity, now: now) }) else {
                throw GatehouseError(.credentialAlreadyInUse, "This account already signs in with a password; change it with PUT /v1/me/password.")
            }
            try tx.auditLog.record(Event(type: .identityLinked, userID: user.id, sessionID: claims.sessionID, ip: origin.ip, userAgent: origin.userAgent, data: ["provider": "password"], createdAt: now))
            try queueVerification(tx, app: app, email: email, user: upgraded, origin: origin)
            return try tx.identities.all(of: user.id)
        }
    }

    // MARK: -

    static let signInGuessBucket = "signin_email"

    /// The subject of the per-email limiter: keyed, so the counters table tells a dump neither the
    /// addresses tried nor, by hashing guesses, whether one was.
    func guessSubject(email: String) -> String { Digest.hex(limiterSubjectKey.tag(Array(email.utf8))) }

    @discardableResult
    private func requireGuessesLeft(_ data: any AppScopedStore, bucket: String, subject: String) throws -> Int64 {
        try limiter.requireAccountGuessesLeft(data, bucket: bucket, subject: subject)
    }

    private func countFailedGuess(_ data: any AppScopedStore, bucket: String, subject: String) throws {
        try limiter.countFailedAccountGuess(data, bucket: bucket, subject: subject)
    }
}
