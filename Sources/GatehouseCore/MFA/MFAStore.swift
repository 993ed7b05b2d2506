/// A TOTP factor's identifier.
public struct FactorID: PrefixedID {
    public static let prefix = "fac_"
    public let rawValue: String
    public init(unchecked rawValue: String) { self.rawValue = rawValue }
}

/// An authenticator app (RFC 6238) a user enrolled. The secret is held sealed by the store
/// (``SecretSealer``, bound to the app and the factor) and opened only to check a code.
public struct TOTPFactor: Sendable, Equatable {
    public var id: FactorID
    public var userID: UserID
    public var name: String?
    /// `v2.` sealed base32 secret (see ``MFAService``).
    public var sealedSecret: String
    /// Nil until a first code proved the app holds the secret; only confirmed factors count.
    public var confirmedAt: Int64?
    /// The last step whose code was accepted: no code of it or an earlier step is accepted again.
    public var lastUsedStep: Int64?
    public var lastUsedAt: Int64?
    public var createdAt: Int64

    public init(
        id: FactorID, userID: UserID, name: String?, sealedSecret: String, confirmedAt: Int64? = nil, lastUsedStep: Int64? = nil,
        lastUsedAt: Int64? = nil, createdAt: Int64
    ) {
        self.id = id
        self.userID = userID
        self.name = name
        self.sealedSecret = sealedSecret
        self.confirmedAt = confirmedAt
        self.lastUsedStep = lastUsedStep
        self.lastUsedAt = lastUsedAt
        self.createdAt = createdAt
    }
}

/// The second step a first-factor sign-in left open: found by the hash of its `mfa_token`.
public struct MFAChallenge: Sendable, Equatable {
    /// Hex SHA-256 of the `mfa_token`.
    public var tokenHash: String
    public var userID: UserID
    /// The first factor's method: the session opens with it.
    public var method: SignInMethod
    /// For the method `external`: the id of the app's provider the first factor was.
    public var provider: String?
    /// The first factor created the account (the session answer is 201).
    public var isNewUser: Bool
    /// The user had no factor and the app requires one: the token may enrol one.
    public var enroll: Bool
    /// The `amr` value of what an enrolment with this token confirmed (`otp` for TOTP, `hwk`/`swk`
    /// for a passkey): the enrolment was the second factor.
    public var satisfiedBy: String?
    public var createdAt: Int64
    public var expiresAt: Int64

    public init(
        tokenHash: String, userID: UserID, method: SignInMethod, provider: String? = nil, isNewUser: Bool, enroll: Bool, satisfiedBy: String? = nil,
        createdAt: Int64, expiresAt: Int64
    ) {
        self.provider = provider
        self.tokenHash = tokenHash
        self.userID = userID
        self.method = method
        self.isNewUser = isNewUser
        self.enroll = enroll
        self.satisfiedBy = satisfiedBy
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

/// What a user can answer a second step with.
public struct SecondFactors: Sendable, Equatable {
    public var totp: Int
    public var recoveryCodesLeft: Int
    public var passkeys: Int

    public init(totp: Int, recoveryCodesLeft: Int, passkeys: Int) {
        self.totp = totp
        self.recoveryCodesLeft = recoveryCodesLeft
        self.passkeys = passkeys
    }

    /// The user has a factor: every first-factor sign-in asks for the second step.
    public var any: Bool { totp > 0 || passkeys > 0 }
}

/// The app's TOTP factors, recovery codes and open second steps (migration 0021). Every query binds the app.
public protocol MFAStore: Sendable {
    func insertTOTPFactor(_ factor: TOTPFactor) throws
    /// Deletes the user's factors never confirmed (an enrolment started again replaces them).
    func deleteUnconfirmedTOTPFactors(of user: UserID) throws
    func totpFactor(_ id: FactorID, user: UserID) throws -> TOTPFactor?
    /// The user's confirmed factors, oldest first.
    func confirmedTOTPFactors(of user: UserID) throws -> [TOTPFactor]
    /// The confirmed factors of each of `users` (a page of the admin's list), oldest first.
    func confirmedTOTPFactors(of users: [UserID]) throws -> [UserID: [TOTPFactor]]
    /// Confirms an unconfirmed factor with the step of its first code; false when it was confirmed already or is gone.
    func confirmTOTPFactor(_ id: FactorID, user: UserID, step: Int64, now: Int64) throws -> Bool
    /// Records `step` as used, only if it is later than the factor's last used step (atomic):
    /// false when the code's step was used already.
    func useTOTPStep(_ id: FactorID, user: UserID, step: Int64, now: Int64) throws -> Bool
    func deleteTOTPFactor(_ id: FactorID, user: UserID) throws -> Bool
    /// Replaces the user's recovery codes by these (hex SHA-256 of each).
    func replaceRecoveryCodes(of user: UserID, hashes: [String], now: Int64) throws
    /// Uses the unused recovery code of this hash; false when there is none.
    func useRecoveryCode(of user: UserID, hash: String, now: Int64) throws -> Bool
    func deleteRecoveryCodes(of user: UserID) throws
    /// The user's confirmed factors and unused recovery codes.
    func secondFactors(of user: UserID) throws -> SecondFactors
    func insertChallenge(_ challenge: MFAChallenge) throws
    /// The unexpired, unused challenge of this token hash.
    func challenge(tokenHash: String, now: Int64) throws -> MFAChallenge?
    /// Records what an enrolment with the challenge confirmed (see ``MFAChallenge/satisfiedBy``).
    func satisfyChallenge(tokenHash: String, by amr: String, now: Int64) throws -> Bool
    /// Marks the challenge used (once: false when it was used already or has expired).
    func useChallenge(tokenHash: String, now: Int64) throws -> Bool
    /// Voids the user's open second steps: a first factor answered before a password change, a
    /// ban or a sign-out everywhere opens no session afterwards.
    func abandonChallenges(of user: UserID) throws
    /// Deletes all of the user's TOTP factors, recovery codes and open second steps (an account
    /// taken over by the owner of its address); the ids of the confirmed factors deleted.
    func forgetFactors(of user: UserID) throws -> [FactorID]
}
