/// Random values for Sign in with Apple and PKCE, from the system's cryptographically secure
/// generator (`SystemRandomNumberGenerator`: `arc4random_buf` on Apple platforms, `getrandom` on Linux).
enum SecureRandom {
    static func bytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    /// `count` random bytes as unpadded base64url (RFC 4648 §5).
    static func token(byteCount count: Int) -> String { Base64URL.encode(bytes(count)) }
}

/// Unpadded base64url, as PKCE (RFC 7636) and JWTs use it.
enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index < bytes.count {
            let b0 = UInt32(bytes[index])
            let b1 = index + 1 < bytes.count ? UInt32(bytes[index + 1]) : 0
            let b2 = index + 2 < bytes.count ? UInt32(bytes[index + 2]) : 0
            let triple = b0 << 16 | b1 << 8 | b2
            out.append(alphabet[Int(triple >> 18 & 63)])
            out.append(alphabet[Int(triple >> 12 & 63)])
            if index + 1 < bytes.count { out.append(alphabet[Int(triple >> 6 & 63)]) }
            if index + 2 < bytes.count { out.append(alphabet[Int(triple & 63)]) }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// A nonce for one Sign in with Apple request. Give Apple ``hashed`` (set it as
/// `ASAuthorizationAppleIDRequest.nonce`); Apple puts it in the identity token's `nonce` claim.
/// Then pass this value to ``GatehouseClient/signInWithApple(identityToken:nonce:authorizationCode:firstName:lastName:)``,
/// which sends Gatehouse ``raw``: Gatehouse checks that the token's claim is its SHA-256.
/// Make a new one for every request: Gatehouse accepts a token with a given nonce once.
public struct AppleNonce: Sendable, Hashable {
    /// The raw nonce (32 random bytes, base64url): sent to Gatehouse, never to Apple.
    public let raw: String
    /// Lowercase hex SHA-256 of ``raw``: what Apple's request takes.
    public let hashed: String

    /// A new random nonce.
    public init() {
        self.init(raw: SecureRandom.token(byteCount: 32))
    }

    /// A nonce from a raw value you made yourself.
    public init(raw: String) {
        self.raw = raw
        hashed = SHA256Hashing.hex(SHA256Hashing.hash(Array(raw.utf8)))
    }
}

/// A PKCE pair (RFC 7636) for the web flow: the verifier stays with the app, the challenge
/// (`S256`) goes to Gatehouse's `authorize`, and `/v1/auth/exchange` checks one against the other.
public struct PKCE: Sendable, Hashable, CustomStringConvertible {
    /// 43 characters of base64url (32 random bytes), within RFC 7636's 43–128 unreserved characters.
    public let verifier: String
    /// `BASE64URL(SHA-256(verifier))`, unpadded.
    public let challenge: String
    /// Always `S256`.
    public var method: String { "S256" }
    /// Printed, the verifier is left out: with it, an intercepted code could be exchanged.
    public var description: String { "PKCE(challenge: \(challenge), method: S256, verifier: <redacted>)" }

    /// A new random pair.
    public init() {
        self.init(verifier: SecureRandom.token(byteCount: 32))
    }

    /// The pair for a verifier you made yourself.
    public init(verifier: String) {
        self.verifier = verifier
        challenge = Base64URL.encode(SHA256Hashing.hash(Array(verifier.utf8)))
    }
}
