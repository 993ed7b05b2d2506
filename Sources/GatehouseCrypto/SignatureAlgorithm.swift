/// The JWS signature algorithms Gatehouse signs and verifies with (RFC 7518 §3).
public enum SignatureAlgorithm: String, Sendable, Codable, CaseIterable {
    /// RSASSA-PKCS1-v1_5 with SHA-256, RSA keys of 2048 to 8192 bits.
    case rs256 = "RS256"
    /// ECDSA on P-256 with SHA-256; signatures are the raw 64-byte `r || s`.
    case es256 = "ES256"
}
