import GatehouseCrypto

/// What a ceremony is checked against: the relying party's id and the web origins allowed to use it.
public struct RelyingParty: Sendable, Equatable {
    public let id: String
    public let origins: [String]

    public init(id: String, origins: [String]) {
        self.id = id
        self.origins = origins
    }

    /// SHA-256 of the rp id, which authenticator data must start with.
    public var idHash: [UInt8] { Digest.sha256(Array(id.utf8)) }
}

/// A registration that verified (WebAuthn §7.1): the credential to store.
public struct VerifiedRegistration: Sendable {
    public let credentialID: [UInt8]
    /// The COSE_Key as the authenticator encoded it (stored; decoded again at each assertion).
    public let publicKey: [UInt8]
    public let algorithm: COSEAlgorithm
    public let signCount: UInt32
    public let aaguid: [UInt8]
    public let backupEligible: Bool
    public let backedUp: Bool
    /// `none` or `packed`.
    public let attestationFormat: String
}

/// An assertion that verified (WebAuthn §7.2), before the sign count is compared with the stored one.
public struct VerifiedAssertion: Sendable {
    public let signCount: UInt32
    public let backupEligible: Bool
    public let backedUp: Bool
}
