/// A passkey's identifier (`pk_…`).
public struct PasskeyID: PrefixedID {
    public static let prefix = "pk_"
    public let rawValue: String
    public init(unchecked rawValue: String) { self.rawValue = rawValue }
}

/// A registered WebAuthn credential (ADR 0028). Its key material never leaves the server's
/// responses: the listing shows ``id``, ``name``, dates, ``backedUp`` and ``aaguid``.
public struct Passkey: Sendable, Equatable {
    public var id: PasskeyID
    public var userID: UserID
    /// The credential id, base64url without padding (as browsers send `rawId`).
    public var credentialID: String
    /// The COSE_Key as the authenticator encoded it, base64url without padding.
    public var publicKey: String
    /// The COSE algorithm (-7 ES256, -257 RS256).
    public var algorithm: Int64
    public var signCount: Int64
    /// The authenticator's model (AAGUID) as a lowercase UUID; all zeros when it does not say.
    public var aaguid: String
    public var backupEligible: Bool
    public var backedUp: Bool
    /// What the browser said the authenticator speaks over (`usb`, `internal`, `hybrid`, …).
    public var transports: [String]
    public var name: String
    public var createdAt: Int64
    public var lastUsedAt: Int64?

    public init(
        id: PasskeyID, userID: UserID, credentialID: String, publicKey: String, algorithm: Int64, signCount: Int64, aaguid: String, backupEligible: Bool,
        backedUp: Bool, transports: [String], name: String, createdAt: Int64, lastUsedAt: Int64?
    ) {
        self.id = id
        self.userID = userID
        self.credentialID = credentialID
        self.publicKey = publicKey
        self.algorithm = algorithm
        self.signCount = signCount
        self.aaguid = aaguid
        self.backupEligible = backupEligible
        self.backedUp = backedUp
        self.transports = transports
        self.name = name
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
    }
}

/// What a WebAuthn challenge was issued for; a challenge is taken only for its own purpose.
public enum PasskeyPurpose: String, Sendable, CaseIterable {
    case register
    case signIn = "sign_in"
    case reauth
    case secondStep = "second_step"
}

/// A challenge taken (used up): whom it was issued to, if anyone.
public struct TakenPasskeyChallenge: Sendable, Equatable {
    public var purpose: PasskeyPurpose
    public var userID: UserID?
    public init(purpose: PasskeyPurpose, userID: UserID?) {
        self.purpose = purpose
        self.userID = userID
    }
}

/// Of a passkey sign-in, reauthentication or second step that verified: the passkey (its new
/// sign count recorded) and the `amr` value it earns (`swk` when the credential may be synced
/// to other devices, its backup-eligible flag set; `hwk` otherwise).
public struct PasskeyUse: Sendable, Equatable {
    public var passkey: Passkey
    public var amr: String
    public init(passkey: Passkey, amr: String) {
        self.passkey = passkey
        self.amr = amr
    }
}
