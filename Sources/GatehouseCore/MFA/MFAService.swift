import GatehouseCrypto

/// What a second step is answered with (`POST /v1/auth/mfa/verify`).
public enum MFAProof: Sendable {
    /// A 6-digit code of one of the user's authenticator apps.
    case totp(String)
    /// One of the user's unused recovery codes (`xxxxx-xxxxx`).
    case recoveryCode(String)
    /// A WebAuthn AuthenticationResponseJSON, checked by ``PasskeyService``.
    case passkey(JSON)
}

/// Who enrols a factor: a signed-in user, or a sign-in under an app that requires a second
/// factor, holding the `mfa_token` of `auth/mfa-required` with `enroll: true`.
public enum MFAActor: Sendable {
    case session(AccessClaims)
    case enrolling(mfaToken: String)
}

/// One of a user's second factors as they and the app's admins see it (no secret).
public struct FactorSummary: Sendable, Equatable {
    public var id: String
    /// `totp` (`passkey` for passkeys).
    public var type: String
    public var name: String?
    public var createdAt: Int64
    public var lastUsedAt: Int64?

    public init(id: String, type: String, name: String?, createdAt: Int64, lastUsedAt: Int64?) {
        self.id = id
        self.type = type
        self.name = name
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
    }
}

/// `GET /v1/me/mfa`.
public struct MFAOverview: Sendable {
    public var policy: AppSettings.MFA.Policy
    public var factors: [FactorSummary]
    public var passkeys: Int
    public var recoveryCodesLeft: Int
}

/// A TOTP enrolment begun: the secret to show once (as text and as an `otpauth://` URL).
public struct TOTPEnrolment: Sendable {
    public var id: FactorID
    /// Base32, no padding.
    public var secret: String
    public var otpauthURL: String
}

/// Second factors (API.md, "Second factors and passkeys"): enrolling and removing authenticator
/// apps (RFC 6238), recovery codes, and the second step that opens a session after a first factor.
/// Wrong codes count against the user as emailed codes count against an address
/// (``EmailCodes/guessLimits``: 10 an hour, 20 a day, then 429 `auth/too-many-attempts`).
public final class MFAService: Sendable {
    private let store: any Store
    private let sessions: SessionService
    private let units: UnitOfWork
    private let gate: SignInGate
    private let sealer: SecretSealer
    private let clock: any Clock
    private let passkeys: PasskeyService
    private let recoveryCodeKey: HMACKey
    private let metrics: any DomainMetrics

    /// At most this many authenticator apps per user.
    public static let maxTOTPFactors = 5
    public static let recoveryCodeCount = 10
    /// Recovery codes' letters: lowercase and digits without `l`, `o`, `0`, `1` (32, so each
    /// random byte's low 5 bits pick one evenly); 10 of them are 50 bits.
    static let recoveryAlphabet = Array("abcdefghijkmnpqrstuvwxyz23456789".utf8)

    public init(
        store: any Store, sessions: SessionService, units: UnitOfWork, gate: SignInGate, sealer: SecretSealer, masterKey: [UInt8], clock: any Clock,
        passkeys: PasskeyService, metrics: any DomainMetrics = NoDomainMetrics()
    ) {
        self.recoveryCodeKey = HMACKey(MasterKeyDerivation.key(for: .recoveryCodes, from: masterKey))
        self.metrics = metrics
        self.store = store
        self.sessions = sessions
        self.units = units
        self.gate = gate
        self.sealer = sealer
        self.clock = clock
        self.passkeys = passkeys
    }

    // MARK: - Enrolling

    /// `POST /v1/me/mfa/totp`: a new, unconfirmed factor (any earlier unconfirmed one goes).
    /// A signed-in user needs a recent login.
    public func beginTOTP(app: AppContext, actor: MFAActor, name rawName: String?, origin: RequestOrigin) throws -> TOTPEnrolment {
        try requireEnrolment(.totp, app)
        let data = store.app(app.id)
        let userID = try enrollingUser(app: app, data, actor: actor, needsRecentLogin: true)
        let name = try rawName.flatMap { name throws(GatehouseError) in try InputRules.name(name, field: "name") }
        guard let user = try data.users.user(userID) else { throw GatehouseError(.sessionRevoked, "This account no longer exists.") }
        // A second factor of an account with no first one would guard nothing.
        try AnonymousUsers.requirePermanent(user, "enrol a second factor")
        guard try data.mfa.confirmedTOTPFactors(of: userID).count < Self.maxTOTPFactors else {
            throw GatehouseError.validation("name", "At most \(Self.maxTOTPFactors) authenticator apps; remove one first.")
        }
        let id = FactorID.generate()
        let secret = Base32.encode(SecureRandom.bytes(TOTP.secretByteCount))
        let now = clock.nowMillis()
        try units.run(data) { tx in
            try tx.mfa.deleteUnconfirmedTOTPFactors(of: userID)
            try tx.mfa.insertTOTPFactor(TOTPFactor(id: id, userID: userID, name: name, sealedSecret: seal(secret, app: app.id, factor: id), createdAt: now))
        }
        let account = user.email ?? user.id.rawValue
        let issuer = Self.percentEncoded(app.settings.name)
        let url = "otpauth://totp/\(issuer):\(Self.percentEncoded(account))?secret=\(secret)&issuer=\(issuer)&algorithm=SHA1&digits=\(TOTP.digits)&period=\(TOTP.periodSeconds)"
        return TOTPEnrolment(id: id, secret: secret, otpauthURL: url)
    }

    /// `POST /v1/me/mfa/totp/{id}/confirm`: the factor counts from now on; returns 10 new
    /// recovery codes (shown once; they replace any earlier set). `mfa.enrolled` is recorded. An
    /// enrolling `mfa_token` is then satisfied: `POST /v1/auth/mfa/verify` with it needs no proof.
    public func confirmTOTP(app: AppContext, actor: MFAActor, id rawID: String, code: String, origin: RequestOrigin) throws -> [String] {
        try requireEnrolment(.totp, app)
        let data = store.app(app.id)
        let userID = try enrollingUser(app: app, data, actor: actor, needsRecentLogin: false)
        guard let id = FactorID(parsing: rawID), let factor = try data.mfa.totpFactor(id, user: userID) else { throw GatehouseError(.notFound, "No such factor.") }
        guard factor.confirmedAt == nil else { throw GatehouseError.validation("code", "This factor is confirmed already.") }
        let now = clock.nowMillis()
        try takeAttempt(data, userID, now: now)
        guard let step = TOTP.matchingStep(code, secret: try openSecret(factor, app: app.id), at: now / 1000) else {
            try recordFailure(data, userID, now: now, origin: origin)
            throw GatehouseError(.invalidCode, "The code is not valid.")
        }
        let codes = (0..<Self.recoveryCodeCount).map { _ in Self.newRecoveryCode() }
        try units.run(data) { tx in
            guard try tx.mfa.confirmTOTPFactor(id, user: userID, step: step, now: now) else { throw GatehouseError.validation("code", "This factor is confirmed already.") }
            try tx.mfa.replaceRecoveryCodes(of: userID, hashes: codes.map { recoveryCodeHash($0, app: app.id, user: userID) }, now: now)
            if case .enrolling(let token) = actor { _ = try tx.mfa.satisfyChallenge(tokenHash: SessionService.mfaTokenHash(token), by: "otp", now: now) }
            try tx.auditLog.record(Event(
                type: .mfaEnrolled, userID: userID, sessionID: actor.sessionID, ip: origin.ip, userAgent: origin.userAgent,
                data: ["factor_id": .string(id.rawValue), "type": "totp"], createdAt: now))
        }
        try resetGuesses(data, userID)
        return codes
    }

    /// `DELETE /v1/me/mfa/totp/{id}` (recent login): `mfa.removed`. With no factor left, the
    /// recovery codes go too.
    public func removeTOTP(app: AppContext, claims: AccessClaims, id rawID: String, origin: RequestOrigin) throws {
        try sessions.requireRecentLogin(app: app, claims: claims)
        try remove(app: app, user: claims.userID, id: rawID, by: "user", sessionID: claims.sessionID, origin: origin)
    }

    /// `GET /v1/me/mfa`.
    public func overview(app: AppContext, claims: AccessClaims) throws -> MFAOverview {
        let data = store.app(app.id)
        let factors = try data.mfa.secondFactors(of: claims.userID)
        return MFAOverview(
            policy: app.settings.mfa.policy, factors: try totpSummaries(data, claims.userID), passkeys: factors.passkeys,
            recoveryCodesLeft: factors.recoveryCodesLeft)
    }

    // MARK: - Passkeys in the second step

    /// `POST /v1/me/passkeys/options` under an enrolling `mfa_token` (`Authorization: Bearer mfa_…`):
    /// creation options for the user it is for, when the app lets users enrol passkeys.
    public func passkeyCreationOptions(app: AppContext, mfaToken: String, origin: RequestOrigin) throws -> JSON {
        try requireEnrolment(.passkey, app)
        let user = try enrollingUser(app: app, store.app(app.id), actor: .enrolling(mfaToken: mfaToken), needsRecentLogin: false)
        return try passkeys.creationOptions(app: app, user: user, origin: origin)
    }

    /// `POST /v1/me/passkeys` under an enrolling `mfa_token`: registers the passkey and records
    /// that the enrolment is proven (`hwk`, or `swk` for a synced passkey), so that
    /// `POST /v1/auth/mfa/verify` with the token then needs no proof.
    public func registerPasskey(app: AppContext, mfaToken: String, credential: JSON, name: String?, origin: RequestOrigin) throws -> Passkey {
        try requireEnrolment(.passkey, app)
        let data = store.app(app.id)
        let user = try enrollingUser(app: app, data, actor: .enrolling(mfaToken: mfaToken), needsRecentLogin: false)
        let passkey = try passkeys.register(app: app, user: user, session: nil, credential: credential, name: name, origin: origin)
        _ = try data.mfa.satisfyChallenge(tokenHash: SessionService.mfaTokenHash(mfaToken), by: passkey.backupEligible ? "swk" : "hwk", now: clock.nowMillis())
        return passkey
    }

    /// `POST /v1/auth/passkey/options {mfa_token}`: request options for the second step, listing
    /// the passkeys of the user the token is for. 401 `auth/invalid-mfa-token` for a token that
    /// is not open.
    public func passkeyRequestOptions(app: AppContext, mfaToken: String, origin: RequestOrigin) throws -> JSON {
        try passkeys.secondStepOptions(app: app, userID: secondStepUser(app: app, mfaToken: mfaToken), origin: origin)
    }

    /// The user of an open second step (an unexpired, unused `mfa_token` of this app, enrolling
    /// or not); else 401 `auth/invalid-mfa-token`.
    public func secondStepUser(app: AppContext, mfaToken: String) throws -> UserID {
        try openChallenge(store.app(app.id), mfaToken, now: clock.nowMillis()).userID
    }

    // MARK: - The second step

    /// `POST /v1/auth/mfa/verify`: the session the first factor would have opened (same method,
    /// `is_new_user`), its `amr` the first factor's plus `otp` (code, recovery code) or
    /// `hwk`/`swk` (passkey), plus `mfa`. No proof: only for a token whose enrolment was confirmed.
    public func verify(app: AppContext, mfaToken: String, proof: MFAProof?, origin: RequestOrigin) throws -> SessionGrant {
        let data = store.app(app.id)
        try gate.limitAuth(app, data, origin)
        let now = clock.nowMillis()
        let challenge = try openChallenge(data, mfaToken, now: now)
        // Counted as a sign-in of the first factor's method, now that it ends.
        return try metrics.countingSignIn(challenge.method) { try answer(app: app, data, challenge, proof: proof, origin: origin, now: now) }
    }

    /// Answers the second step. The token is taken and a code or recovery code used in the
    /// session's transaction: two verifies with one token cannot both use a code, and a wrong
    /// code (rolled back) leaves the token for the next try; the failure is counted after.
    private func answer(app: AppContext, _ data: any AppScopedStore, _ challenge: MFAChallenge, proof: MFAProof?, origin: RequestOrigin, now: Int64) throws -> SessionGrant {
        let user = challenge.userID
        var passkeyAMR: String?
        switch proof {
        case nil:
            guard challenge.enroll else { throw GatehouseError.validation("code", "Give one of code, recovery_code or passkey.") }
            guard challenge.satisfiedBy != nil else {
                throw GatehouseError.validation("mfa_token", "Enrol a factor with this mfa_token first (POST /v1/me/mfa/totp, then its confirm).")
            }
        case .totp, .recoveryCode:
            try takeAttempt(data, user, now: now)
        case .passkey(let credential):
            guard app.settings.mfa.methods.contains(.passkey) else {
                throw GatehouseError.validation("passkey", "This app does not offer passkeys as a second factor.")
            }
            try takeAttempt(data, user, now: now)
            // Its challenge is single use already: checked (and its sign count kept) on its own.
            do {
                passkeyAMR = try passkeys.verifySecondStep(app: app, userID: user, credential: credential, origin: origin).amr
            } catch let error as GatehouseError where error.code == .invalidCredential {
                try recordFailure(data, user, now: now, origin: origin)
                throw error
            }
        }
        guard let account = try data.users.user(user) else { throw Self.invalidToken }
        do {
            return try units.run(data) { tx in
                guard try tx.mfa.useChallenge(tokenHash: challenge.tokenHash, now: now) else { throw Self.invalidToken }
                let second: String
                switch proof {
                case nil: second = challenge.satisfiedBy ?? "otp"
                case .totp(let code):
                    guard try useTOTPCode(app: app, tx, user: user, code: code, now: now) else { throw GatehouseError(.invalidCode, "The code is not valid.") }
                    second = "otp"
                case .recoveryCode(let code):
                    guard let normalized = Self.normalizedRecoveryCode(code),
                        try tx.mfa.useRecoveryCode(of: user, hash: recoveryCodeHash(normalized, app: app.id, user: user), now: now)
                    else { throw GatehouseError(.invalidCode, "The recovery code is not valid.") }
                    second = "otp"
                case .passkey: second = passkeyAMR ?? "hwk"
                }
                if proof != nil { try resetGuesses(tx, user) }
                return try sessions.startSession(
                    app: app, tx, user: account, method: challenge.method, isNewUser: challenge.isNewUser, origin: origin,
                    secondStep: .done(amr: uniqued([challenge.method.amr, second, "mfa"])),
                    detail: challenge.provider.map { ["method": .string($0)] } ?? [:])
            }.session()
        } catch let error as GatehouseError where error.code == .invalidCode {
            try recordFailure(data, user, now: now, origin: origin)
            throw error
        }
    }

    // MARK: - Admin

    /// The user's factors (authenticator apps, then passkeys), for the admin user object (no secrets).
    public func factors(app: AppContext, user: UserID) throws -> [FactorSummary] {
        try factors(app: app, users: [user])[user] ?? []
    }

    /// The factors of each user of a page of the admin's list: two queries a page.
    public func factors(app: AppContext, users: [UserID]) throws -> [UserID: [FactorSummary]] {
        let data = store.app(app.id)
        var factors = try data.mfa.confirmedTOTPFactors(of: users).mapValues { $0.map(Self.summary) }
        for (user, passkeys) in try data.passkeys.passkeys(of: users) {
            factors[user, default: []] += passkeys.map(Self.summary)
        }
        return factors
    }

    /// `DELETE /v1/admin/users/{id}/factors/{factor_id}`: a lost phone or security key. Records
    /// `mfa.removed` (an authenticator app) or `passkey.removed` with `by: admin`.
    public func removeByAdmin(app: AppContext, user rawUser: String, factor: String) throws {
        guard let user = UserID(parsing: rawUser), try store.app(app.id).users.user(user) != nil else { throw GatehouseError(.notFound, "No such user.") }
        let origin = RequestOrigin(ip: nil, userAgent: nil)
        if PasskeyID(parsing: factor) != nil {
            try passkeys.remove(app: app, user: user, session: nil, id: factor, by: "admin", origin: origin)
        } else {
            try remove(app: app, user: user, id: factor, by: "admin", sessionID: nil, origin: origin)
        }
    }

    // MARK: - Inside

    private static let invalidToken = GatehouseError(.invalidMFAToken, "The mfa_token is unknown, expired or used: sign in again.")

    private func openChallenge(_ data: any AppScopedStore, _ token: String, now: Int64) throws -> MFAChallenge {
        guard token.hasPrefix("mfa_"), token.utf8.count <= 128, let challenge = try data.mfa.challenge(tokenHash: SessionService.mfaTokenHash(token), now: now) else {
            throw Self.invalidToken
        }
        return challenge
    }

    /// The user whose factor this is: the access token's (with a recent login when asked), or an
    /// enrolling `mfa_token`'s.
    private func enrollingUser(app: AppContext, _ data: any AppScopedStore, actor: MFAActor, needsRecentLogin: Bool) throws -> UserID {
        switch actor {
        case .session(let claims):
            if needsRecentLogin { try sessions.requireRecentLogin(app: app, claims: claims) }
            return claims.userID
        case .enrolling(let token):
            let challenge = try openChallenge(data, token, now: clock.nowMillis())
            guard challenge.enroll else { throw GatehouseError(.invalidMFAToken, "This mfa_token does not enrol a factor: answer the second step.") }
            // One enrolment a token, and only for a user who still has no factor (one enrolled
            // meanwhile by another way in makes this token an answer it is not).
            guard challenge.satisfiedBy == nil, !(try data.mfa.secondFactors(of: challenge.userID).any) else {
                throw GatehouseError(.invalidMFAToken, "This mfa_token's enrolment is done: finish with POST /v1/auth/mfa/verify, or sign in again.")
            }
            return challenge.userID
        }
    }

    private func requireEnrolment(_ method: AppSettings.MFA.Method, _ app: AppContext) throws {
        let mfa = app.settings.mfa
        guard mfa.policy != .off, mfa.methods.contains(method) else {
            throw GatehouseError(.signInMethodDisabled, "This app does not offer \(method == .totp ? "authenticator apps" : "passkeys") as a second factor.")
        }
    }

    private func remove(app: AppContext, user: UserID, id rawID: String, by: String, sessionID: SessionID?, origin: RequestOrigin) throws {
        let data = store.app(app.id)
        guard let id = FactorID(parsing: rawID) else { throw GatehouseError(.notFound, "No such factor.") }
        let now = clock.nowMillis()
        try units.run(data) { tx in
            guard let factor = try tx.mfa.totpFactor(id, user: user), try tx.mfa.deleteTOTPFactor(id, user: user) else { throw GatehouseError(.notFound, "No such factor.") }
            if !(try tx.mfa.secondFactors(of: user).any) { try tx.mfa.deleteRecoveryCodes(of: user) }
            // An enrolment never confirmed was no factor: nothing to tell.
            guard factor.confirmedAt != nil else { return }
            try tx.auditLog.record(Event(
                type: .mfaRemoved, userID: user, sessionID: sessionID, ip: origin.ip, userAgent: origin.userAgent,
                data: ["factor_id": .string(id.rawValue), "type": "totp", "by": .string(by)], createdAt: now))
        }
    }

    private func totpSummaries(_ data: any AppScopedStore, _ user: UserID) throws -> [FactorSummary] {
        try data.mfa.confirmedTOTPFactors(of: user).map(Self.summary)
    }

    private static func summary(_ factor: TOTPFactor) -> FactorSummary {
        FactorSummary(id: factor.id.rawValue, type: "totp", name: factor.name, createdAt: factor.createdAt, lastUsedAt: factor.lastUsedAt)
    }

    private static func summary(_ passkey: Passkey) -> FactorSummary {
        FactorSummary(id: passkey.id.rawValue, type: "passkey", name: passkey.name, createdAt: passkey.createdAt, lastUsedAt: passkey.lastUsedAt)
    }

    /// Whether `code` is a current code of one of the user's confirmed factors whose step was not
    /// used yet; the step is used up.
    private func useTOTPCode(app: AppContext, _ data: any AppScopedStore, user: UserID, code: String, now: Int64) throws -> Bool {
        let trimmed = code.filter { $0 != " " }
        for factor in try data.mfa.confirmedTOTPFactors(of: user) {
            guard let step = TOTP.matchingStep(trimmed, secret: try openSecret(factor, app: app.id), at: now / 1000) else { continue }
            return try data.mfa.useTOTPStep(factor.id, user: user, step: step, now: now)
        }
        return false
    }

    private func seal(_ secret: String, app: AppID, factor: FactorID) -> String {
        sealer.seal(secret, app: app, field: "mfa_totp/\(factor.rawValue)")
    }

    private func openSecret(_ factor: TOTPFactor, app: AppID) throws -> [UInt8] {
        guard let secret = Base32.decode(try sealer.open(factor.sealedSecret, app: app, field: "mfa_totp/\(factor.id.rawValue)")) else {
            throw CryptoError(.malformedInput, "a TOTP secret is not base32")
        }
        return secret
    }

    static func newRecoveryCode() -> String {
        let letters = SecureRandom.bytes(10).map { recoveryAlphabet[Int($0 & 31)] }
        return String(decoding: letters[0..<5], as: UTF8.self) + "-" + String(decoding: letters[5..<10], as: UTF8.self)
    }

    /// The code's 10 letters, lowercased, without the dash or spaces; nil when it cannot be one.
    static func normalizedRecoveryCode(_ code: String) -> String? {
        let letters = code.lowercased().utf8.filter { $0 != 0x2D && $0 != 0x20 }
        guard letters.count == 10, letters.allSatisfy(recoveryAlphabet.contains) else { return nil }
        return String(decoding: letters, as: UTF8.self)
    }

    /// How recovery codes are stored: hex HMAC-SHA-256, under a key derived from the master key,
    /// of the app, the user and the normalized code. 50 random bits behind the guess limits need no
    /// slow hash; the key keeps a copy of the database from being a list to search offline.
    func recoveryCodeHash(_ code: String, app: AppID, user: UserID) -> String {
        let normalized = Self.normalizedRecoveryCode(code) ?? code
        return Digest.hex(recoveryCodeKey.tag(Array("\(app.rawValue)\u{0}\(user.rawValue)\u{0}\(normalized)".utf8)))
    }

    private static func percentEncoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            if (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39) || [0x2D, 0x2E, 0x5F, 0x7E].contains(byte) {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += "%" + String(byte, radix: 16, uppercase: true).leftPadded
            }
        }
        return out
    }

    // MARK: - Guess limits (per user, the windows of emailed codes)

    private func guessSubject(_ user: UserID) -> String { "mfa:\(user.rawValue)" }

    /// Counts an attempt before its code is checked, so that attempts made at once each take a
    /// place and no more than the limit are ever checked (10 an hour, 20 a day, as emailed codes);
    /// a right answer resets the count.
    private func takeAttempt(_ data: any AppScopedStore, _ user: UserID, now: Int64) throws {
        for limit in EmailCodes.guessLimits {
            let start = now - now % limit.windowMillis
            guard try data.rateLimits.hit(bucket: "\(limit.bucket):\(guessSubject(user))", windowStart: start) > limit.failures else { continue }
            let seconds = Int(max(1, (start + limit.windowMillis - now + 999) / 1000))
            throw GatehouseError(.tooManyAttempts, "Too many wrong codes; retry in \(seconds) s.", retryAfter: seconds)
        }
    }

    private func recordFailure(_ data: any AppScopedStore, _ user: UserID, now: Int64, origin: RequestOrigin) throws {
        try units.record(
            Event(type: .userSignInFailed, userID: user, sessionID: nil, ip: origin.ip, userAgent: origin.userAgent, data: ["method": "mfa"], createdAt: now), in: data)
    }

    private func resetGuesses(_ data: any AppScopedStore, _ user: UserID) throws {
        for limit in EmailCodes.guessLimits { try data.rateLimits.reset(bucket: "\(limit.bucket):\(guessSubject(user))") }
    }
}

extension MFAActor {
    fileprivate var sessionID: SessionID? { if case .session(let claims) = self { claims.sessionID } else { nil } }
}

extension String {
    fileprivate var leftPadded: String { count < 2 ? "0" + self : self }
}
