import Foundation

/// Compact JWS (RFC 7515) signing and verification with RS256 / ES256.
///
/// Claims are opaque JSON bytes to this module: callers encode and decode them (and check `exp`,
/// `aud`, `iss`, …) themselves. This type only guarantees that the bytes were signed by the key.
public enum JWT {
    /// Default upper bound on a token's length accepted by ``parse(_:maxLength:)``.
    public static let defaultMaxLength = 16384

    /// A JWS protected header. Only the members Gatehouse uses are modelled.
    public struct Header: Codable, Sendable, Equatable {
        /// Signature algorithm, e.g. `"RS256"`.
        public var alg: String
        /// Key ID selecting the verification key.
        public var kid: String?
        /// Media type of the token, e.g. `"JWT"` or `"at+jwt"`.
        public var typ: String?

        /// Creates a header.
        public init(alg: String, kid: String? = nil, typ: String? = nil) {
            self.alg = alg
            self.kid = kid
            self.typ = typ
        }
    }

    /// A split and decoded compact JWS whose signature has *not* been checked yet.
    public struct Parsed: Sendable {
        /// The decoded protected header.
        public let header: Header
        /// The header's raw JSON bytes, for callers that need members beyond ``Header``.
        public let headerJSON: [UInt8]
        /// The payload bytes (claims JSON for a JWT). Untrusted until ``JWT/verify(_:with:)`` succeeds.
        public let payload: [UInt8]
        /// The ASCII bytes `base64url(header) "." base64url(payload)` exactly as they appeared.
        public let signingInput: [UInt8]
        /// The decoded signature bytes.
        public let signature: [UInt8]
    }

    /// Signs `payload` and returns `header.payload.signature`, with header JSON
    /// `{"alg":…,"kid":…,"typ":…}` (`typ` omitted when `nil`).
    public static func sign(payload: [UInt8], key: SigningKey, kid: String, type: String? = nil) throws(CryptoError) -> String {
        // Written by hand (sorted keys: alg, kid, typ) rather than with JSONEncoder: this runs for
        // every token issued, and the three members are plain strings.
        var headerJSON = #"{"alg":"# + quoted(key.algorithm.rawValue) + #","kid":"# + quoted(kid)
        if let type { headerJSON += #","typ":"# + quoted(type) }
        headerJSON += "}"
        let signingInput = Base64URL.encode(Array(headerJSON.utf8)) + "." + Base64URL.encode(payload)
        let signature = try key.sign(Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// `text` as a JSON string literal: quotes, backslashes and control characters escaped.
    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// Splits and base64url-decodes a compact JWS. Throws ``CryptoError/Code/malformedInput`` for
    /// anything longer than `maxLength` UTF-8 bytes, not exactly three dot-separated parts, any part
    /// that is not strict unpadded base64url, a header that is not a JSON object with a string `alg`
    /// (and string `kid`/`typ` when present), or a header with `crit` (no extensions are understood,
    /// so RFC 7515 §4.1.11 requires rejection).
    public static func parse(_ token: some StringProtocol, maxLength: Int = defaultMaxLength) throws(CryptoError) -> Parsed {
        guard token.utf8.count <= maxLength else { throw CryptoError(.malformedInput, "token is too long") }
        let bytes = Array(token.utf8)
        let dots = bytes.indices.filter { bytes[$0] == UInt8(ascii: ".") }
        guard dots.count == 2 else { throw CryptoError(.malformedInput, "token must have exactly three parts") }
        guard let headerJSON = Base64URL.decode(utf8: bytes[..<dots[0]]),
              let payload = Base64URL.decode(utf8: bytes[(dots[0] + 1)..<dots[1]]),
              let signature = Base64URL.decode(utf8: bytes[(dots[1] + 1)...])
        else { throw CryptoError(.malformedInput, "token part is not base64url") }
        // JSONSerialization rather than JSONDecoder: this runs on every authenticated request.
        guard let object = try? JSONSerialization.jsonObject(with: Data(headerJSON)) as? [String: Any],
              let alg = object["alg"] as? String
        else { throw CryptoError(.malformedInput, "token header is not a JSON object with a string alg") }
        let kid = object["kid"], typ = object["typ"]
        guard kid == nil || kid is String, typ == nil || typ is String else {
            throw CryptoError(.malformedInput, "token header kid and typ must be strings")
        }
        guard object["crit"] == nil else { throw CryptoError(.malformedInput, "token header has unsupported crit") }
        let header = Header(alg: alg, kid: kid as? String, typ: typ as? String)
        return Parsed(header: header, headerJSON: headerJSON, payload: payload,
                      signingInput: Array(bytes[..<dots[1]]), signature: signature)
    }

    /// Whether `parsed` carries a valid signature by `key`. The header's `alg` must equal
    /// `key.algorithm.rawValue` exactly, so `"none"`, `"HS256"`, or RS256 against an EC key are
    /// all `false`. The caller chooses the key (by `kid` and issuer), never the token.
    public static func verify(_ parsed: Parsed, with key: VerificationKey) -> Bool {
        guard parsed.header.alg == key.algorithm.rawValue else { return false }
        return key.verify(signature: parsed.signature, message: parsed.signingInput)
    }
}
