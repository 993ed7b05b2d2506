/// A JSON Web Key (RFC 7517) holding a *public* RSA or EC key. Members are base64url strings as
/// in RFC 7518 §6; `nil` members are omitted when encoded.
public struct JWK: Codable, Sendable, Equatable, Hashable {
    /// Key type: `"RSA"` or `"EC"`.
    public var kty: String
    /// Key ID, matched against a JWS header's `kid`.
    public var kid: String?
    /// Intended use; `"sig"` for signing keys.
    public var use: String?
    /// Algorithm the key is meant for, e.g. `"RS256"`.
    public var alg: String?
    /// RSA modulus (base64url, big-endian, no leading zeros).
    public var n: String?
    /// RSA public exponent (base64url, big-endian).
    public var e: String?
    /// EC curve name, `"P-256"`.
    public var crv: String?
    /// EC x coordinate (base64url, 32 bytes for P-256).
    public var x: String?
    /// EC y coordinate (base64url, 32 bytes for P-256).
    public var y: String?

    /// Creates a JWK from its members.
    public init(kty: String, kid: String? = nil, use: String? = nil, alg: String? = nil,
                n: String? = nil, e: String? = nil, crv: String? = nil, x: String? = nil, y: String? = nil) {
        self.kty = kty
        self.kid = kid
        self.use = use
        self.alg = alg
        self.n = n
        self.e = e
        self.crv = crv
        self.x = x
        self.y = y
    }

    /// The RFC 7638 JWK thumbprint: SHA-256 over the required members in canonical JSON,
    /// base64url-encoded. Returns `nil` when the required members for `kty` are missing.
    /// Suitable as a stable `kid`.
    public func thumbprint() -> String? {
        // Members are base64url or fixed names and need no JSON escaping; reject anything else.
        func plain(_ value: String?) -> String? {
            guard let value, value.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != 0x22 && $0 != 0x5C })
            else { return nil }
            return value
        }
        let canonical: String
        switch kty {
        case "RSA":
            guard let e = plain(e), let n = plain(n) else { return nil }
            canonical = #"{"e":"\#(e)","kty":"RSA","n":"\#(n)"}"#
        case "EC":
            guard let crv = plain(crv), let x = plain(x), let y = plain(y) else { return nil }
            canonical = #"{"crv":"\#(crv)","kty":"EC","x":"\#(x)","y":"\#(y)"}"#
        default:
            return nil
        }
        return Base64URL.encode(Digest.sha256(canonical.utf8))
    }
}

/// A JWK Set (RFC 7517 §5), the body of a `jwks_uri` document.
public struct JWKSet: Codable, Sendable, Equatable {
    /// The keys, in publication order.
    public var keys: [JWK]

    /// Creates a set from keys.
    public init(keys: [JWK]) { self.keys = keys }

    /// The first key whose `kid` equals `kid`.
    public func key(kid: String) -> JWK? { keys.first { $0.kid == kid } }
}
