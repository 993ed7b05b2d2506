import GatehouseCore
import GatehouseCrypto
import GatehouseHTTP
import Synchronization

/// How a fake provider signs a token it mints: properly, or in one of the ways attackers try.
public enum FakeSignature: Sendable {
    /// RS256 with the key named by the header's `kid` (the current key by default).
    case valid
    /// `alg: none` with an empty signature.
    case none
    /// `alg: HS256`, HMAC-keyed with the RSA *public* key's PEM (the classic key-confusion attack).
    case hs256WithPublicKey
    /// RS256 header, but signed by a key the provider never published.
    case foreignKey
}

/// A provider's RSA signing keys: published as a JWKS, used to mint tokens.
public final class FakeKeyRing: Sendable {
    struct State {
        var keys: [(kid: String, key: SigningKey)]
        var maxAgeSeconds: Int?
        var serial: Int
    }

    private let prefix: String
    private let state: Mutex<State>
    private let foreign = Mutex<SigningKey?>(nil)  // made on first use: RSA key generation is slow

    /// One RSA key with kid `<kidPrefix>-1`. That first key is generated once per process and
    /// prefix and shared by every ring with the same prefix (as a real provider's keys are the same
    /// for everyone; RSA key generation costs ~150 ms per key and the fakes are made per test);
    /// ``rotate(retireOld:)`` generates private keys. `maxAgeSeconds` is the JWKS
    /// `Cache-Control` max-age (`nil`: no header).
    public init(kidPrefix: String, maxAgeSeconds: Int?) throws {
        prefix = kidPrefix
        let first = try Self.sharedFirstKey(prefix: kidPrefix)
        state = Mutex(State(keys: [("\(kidPrefix)-1", first)], maxAgeSeconds: maxAgeSeconds, serial: 1))
    }

    private static let firstKeys = Mutex<[String: SigningKey]>([:])

    private static func sharedFirstKey(prefix: String) throws -> SigningKey {
        try firstKeys.withLock { keys in
            if let key = keys[prefix] { return key }
            let key = try SigningKey.generate(.rs256)
            keys[prefix] = key
            return key
        }
    }

    /// The kid new tokens are signed with.
    public var currentKid: String { state.withLock { $0.keys.last!.kid } }

    /// The public key of the current signing key.
    public var currentPublicKey: VerificationKey { state.withLock { $0.keys.last!.key.verificationKey } }

    /// Every published kid, oldest first.
    public var publishedKids: [String] { state.withLock { $0.keys.map(\.kid) } }

    /// Adds a new key, which signs from now on, and returns its kid. The old keys stay published
    /// unless `retireOld`.
    @discardableResult
    public func rotate(retireOld: Bool = false) throws -> String {
        let key = try SigningKey.generate(.rs256)
        return state.withLock { state in
            state.serial += 1
            let kid = "\(prefix)-\(state.serial)"
            if retireOld { state.keys.removeAll() }
            state.keys.append((kid, key))
            return kid
        }
    }

    /// Changes the JWKS `Cache-Control: max-age` (`nil`: no header).
    public func setMaxAge(_ seconds: Int?) { state.withLock { $0.maxAgeSeconds = seconds } }

    /// The JWKS document (`{"keys": [...]}`).
    public func jwks() -> JSON {
        let keys = state.withLock { $0.keys }
        return ["keys": .array(keys.map { Self.json($0.key.publicJWK(kid: $0.kid)) })]
    }

    /// The JWKS as an HTTP response, with `Cache-Control` when a max-age is set.
    public func jwksResponse() -> HTTPResponse {
        let maxAge = state.withLock { $0.maxAgeSeconds }
        var headers: [(String, String)] = []
        if let maxAge { headers.append(("Cache-Control", "public, max-age=\(maxAge), must-revalidate, no-transform")) }
        return FakeHTTPServer.json(200, jwks(), headers: headers)
    }

    /// A compact JWS of `claims`. The header is `{"alg": "RS256", "kid": <kid or current>}` with
    /// `headerOverrides` merged over it (a `null` value removes a member); `signature` picks how
    /// it is signed. A `kid` no key has signs with the current key (an "unknown kid" token).
    public func mint(
        claims: JSON, kid: String? = nil, signature: FakeSignature = .valid, headerOverrides: [String: JSON] = [:]
    ) -> String {
        let (currentKid, signer): (String, SigningKey) = state.withLock { state in
            let current = state.keys.last!
            let chosen = kid.flatMap { wanted in state.keys.first { $0.kid == wanted } } ?? current
            return (current.kid, chosen.key)
        }
        var header: [String: JSON] = ["alg": "RS256", "kid": .string(kid ?? currentKid)]
        switch signature {
        case .none: header["alg"] = "none"
        case .hs256WithPublicKey: header["alg"] = "HS256"
        case .valid, .foreignKey: break
        }
        for (name, value) in headerOverrides {
            if value == .null { header.removeValue(forKey: name) } else { header[name] = value }
        }
        let signingInput = Base64URL.encode(JSON.object(header).serialized()) + "." + Base64URL.encode(claims.serialized())
        let bytes: [UInt8]
        switch signature {
        case .valid: bytes = (try? signer.sign(Array(signingInput.utf8))) ?? []
        case .foreignKey: bytes = (try? foreignKey()?.sign(Array(signingInput.utf8))) ?? []
        case .none: bytes = []
        case .hs256WithPublicKey:
            bytes = Digest.hmacSHA256(key: Array(signer.verificationKey.spkiPEM().utf8), data: Array(signingInput.utf8))
        }
        return signingInput + "." + Base64URL.encode(bytes)
    }

    private func foreignKey() -> SigningKey? {
        foreign.withLock { key in
            if key == nil { key = try? SigningKey.generate(.rs256) }
            return key
        }
    }

    private static func json(_ jwk: JWK) -> JSON {
        var object: [String: JSON] = ["kty": .string(jwk.kty)]
        let members: [(String, String?)] = [
            ("kid", jwk.kid), ("use", jwk.use), ("alg", jwk.alg), ("n", jwk.n), ("e", jwk.e),
            ("crv", jwk.crv), ("x", jwk.x), ("y", jwk.y),
        ]
        for (name, value) in members { if let value { object[name] = .string(value) } }
        return .object(object)
    }
}

extension JSON {
    /// `claims` with `extra` merged over it (a `null` value removes the claim).
    static func claims(_ base: [String: JSON?], extra: [String: JSON]) -> JSON {
        var object: [String: JSON] = [:]
        for (name, value) in base { if let value { object[name] = value } }
        for (name, value) in extra {
            if value == .null { object.removeValue(forKey: name) } else { object[name] = value }
        }
        return .object(object)
    }
}
