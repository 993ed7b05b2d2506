import Foundation

/// Compact JWS (RFC 7515) with RS256/ES256. Claims are opaque JSON bytes here: the caller builds
/// and reads them.
public enum JWT {
    public struct Header: Codable, Sendable, Equatable {
        public var alg: String
        public var kid: String?
        public var typ: String?
        public init(alg: String, kid: String? = nil, typ: String? = nil) {
            self.alg = alg
            self.kid = kid
            self.typ = typ
        }
    }

    public struct Parsed: Sendable {
        public let header: Header
        public let headerJSON: [UInt8]
        public let payload: [UInt8]
        /// `base64url(header) "." base64url(payload)`, what the signature covers.
        public let signingInput: [UInt8]
        public let signature: [UInt8]
    }

    /// Signs `payload` (JSON bytes): `{"alg":…,"kid":…,"typ":…}.payload.signature`.
    public static func sign(payload: [UInt8], key: SigningKey, kid: String, type: String? = nil) throws(CryptoError) -> String {
        var header = #"{"alg":"\#(key.algorithm.rawValue)","kid":\#(jsonString(kid))"#
        if let type { header += #","typ":\#(jsonString(type))"# }
        header += "}"
        let signingInput = Base64URL.encode(header.utf8) + "." + Base64URL.encode(payload)
        let signature = try key.sign(Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// Splits and decodes a compact JWS. Refuses anything but exactly three base64url parts, a
    /// token over `maxLength` characters, and a header that is not an object with a string `alg`.
    public static func parse(_ token: some StringProtocol, maxLength: Int = 16384) throws(CryptoError) -> Parsed {
        let bytes = Array(token.utf8)
        guard bytes.count <= maxLength else { throw CryptoError(.malformedInput, "token too long") }
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty,
            let headerJSON = Base64URL.decode(utf8: parts[0]), let payload = Base64URL.decode(utf8: parts[1]),
            let signature = Base64URL.decode(utf8: parts[2])
        else { throw CryptoError(.malformedInput, "not a compact JWS") }
        let header: Header
        do { header = try JSONDecoder().decode(Header.self, from: Data(headerJSON)) } catch {
            throw CryptoError(.malformedInput, "JWS header is not a JSON object with alg")
        }
        let signingInput = Array(bytes[0..<(parts[0].count + 1 + parts[1].count)])
        return Parsed(header: header, headerJSON: headerJSON, payload: payload, signingInput: signingInput, signature: signature)
    }

    /// True when the header's `alg` is exactly the key's algorithm and the signature verifies.
    /// `none`, `HS256` and any algorithm other than the key's are refused.
    public static func verify(_ parsed: Parsed, with key: VerificationKey) -> Bool {
        guard parsed.header.alg == key.algorithm.rawValue else { return false }
        return key.verify(signature: parsed.signature, message: parsed.signingInput)
    }

    private static func jsonString(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
