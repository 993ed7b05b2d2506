import GatehouseCrypto

/// The COSE algorithms Gatehouse accepts for passkeys (RFC 9053, RFC 8812).
public enum COSEAlgorithm: Int, Sendable, CaseIterable {
    /// ECDSA with SHA-256 on P-256.
    case es256 = -7
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    case rs256 = -257
}

/// A credential public key in COSE_Key form (RFC 9052 §7), decoded by libcbor and turned into an
/// OpenSSL key through a JWK (``VerificationKey/init(jwk:)`` checks the curve point, or the RSA
/// modulus size, as it does for every JWK).
public struct COSEKey: Sendable {
    public let algorithm: COSEAlgorithm
    public let key: VerificationKey

    public init(_ bytes: [UInt8]) throws(WebAuthnError) {
        let map: CBORValue
        do { map = try CBOR.decode(bytes) } catch { throw WebAuthnError("The credential public key is not valid CBOR.", malformed: true) }
        guard case .map = map else { throw WebAuthnError("The credential public key is not a COSE key.") }
        guard let alg = map[int: 3]?.integer, let algorithm = COSEAlgorithm(rawValue: alg) else {
            throw WebAuthnError("The credential's algorithm is not supported: use ES256 (-7) or RS256 (-257).")
        }
        let kty = map[int: 1]?.integer
        let jwk: JWK
        switch algorithm {
        case .es256:
            guard kty == 2, map[int: -1]?.integer == 1 else { throw WebAuthnError("An ES256 credential key must be an EC2 key on P-256.") }
            guard let x = map[int: -2]?.bytesValue, let y = map[int: -3]?.bytesValue, x.count == 32, y.count == 32 else {
                throw WebAuthnError("An ES256 credential key needs 32-byte x and y.")
            }
            jwk = JWK(kty: "EC", crv: "P-256", x: Base64URL.encode(x), y: Base64URL.encode(y))
        case .rs256:
            guard kty == 3 else { throw WebAuthnError("An RS256 credential key must be an RSA key.") }
            guard let n = map[int: -1]?.bytesValue, let e = map[int: -2]?.bytesValue else { throw WebAuthnError("An RS256 credential key needs n and e.") }
            jwk = JWK(kty: "RSA", n: Base64URL.encode(n), e: Base64URL.encode(e))
        }
        do {
            key = try VerificationKey(jwk: jwk)
        } catch {
            throw WebAuthnError("The credential public key is not valid: \(error.reason)")
        }
        self.algorithm = algorithm
    }

    /// Whether `signature` (as WebAuthn carries it: DER for ECDSA) signs `message`.
    public func verify(signature: [UInt8], message: [UInt8]) -> Bool {
        switch algorithm {
        case .rs256:
            return key.verify(signature: signature, message: message)
        case .es256:
            guard let raw = ECDSASignature.raw(fromDER: signature) else { return false }
            return key.verify(signature: raw, message: message)
        }
    }
}
