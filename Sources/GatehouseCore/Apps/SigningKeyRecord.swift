import GatehouseCrypto

/// A signing key's place in its rotation: published before use (`next`), signing (`current`),
/// published until its last tokens have expired (`retired`).
public enum SigningKeyState: String, Sendable {
    case next, current, retired
}

/// One rotation of an app's signing keys, as ``AppSettingsStore/rotateSigningKeys(_:now:)`` does it.
public struct SigningKeyRotation: Sendable {
    public var newNext: SigningKeyRecord
    public var retiredExpiresAt: Int64
    public var revokePrevious: Bool
    public var minimumIntervalMillis: Int64
    public var maxRetired: Int

    public init(newNext: SigningKeyRecord, retiredExpiresAt: Int64, revokePrevious: Bool, minimumIntervalMillis: Int64, maxRetired: Int) {
        self.newNext = newNext
        self.retiredExpiresAt = retiredExpiresAt
        self.revokePrevious = revokePrevious
        self.minimumIntervalMillis = minimumIntervalMillis
        self.maxRetired = maxRetired
    }

    public enum Outcome: Sendable {
        /// The new signing key.
        case rotated(SigningKeyRecord)
        case noNextKey
    }

    /// The last rotation was less than the minimum interval ago.
    public struct TooSoon: Error {
        public let retryAfterMillis: Int64
        public init(retryAfterMillis: Int64) { self.retryAfterMillis = retryAfterMillis }
    }
}

public struct SigningKeyRecord: Sendable, Equatable {
    public var kid: String
    public var algorithm: SignatureAlgorithm
    /// The PKCS#8 PEM, sealed under the master key.
    public var sealedPrivateKey: String
    /// The public JWK as JSON text.
    public var publicJWK: String
    public var state: SigningKeyState
    public var createdAt: Int64
    /// For retired keys: when it leaves the JWKS.
    public var expiresAt: Int64?

    public init(
        kid: String, algorithm: SignatureAlgorithm, sealedPrivateKey: String, publicJWK: String, state: SigningKeyState,
        createdAt: Int64, expiresAt: Int64? = nil
    ) {
        self.kid = kid
        self.algorithm = algorithm
        self.sealedPrivateKey = sealedPrivateKey
        self.publicJWK = publicJWK
        self.state = state
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}
