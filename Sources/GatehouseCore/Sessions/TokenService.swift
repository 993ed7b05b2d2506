import GatehouseCrypto

#if canImport(Glibc)
import Glibc
#endif

/// The claims Gatehouse relies on in its own access tokens.
public struct AccessClaims: Sendable {
    public let userID: UserID
    public let sessionID: SessionID
    /// Seconds since the epoch.
    public let authTime: Int64
    public let issuedAt: Int64
    public let expiresAt: Int64
}

/// Issues and checks access tokens (JWTs signed with the app's own key) and refresh tokens.
public final class TokenService: Sendable {
    private let publicURL: String
    private let clock: any Clock
    private let refreshChainKey: HMACKey
    public let revocations: RevocationList
    private let verified = VerifiedTokens()

    public static let accessTokenType = "at+jwt"
    /// How far ahead of this node's clock another node may have issued a token.
    public static let issuedAtLeewaySeconds: Int64 = 60
    /// The longest `access_token_ttl_seconds` an app may set.
    public static let maxAccessTokenLifetimeSeconds: Int64 = 86400
    /// The longest access token checked. One this server mints stays under it: at most 4096 bytes of
    /// `app_metadata` (``UserMetadata/maxBytes``), an email and a `display_name` of 4-byte
    /// characters, a photo URL and an RSA signature come to about 9 KiB in base64url; a request's
    /// headers are at most 16 KiB anyway (`HTTPServer.Configuration.maxHeaderBytes`).
    public static let maxAccessTokenLength = 16384
    /// Every claim an access token may carry, in the order the discovery document lists them:
    /// RFC 9068's required ones, then the session's and the user's (`email`, `name` and `picture`
    /// only when the user has them; `app_metadata` only when not empty, never `user_metadata`;
    /// `is_anonymous` only as `true`, in an anonymous user's tokens).
    /// ``accessToken(app:user:session:)`` issues no other.
    public static let accessTokenClaims = [
        "iss", "sub", "aud", "exp", "iat", "jti", "client_id", "sid", "auth_time", "amr", "email", "email_verified", "name", "picture", "app_metadata",
        "is_anonymous",
    ]

    public init(publicURL: String, clock: any Clock, masterKey: [UInt8], revocations: RevocationList) {
        self.publicURL = publicURL
        self.clock = clock
        // A key of its own, derived from the master key, so the chain key is never the encryption key.
        self.refreshChainKey = HMACKey(Digest.hmacSHA256(key: masterKey, data: Array("gatehouse refresh-token chain v1".utf8)))
        self.revocations = revocations
    }

    public func issuer(_ app: AppID) -> String { "\(publicURL)/v1/apps/\(app.rawValue)" }

    /// A signed access token for the session, and its lifetime in seconds. It follows RFC 9068:
    /// `jti` is 128 random bits, new for every token (an identifier, not a secret: cut from the
    /// thread's pool, ``SecureRandom/identifierBytes(_:)``); `client_id` is the app id (the app is the
    /// one OAuth client of its own issuer, whatever platform its key was used from; docs/adr/0017).
    public func accessToken(app: AppContext, user: User, session: Session) throws -> (token: String, expiresIn: Int64) {
        let now = clock.nowSeconds
        // Never past the session's own end.
        let ttl = max(1, min(app.settings.accessTokenTTLSeconds, session.expiresAt / 1000 - now))
        var claims: [String: JSON] = [
            "iss": .string(issuer(app.id)), "aud": .string(app.id.rawValue), "sub": .string(user.id.rawValue), "sid": .string(session.id.rawValue),
            "jti": .string(Base64URL.encode(SecureRandom.identifierBytes(16))), "client_id": .string(app.id.rawValue),
            "iat": .int(now), "exp": .int(now + ttl), "auth_time": .int(session.authTime / 1000), "amr": .strings(session.authenticationMethods),
            "email_verified": .bool(user.emailVerified),
        ]
        if let email = user.email { claims["email"] = .string(email) }
        if let name = user.shownName { claims["name"] = .string(name) }
        if let photo = user.photoURL { claims["picture"] = .string(photo) }
        // The admin's custom data, at most 4 KiB (``UserMetadata``); left out when empty to keep tokens small.
        if !user.appMetadata.isEmpty { claims["app_metadata"] = user.appMetadata.json }
        // Only in an anonymous user's tokens: every other token stays as it was (absent means false).
        if user.isAnonymous { claims["is_anonymous"] = true }
        let token = try JWT.sign(payload: JSON.object(claims).serialized(), key: app.signingKey, kid: app.signingKeyID, type: Self.accessTokenType)
        return (token, ttl)
    }

    private static func isASCII(_ text: String) -> Bool {
        text.utf8.withContiguousStorageIfAvailable { bytes in
            // OR-ing every byte vectorises; a per-byte early exit does not.
            bytes.reduce(0, |) < 0x80
        } ?? text.utf8.allSatisfy { $0 < 0x80 }
    }

    /// Checks an access token of `app`: signature with one of the app's published keys and the
    /// app's algorithm only, issuer, audience, expiry (no leeway), and that its session has not ended.
    public func verifyAccessToken(_ token: String, app: AppContext) throws(GatehouseError) -> AccessClaims {
        let claims: AccessClaims
        // Swift compares strings by canonical equivalence (U+212A KELVIN SIGN equals "K"): only an
        // ASCII token, as every valid one is, may match a remembered one, so a match is byte for byte.
        if Self.isASCII(token), let known = verified.lookup(token), known.app == app.id, known.algorithm == app.settings.signingAlgorithm,
            let key = app.verificationKeys[known.kid], key === known.key
        {
            // Checked before, byte for byte, against a key the app still publishes.
            claims = known.claims
        } else {
            claims = try verifySignatureAndClaims(token, app: app)
        }
        guard clock.nowSeconds < claims.expiresAt else { throw GatehouseError(.tokenExpired, "The access token has expired; refresh it.") }
        if revocations.isEnded(claims.sessionID) { throw GatehouseError(.sessionRevoked, "This session has ended; sign in again.") }
        return claims
    }

    /// Everything about a token that cannot change once it was true: its signature and its claims.
    private func verifySignatureAndClaims(_ token: String, app: AppContext) throws(GatehouseError) -> AccessClaims {
        let invalid = GatehouseError(.invalidToken, "The access token is not valid for this app.")
        guard let parsed = try? JWT.parse(token, maxLength: Self.maxAccessTokenLength), parsed.header.alg == app.settings.signingAlgorithm.rawValue,
            parsed.header.typ == Self.accessTokenType, let kid = parsed.header.kid, let key = app.verificationKeys[kid],
            JWT.verify(parsed, with: key), let claims = try? JSON.parse(parsed.payload)
        else { throw invalid }
        guard claims["iss"] == .string(issuer(app.id)), claims["aud"] == .string(app.id.rawValue),
            case .int(let exp)? = claims["exp"], case .int(let iat)? = claims["iat"], case .int(let authTime)? = claims["auth_time"],
            let sub = claims["sub"]?.stringValue.flatMap(UserID.init(parsing:)), let sid = claims["sid"]?.stringValue.flatMap(SessionID.init(parsing:))
        else { throw invalid }
        // Signed with our key, yet not as we sign: issued in the future, or living longer than any
        // app may let a token live. Such a token comes from a leaked key or a clock gone wrong.
        guard iat <= clock.nowSeconds + Self.issuedAtLeewaySeconds, exp - iat <= Self.maxAccessTokenLifetimeSeconds, exp > iat else { throw invalid }
        let verifiedClaims = AccessClaims(userID: sub, sessionID: sid, authTime: authTime, issuedAt: iat, expiresAt: exp)
        if clock.nowSeconds < exp {
            verified.remember(
                token, VerifiedTokens.Entry(app: app.id, algorithm: app.settings.signingAlgorithm, kid: kid, key: key, claims: verifiedClaims),
                now: clock.nowSeconds)
        }
        return verifiedClaims
    }

    /// A new refresh token: 256 random bits.
    public func newRefreshToken() -> String { SecureRandom.token(byteCount: 32) }

    /// The token that replaces `token` at rotation. Derived (HMAC under a server key) rather than
    /// random so that a retry within the grace window can be given the very same successor without
    /// storing any token in clear.
    public func successor(of token: String) -> String {
        Base64URL.encode(refreshChainKey.tag(Array(token.utf8)))
    }

    /// How refresh tokens are stored: hex SHA-256.
    public func hash(refreshToken: String) -> String { Digest.hex(Digest.sha256(Array(refreshToken.utf8))) }
}

/// Access tokens this node has verified (signature, header and claims), by their exact text, so
/// that a client calling again with the same token costs a lookup instead of a signature check and
/// two JSON parses. Expiry and revocation are still checked on every use, and the app must still
/// publish the very key and use the algorithm the token was checked with. Bounded: at most
/// `capacity` tokens (about 1 KiB each), expired ones dropped first.
final class VerifiedTokens: Sendable {
    struct Entry: Sendable {
        let app: AppID
        let algorithm: SignatureAlgorithm
        let kid: String
        let key: VerificationKey
        let claims: AccessClaims
    }

    /// A token as a dictionary key, hashed by the last 32 bytes of its text instead of all of it
    /// (an RS256 token is about 700): those are the end of its signature, random for a token signed
    /// with an app's key, and only such tokens are remembered, so an attacker cannot fill a shard
    /// with colliding keys. Equality compares the whole text, byte for byte (as the hash does: two
    /// strings Swift calls equal may differ in bytes).
    private struct Key: Hashable {
        let token: String

        func hash(into hasher: inout Hasher) {
            var token = token
            token.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: $0.suffix(32)))) }
        }

        static func == (a: Key, b: Key) -> Bool {
            var a = a.token, b = b.token
            return a.withUTF8 { a in b.withUTF8 { b in a.count == b.count && (a.isEmpty || memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0) } }
        }
    }

    private final class Shard: Sendable {
        let entries = ReadWriteLock<[Key: Entry]>([:])
    }

    private let shards: [Shard] = (0..<16).map { _ in Shard() }
    private let shardCapacity: Int

    init(capacity: Int = 8_192) {
        shardCapacity = max(1, capacity / 16)
    }

    func lookup(_ token: String) -> Entry? {
        shard(token).entries.read { $0[Key(token: token)] }
    }

    func remember(_ token: String, _ entry: Entry, now: Int64) {
        let key = Key(token: token)
        shard(token).entries.write { entries in
            if entries.count >= shardCapacity, entries[key] == nil {
                entries.makeRoom(capacity: shardCapacity) { now >= $0.claims.expiresAt }
            }
            entries[key] = entry
        }
    }

    /// By a character of the signature rather than a second hash of the whole token (the lookup
    /// hashes it once): a remembered token was signed with an app's key, so its signature is random; its
    /// second-to-last base64url character carries six of its bits (the last may carry two).
    private func shard(_ token: String) -> Shard {
        let utf8 = token.utf8
        guard utf8.count >= 2 else { return shards[0] }
        return shards[Int(utf8[utf8.index(utf8.endIndex, offsetBy: -2)]) % shards.count]
    }
}
