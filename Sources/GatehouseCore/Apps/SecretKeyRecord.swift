/// An app's admin secret key, stored only as a hash.
public struct SecretKeyRecord: Sendable, Equatable {
    public var id: String
    /// Hex SHA-256 of the whole key (the key has 256 random bits, so a plain hash is enough).
    public var keyHash: String
    /// The first characters, to tell keys apart in logs and listings.
    public var hint: String
    public var createdAt: Int64
    public var expiresAt: Int64?

    public init(id: String, keyHash: String, hint: String, createdAt: Int64, expiresAt: Int64? = nil) {
        self.id = id
        self.keyHash = keyHash
        self.hint = hint
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}
