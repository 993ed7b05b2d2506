import GatehouseCrypto

/// How a sign-in ended: a session, or a second step to answer first.
public enum SignInOutcome: Sendable {
    case session(SessionGrant)
    /// The first factor was right; `POST /v1/auth/mfa/verify` with the token opens the session.
    case secondStep(SecondStepRequired)

    /// The session, or 401 `auth/mfa-required` with the second step's token. Call it once the
    /// unit of work the sign-in ran in has committed: a sign-up's account (and the second step's
    /// token) must stay, though the answer is an error.
    public func session() throws(GatehouseError) -> SessionGrant {
        switch self {
        case .session(let grant): return grant
        case .secondStep(let step): throw step.error
        }
    }
}

/// The open second step of a sign-in (API.md, "Second factors and passkeys").
public struct SecondStepRequired: Sendable {
    /// `mfa_` and 256 random bits; stored as its SHA-256 only.
    public let mfaToken: String
    /// What the user can answer with (`totp`, `recovery_code`, `passkey`), or, when enrolling,
    /// what the app lets them enrol (`totp`, `passkey`).
    public let methods: [String]
    /// The user has no factor and the app requires one: the token may enrol one, then verify.
    public let enroll: Bool
    public let expiresIn: Int64

    /// 401 `auth/mfa-required` with `mfa_token`, `methods`, `enroll` and `expires_in`.
    public var error: GatehouseError {
        var error = GatehouseError(
            .mfaRequired,
            enroll
                ? "This app requires a second factor: enrol one with the mfa_token, then call POST /v1/auth/mfa/verify."
                : "Answer the second step: POST /v1/auth/mfa/verify with the mfa_token and a code, a recovery code or a passkey.")
        error.extensions = [
            "mfa_token": .string(mfaToken), "methods": .strings(methods), "enroll": .bool(enroll), "expires_in": .int(expiresIn),
        ]
        return error
    }
}

/// Whether a session may open at once, or only after a second step.
public enum SecondStepRule: Sendable, Equatable {
    /// A first factor (password, emailed code, a provider, the web flow's exchange): when the
    /// user has a confirmed factor, or the app requires one, the sign-in answers a second step.
    case ask
    /// No second step: it was answered (`POST /v1/auth/mfa/verify`), or the sign-in is
    /// multi-factor by itself (a passkey: `["hwk" | "swk", "mfa"]`). `amr` is the session's,
    /// kept for its refreshes.
    case done(amr: [String])
}

extension SessionService {
    /// How long an `mfa_token` lives.
    public static let mfaTokenLifetimeSeconds: Int64 = 300

    /// How `mfa_token`s are stored and looked up: hex SHA-256.
    public static func mfaTokenHash(_ token: String) -> String { Digest.hex(Digest.sha256(Array(token.utf8))) }

    /// The second step `user` must answer after a first factor, its challenge stored (in the
    /// caller's unit of work); nil when the session may open at once.
    func secondStep(
        app: AppContext, _ data: any AppScopedStore, user: User, method: SignInMethod, provider: String?, isNewUser: Bool, now: Int64
    ) throws -> SecondStepRequired? {
        let settings = app.settings.mfa
        guard settings.policy != .off else { return nil }
        var factors = try data.mfa.secondFactors(of: user.id)
        // A passkey counts as a second factor only where the app offers passkeys as one.
        if !settings.methods.contains(.passkey) { factors.passkeys = 0 }
        var methods: [String] = []
        let enroll: Bool
        if factors.any {
            if factors.totp > 0 { methods.append("totp") }
            if factors.recoveryCodesLeft > 0 { methods.append("recovery_code") }
            if factors.passkeys > 0 { methods.append("passkey") }
            enroll = false
        } else if settings.policy == .required {
            methods = settings.methods.map(\.rawValue)
            enroll = true
        } else {
            return nil
        }
        let token = "mfa_" + SecureRandom.token(byteCount: 32)
        try data.mfa.insertChallenge(MFAChallenge(
            tokenHash: Self.mfaTokenHash(token), userID: user.id, method: method, provider: provider, isNewUser: isNewUser, enroll: enroll, createdAt: now,
            expiresAt: now + Self.mfaTokenLifetimeSeconds * 1000))
        return SecondStepRequired(mfaToken: token, methods: methods, enroll: enroll, expiresIn: Self.mfaTokenLifetimeSeconds)
    }
}
