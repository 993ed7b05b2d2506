/// Every flow of API.md that mails a code: sign-in by code, address verification, password
/// reset, email change and reauthentication by code. A send answers the same (202, or 429 past
/// the address's windows) whether or not the address has an account, after the same work: the
/// mail is queued in the outbox in the send's transaction, never sent on the request path.
public final class EmailFlowService: Sendable {
    private let store: any Store
    private let sessions: SessionService
    private let gate: SignInGate
    private let limiter: RateLimiter
    /// Runs the service's units of work and applies what follows their commit.
    private let units: UnitOfWork
    /// Sign-ins by code, for the operator's metrics.
    private let metrics: any DomainMetrics
    private let codes: EmailCodes
    private let hasher: PasswordHasher
    /// Opens a squatter's kept Apple tokens to queue their revocation.
    private let sealer: SecretSealer
    private let clock: any Clock
    private let log: any LogSink

    public init(
        store: any Store, sessions: SessionService, gate: SignInGate, units: UnitOfWork, codes: EmailCodes, hasher: PasswordHasher, sealer: SecretSealer,
        clock: any Clock, metrics: any DomainMetrics = NoDomainMetrics(), log: any LogSink = DiscardingLog()
    ) {
        self.hasher = hasher
        self.sealer = sealer
        self.log = log
        self.store = store
        self.sessions = sessions
        self.gate = gate
        self.limiter = RateLimiter(clock: clock)
        self.units = units
        self.metrics = metrics
        self.codes = codes
        self.clock = clock
    }

    // MARK: - Sign-in by code

    /// `POST /v1/auth/email-code/send`. A code goes out when the address has an account, or when
    /// the app would make one (`allow_signup`).
    public func sendSignInCode(app: AppContext, email rawEmail: String, origin: RequestOrigin) throws {
        try gate.requireMethod(.emailCode, app)
        try sendToAddress(app: app, email: rawEmail, origin: origin, purpose: .signIn, template: .signInCode) { user in
            user != nil || app.settings.allowSignup
        }
    }

    /// A code to a typed address (sign-in, reset): checked, limited, and sent with the same work
    /// whether or not it reaches an account; mailed only when `deliverTo` says so for the account.
    private func sendToAddress(
        app: AppContext, email rawEmail: String, origin: RequestOrigin, purpose: EmailPurpose, template: EmailToSend.Template,
        deliverTo: (User?) -> Bool
    ) throws {
        let email = try InputRules.email(rawEmail)
        try codes.requireMailable(email)
        let data = store.app(app.id)
        try limitSends(app, data, origin)
        try units.run(data) { tx in
            let user = try account(tx, email: email)
            try codes.send(
                tx, app: app, purpose: purpose, address: email, userID: nil, mail: EmailToSend(template, to: email, app: app, user: user, origin: origin),
                deliver: deliverTo(user))
        }
    }

    /// `POST /v1/auth/email-code/verify`: a session for the address's account, made now (201,
    /// address verified) when there is none and the app accepts sign-ups; `locale` is the new
    /// account's language (ignored for an account that exists).
    public func verifySignInCode(app: AppContext, email rawEmail: String, code: String, locale: String? = nil, origin: RequestOrigin) throws -> SessionGrant {
        try metrics.countingSignIn(.emailCode) { try redeemSignInCode(app: app, email: rawEmail, code: code, locale: locale, origin: origin) }
    }

    private func redeemSignInCode(app: AppContext, email rawEmail: String, code: String, locale rawLocale: String?, origin: RequestOrigin) throws -> SessionGrant {
        let data = store.app(app.id)
        try gate.limitAuth(app, data, origin)
        try gate.requireMethod(.emailCode, app)
        var checks = FieldChecks()
        var email = ""
        var locale: String?
        try checks.run { () throws(GatehouseError) in email = try InputRules.email(rawEmail) }
        try checks.run { () throws(GatehouseError) in try InputRules.emailCode(code) }
        try checks.run { () throws(GatehouseError) in locale = try rawLocale.map { tag throws(GatehouseError) in try InputRules.locale(tag) } }
        try checks.finish()
        // The outcome is answered once the code's unit of work has committed (a sign-up that
        // must answer a second step keeps its account, and the code stays used).
        return try codes.redeem(data, app: app, purpose: .signIn, address: email, code: code, userID: nil) { tx -> SignInOutcome in
            let now = clock.nowMillis()
            guard var user = try account(tx, email: email) else {
                guard app.settings.allowSignup else { throw GatehouseError(.invalidCode, "The code is not valid.") }
                let user = User(
                    id: .generate(), email: email, emailVerified: true, firstName: nil, lastName: nil, createdAt: now, updatedAt: now, lastSignInAt: now,
                    locale: locale)
                try UserConflict.answering {
                    try tx.users.insertUser(
                        user, passwordHash: nil, identity: nil,
                        event: Event(type: .userSignedUp, userID: user.id, sessionID: nil, ip: origin.ip, userAgent: origin.userAgent, data: ["method": "email_code"], createdAt: now))
                }
                return try sessions.startSession(app: app, tx, user: user, method: .emailCode, isNewUser: true, origin: origin)
            }
            if !user.emailVerified { user = try takeOver(tx, app, user, email: email, origin: origin, now: now) }
            return try sessions.startSession(app: app, tx, user: user, method: .emailCode, isNewUser: false, origin: origin)
        }.session()
    }

    // MARK: - Verification

    /// `POST /v1/auth/email/verification/send`. An address verified already gets nothing (202).
    public func sendVerification(app: AppContext, claims: AccessClaims, origin: RequestOrigin) throws {
        let data = store.app(app.id)
        try limitSends(app, data, origin)
        guard let user = try data.users.user(claims.userID) else { throw GatehouseError(.sessionRevoked, "This account no longer exists.") }
        guard let email = user.email else { throw GatehouseError.validation("email", "The account has no email address.") }
        try units.run(data) { tx in
            try codes.send(
                tx, app: app, purpose: .verification, address: email, userID: user.id,
                mail: EmailToSend(.verification, to: email, app: app, user: user, origin: origin), deliver: !user.emailVerified)
        }
    }

    /// `POST /v1/auth/email/verification/confirm`: the user, address verified.
    public func confirmVerification(app: AppContext, claims: AccessClaims, code: String, origin: RequestOrigin) throws -> (User, [Identity]) {
        let data = store.app(app.id)
        try gate.limitAuth(app, data, origin)
        try InputRules.emailCode(code)
        guard let user = try data.users.user(claims.userID) else { throw GatehouseError(.sessionRevoked, "This account no longer exists.") }
        guard let email = user.email else { throw GatehouseError(.invalidCode, "The code is not valid.") }
        return try codes.redeem(data, app: app, purpose: .verification, address: email, code: code, userID: user.id) { tx in
            let now = clock.nowMillis()
            guard let verified = try tx.users.markEmailVerified(user.id, email: email, now: now) else {
                throw GatehouseError(.invalidCode, "The code is not valid.")
            }
            try tx.auditLog.record(Event(type: .userEmailVerified, userID: user.id, sessionID: claims.sessionID, ip: origin.ip, userAgent: origin.userAgent, createdAt: now))
            return (verified, try tx.identities.all(of: user.id))
        }
    }

    // MARK: - Password reset

    /// `POST /v1/auth/password-reset/send`: a code to an address with an account that signs in
    /// with a password, or whose address is verified (the reset adds a password).
    public func sendPasswordReset(app: AppContext, email rawEmail: String, origin: RequestOrigin) throws {
        try sendToAddress(app: app, email: rawEmail, origin: origin, purpose: .passwordReset, template: .passwordReset) { user in
            user != nil && app.settings.signInMethods.contains(.password)
        }
    }

    /// `POST /v1/auth/password-reset/confirm`: the new password, the address verified (the code
    /// proved it), and every session of the user ended.
    public func confirmPasswordReset(app: AppContext, email rawEmail: String, code: String, password: String, origin: RequestOrigin) throws {
        let data = store.app(app.id)
        try gate.limitAuth(app, data, origin)
        try gate.requireMethod(.password, app)
        var checks = FieldChecks()
        var email = ""
        try checks.run { () throws(GatehouseError) in email = try InputRules.email(rawEmail) }
        try checks.run { () throws(GatehouseError) in try InputRules.emailCode(code) }
        try checks.run { () throws(GatehouseError) in try InputRules.presentedPassword(password) }
        try checks.finish()
        try InputRules.newPassword(password, minimum: app.settings.passwordMinLength)
        // Hashed before the transaction (SQLite's write lock must not wait on argon2); the per-IP
        // limit above bounds how many hashes wrong codes can cost.
        let hash = try hasher.hash(password)
        try codes.redeem(data, app: app, purpose: .passwordReset, address: email, code: code, userID: nil) { tx in
            let now = clock.nowMillis()
            guard var user = try account(tx, email: email) else { throw GatehouseError(.invalidCode, "The code is not valid.") }
            if !user.emailVerified { user = try takeOver(tx, app, user, email: email, origin: origin, now: now) }
            let current = try tx.passwords.passwordHash(user.id)
            let identity = current == nil ? Identity(provider: .password, subject: email, email: email, createdAt: now) : nil
            guard try PasswordConflict.answering({ try tx.passwords.setPasswordHash(user.id, hash: hash, replacing: current, addIdentity: identity, now: now) }) else {
                throw GatehouseError(.invalidCode, "The password changed meanwhile; ask for a new code.")
            }
            let endedNow = try tx.sessions.endSessions(of: user.id, keeping: nil, reason: .passwordChanged, now: now)
            try tx.mfa.abandonChallenges(of: user.id)
            try tx.auditLog.record(Event(type: .userPasswordChanged, userID: user.id, sessionID: nil, ip: origin.ip, userAgent: origin.userAgent, data: ["reset": true], createdAt: now))
            for id in endedNow {
                try tx.auditLog.record(Event(type: .sessionRevoked, userID: user.id, sessionID: id, ip: origin.ip, userAgent: origin.userAgent, data: ["reason": "password_reset"], createdAt: now))
            }
        }
    }

    /// The account an address reaches by code (``AppScopedStore/user(email:)``).
    private func account(_ tx: any AppScopedStore, email: String) throws -> User? { try tx.users.user(email: email) }

    /// A code proves the address; whoever signed up with it before proved nothing. The owner takes
    /// the account over without anything that stranger could come back with: every session ends
    /// and every way to sign in goes (password, linked providers and their kept tokens), so
    /// pre-hijacking (sign up with someone's address, link your own Apple account, wait) gains
    /// nothing. Returns the user, verified.
    private func takeOver(_ tx: any AppScopedStore, _ app: AppContext, _ user: User, email: String, origin: RequestOrigin, now: Int64) throws -> User {
        // The user's row first, then the sessions: the order a password change takes them in, so
        // the two at once for one user wait on each other instead of deadlocking.
        let forgotten = try tx.identities.forgetSignInMethods(user.id, now: now)
        // The squatter's kept Apple tokens are revoked at Apple (through the outbox), not only dropped.
        let revocations = try AppleRevocation.queue(forgotten.tokens, in: tx, app: app, user: user.id, sealer: sealer, now: now, log: log)
        for provider in forgotten.providers {
            var data: [String: JSON] = ["provider": .string(provider.rawValue), "reason": "address_proved"]
            if provider == .apple { data["apple_revocations"] = revocations }
            try tx.auditLog.record(Event(type: .identityUnlinked, userID: user.id, sessionID: nil, ip: origin.ip, userAgent: origin.userAgent, data: .object(data), createdAt: now))
        }
        // And every second factor: the stranger's authenticator app would lock the owner out, and
        // the stranger's passkey would let them back in.
        for factor in try tx.mfa.forgetFactors(of: user.id) {
            try tx.auditLog.record(Event(
                type: .mfaRemoved, userID: user.id, sessionID: nil, ip: origin.ip, userAgent: origin.userAgent,
                data: ["factor_id": .string(factor.rawValue), "type": "totp", "by": "address_proved"], createdAt: now))
        }
        for passkey in try tx.passkeys.forgetPasskeys(of: user.id) {
            try tx.auditLog.record(Event(
                type: .passkeyRemoved, userID: user.id, sessionID: nil, ip: origin.ip, userAgent: origin.userAgent,
                data: ["passkey_id": .string(passkey.id.rawValue), "by": "address_proved"], createdAt: now))
        }
        let verified = try tx.users.markEmailVerified(user.id, email: email, now: now) ?? user
        let ended = try tx.sessions.endSessions(of: user.id, keeping: nil, reason: .revoked, now: now)
        for id in ended {
            try tx.auditLog.record(Event(type: .sessionRevoked, userID: user.id, sessionID: id, ip: origin.ip, userAgent: origin.userAgent, data: ["reason": "address_proved"], createdAt: now))
        }
        return verified
    }

    // MARK: - Email change

    /// `POST /v1/me/email` (recent login, but for an anonymous account, which has no way to
    /// reauthenticate): a code to the new address. 409 when another account has it. Confirmed, the
    /// address upgrades an anonymous account (``AnonymousUsers``).
    public func requestEmailChange(app: AppContext, claims: AccessClaims, email rawEmail: String, origin: RequestOrigin) throws {
        let data = store.app(app.id)
        guard let user = try data.users.user(claims.userID) else { throw GatehouseError(.sessionRevoked, "This account no longer exists.") }
        try sessions.requireRecentLogin(app: app, claims: claims, user: user)
        let email = try InputRules.email(rawEmail)
        try codes.requireMailable(email)
        try limitSends(app, data, origin)
        if user.email.map({ $0.unicodeScalars.elementsEqual(email.unicodeScalars) }) == true {
            throw GatehouseError.validation("email", "This is the account's address already.")
        }
        try requireAvailable(data, app, email, user: user.id)
        try units.run(data) { tx in
            try codes.send(
                tx, app: app, purpose: .emailChange, address: email, userID: user.id,
                mail: EmailToSend(.emailChange, to: email, app: app, user: user, origin: origin), deliver: true)
        }
    }

    /// `POST /v1/me/email/confirm`: the user with the new address, verified; a notice goes to the old one.
    public func confirmEmailChange(app: AppContext, claims: AccessClaims, email rawEmail: String, code: String, origin: RequestOrigin) throws -> (User, [Identity]) {
        let data = store.app(app.id)
        try gate.limitAuth(app, data, origin)
        var checks = FieldChecks()
        var email = ""
        try checks.run { () throws(GatehouseError) in email = try InputRules.email(rawEmail) }
        try checks.run { () throws(GatehouseError) in try InputRules.emailCode(code) }
        try checks.finish()
        guard let before = try data.users.user(claims.userID) else { throw GatehouseError(.sessionRevoked, "This account no longer exists.") }
        return try codes.redeem(data, app: app, purpose: .emailChange, address: email, code: code, userID: before.id) { tx in
            let now = clock.nowMillis()
            try codes.lockAddress(tx, email)
            try requireAvailable(tx, app, email, user: before.id)
            let meanwhile = GatehouseError(.invalidCode, "The account's address changed meanwhile; ask for a new code.")
            let changed: User
            if before.isAnonymous {
                // A proved address is a way in (a code to it): the anonymous account is upgraded,
                // as Firebase's linking of an email credential upgrades one.
                guard let upgraded = try AnonymousUsers.upgrade(
                    tx, user: before.id, email: email, emailVerified: true, method: "email", sessionID: claims.sessionID, origin: origin, now: now)
                else { throw meanwhile }
                changed = upgraded
            } else {
                guard let updated = try UserConflict.answering({ try tx.users.changeEmail(before.id, from: before.email, to: email, now: now) }) else {
                    throw meanwhile
                }
                changed = updated
            }
            try tx.auditLog.record(Event(
                type: .userEmailChanged, userID: before.id, sessionID: claims.sessionID, ip: origin.ip, userAgent: origin.userAgent,
                data: ["previous_email": before.email.map(JSON.string) ?? .null, "email": .string(email)], createdAt: now))
            // Only to an address someone proved: a typo'd or squatted address learns nothing.
            if let old = before.email, before.emailVerified {
                var notice = EmailToSend(.emailChangedNotice, to: old, app: app, user: before, origin: origin)
                notice.newEmail = email
                try codes.notify(tx, app: app, mail: notice, idempotencyKey: "notice/\(app.id.rawValue)/\(before.id.rawValue)/\(now)")
            }
            return (changed, try tx.identities.all(of: before.id))
        }
    }

    /// 409 when another account of the app has the address (any sign-in method), unless the app
    /// keeps such accounts apart and none signs in with a password at it.
    private func requireAvailable(_ data: any AppScopedStore, _ app: AppContext, _ email: String, user: UserID) throws {
        if let (other, _) = try data.passwords.passwordUser(email: email), other.id != user {
            throw GatehouseError(.emailAlreadyInUse, "Another account has this email.")
        }
        if app.settings.emailCollision == "reject", try data.users.emailInUse(email, except: user) {
            throw GatehouseError(.emailAlreadyInUse, "Another account has this email.")
        }
    }

    // MARK: - Reauthentication by code

    /// `POST /v1/auth/reauthenticate/send-code`: a code to the account's address.
    public func sendReauthenticationCode(app: AppContext, claims: AccessClaims, origin: RequestOrigin) throws {
        let data = store.app(app.id)
        try limitSends(app, data, origin)
        guard let user = try data.users.user(claims.userID) else { throw GatehouseError(.sessionRevoked, "This account no longer exists.") }
        guard let email = user.email else { throw GatehouseError.validation("email", "The account has no email address to send a code to.") }
        try units.run(data) { tx in
            try codes.send(
                tx, app: app, purpose: .reauthentication, address: email, userID: user.id,
                mail: EmailToSend(.reauthentication, to: email, app: app, user: user, origin: origin), deliver: true)
        }
    }

    /// `POST /v1/auth/reauthenticate` with `code`: a fresh `auth_time`.
    public func reauthenticate(app: AppContext, claims: AccessClaims, code: String, origin: RequestOrigin) throws -> (token: String, expiresIn: Int64) {
        let data = store.app(app.id)
        try gate.limitAuth(app, data, origin)
        try InputRules.emailCode(code)
        try sessions.requireReauthenticationGuessesLeft(app, claims: claims)
        guard let user = try data.users.user(claims.userID), let email = user.email else { throw GatehouseError(.invalidCode, "The code is not valid.") }
        do {
            try codes.redeem(data, app: app, purpose: .reauthentication, address: email, code: code, userID: user.id) { _ in }
        } catch let error as GatehouseError where error.code == .invalidCode {
            try sessions.countFailedReauthentication(app, claims: claims)
            throw error
        }
        return try sessions.refreshAuthTime(app: app, claims: claims)
    }

    // MARK: -

    /// Code sends per IP: the app's auth limit, counted apart from sign-ins (each address has its own windows too).
    private func limitSends(_ app: AppContext, _ data: any AppScopedStore, _ origin: RequestOrigin) throws {
        try limiter.hit(data, bucket: "code_send", subject: rateLimitSubject(ip: origin.ip), limit: app.settings.rateLimits.authPerMinutePerIP)
    }
}
