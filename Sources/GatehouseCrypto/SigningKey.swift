import COpenSSL

/// A private signing key: RSA 2048 for RS256, P-256 for ES256.
/// `@unchecked Sendable`: the wrapped `EVP_PKEY` is immutable once created (see `OpenSSLKey`).
public final class SigningKey: @unchecked Sendable {
    public let algorithm: SignatureAlgorithm
    let key: OpenSSLKey

    private init(key: OpenSSLKey, algorithm: SignatureAlgorithm) {
        self.key = key
        self.algorithm = algorithm
    }

    /// A new random key for `algorithm`.
    public static func generate(_ algorithm: SignatureAlgorithm) throws(CryptoError) -> SigningKey {
        SigningKey(key: try OpenSSLKey.generate(algorithm), algorithm: algorithm)
    }

    /// Reads a private key from PEM: PKCS#8 (`BEGIN PRIVATE KEY`, the format of Apple's `.p8`
    /// keys) or the traditional `BEGIN RSA PRIVATE KEY` / `BEGIN EC PRIVATE KEY`. The key must
    /// suit `algorithm` (RSA ≥ 2048 bits for RS256, P-256 for ES256).
    public init(pem: String, algorithm: SignatureAlgorithm) throws(CryptoError) {
        let key = try OpenSSLKey.fromPEM(pem) { PEM_read_bio_PrivateKey($0, nil, nil, nil) }
        guard key.algorithm() == algorithm else { throw CryptoError(.invalidKey, "the key does not suit \(algorithm.rawValue)") }
        self.key = key
        self.algorithm = algorithm
    }

    /// The key as PKCS#8 PEM (unencrypted; seal it before storing).
    public func pkcs8PEM() -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { fatalError("BIO_new failed: out of memory") }
        defer { BIO_free(bio) }
        guard PEM_write_bio_PrivateKey(bio, key.pointer, nil, nil, 0, nil, nil) == 1 else {
            fatalError("PEM_write_bio_PrivateKey failed for a key OpenSSL made")
        }
        return Self.drain(bio)
    }

    /// The public half as a JWK with `use: sig` and `alg`.
    public func publicJWK(kid: String) -> JWK {
        switch algorithm {
        case .rs256:
            return JWK(
                kty: "RSA", kid: kid, use: "sig", alg: algorithm.rawValue, n: key.bigNumber("n").map(Base64URL.encode),
                e: key.bigNumber("e").map(Base64URL.encode))
        case .es256:
            return JWK(
                kty: "EC", kid: kid, use: "sig", alg: algorithm.rawValue, crv: "P-256", x: key.bigNumber("qx", width: 32).map(Base64URL.encode),
                y: key.bigNumber("qy", width: 32).map(Base64URL.encode))
        }
    }

    /// The matching public key.
    public var verificationKey: VerificationKey {
        // Built from our own JWK, which OpenSSL produced: cannot fail for a key we hold.
        try! VerificationKey(jwk: publicJWK(kid: ""))
    }

    /// Signs `message`: RS256 gives PKCS#1 v1.5 over SHA-256; ES256 gives the raw 64-byte `r || s`.
    public func sign(_ message: some Collection<UInt8>) throws(CryptoError) -> [UInt8] {
        let signature = try key.signSHA256(Array(message))
        guard algorithm == .es256 else { return signature }
        guard let raw = ECDSASignature.raw(fromDER: signature) else { throw CryptoError(.internalFailure, "unexpected ECDSA signature") }
        return raw
    }

    static func drain(_ bio: OpaquePointer) -> String {
        let pending = Int(BIO_ctrl_pending(bio))
        var buffer = [UInt8](repeating: 0, count: pending)
        let read = BIO_read(bio, &buffer, Int32(pending))
        return String(decoding: buffer.prefix(Int(max(read, 0))), as: UTF8.self)
    }
}

/// A public key that checks signatures. `@unchecked Sendable` for the same reason as `SigningKey`.
public final class VerificationKey: @unchecked Sendable {
    public let algorithm: SignatureAlgorithm
    let key: OpenSSLKey

    /// From a JWK: `RSA` (`n`, `e`; modulus of at least 2048 bits) or `EC` on `P-256` (`x`, `y`).
    /// Other key types and curves are refused.
    public init(jwk: JWK) throws(CryptoError) {
        switch jwk.kty {
        case "RSA":
            guard let n = jwk.n.flatMap(Base64URL.decode), let e = jwk.e.flatMap(Base64URL.decode), !n.isEmpty, !e.isEmpty, n.count <= 1024, e.count <= 8
            else { throw CryptoError(.invalidKey, "RSA JWK needs n and e") }
            let nBN = BN_bin2bn(n, Int32(n.count), nil)
            let eBN = BN_bin2bn(e, Int32(e.count), nil)
            defer { BN_free(nBN); BN_free(eBN) }
            key = try OpenSSLKey.publicKey(type: "RSA") { builder in
                OSSL_PARAM_BLD_push_BN(builder, StaticString("n").utf8Start, nBN) == 1
                    && OSSL_PARAM_BLD_push_BN(builder, StaticString("e").utf8Start, eBN) == 1
            }
        case "EC":
            guard jwk.crv == "P-256", let x = jwk.x.flatMap(Base64URL.decode), let y = jwk.y.flatMap(Base64URL.decode), x.count == 32, y.count == 32
            else { throw CryptoError(.invalidKey, "EC JWK must be P-256 with 32-byte x and y") }
            let point: [UInt8] = [0x04] + x + y
            key = try point.withUnsafeBufferPointer { buffer throws(CryptoError) in
                try OpenSSLKey.publicKey(type: "EC") { builder in
                    OSSL_PARAM_BLD_push_utf8_string(builder, StaticString("group").utf8Start, StaticString("prime256v1").utf8Start, 0) == 1
                        && OSSL_PARAM_BLD_push_octet_string(builder, StaticString("pub").utf8Start, buffer.baseAddress, buffer.count) == 1
                }
            }
        default:
            throw CryptoError(.invalidKey, "unsupported JWK key type")
        }
        guard let algorithm = key.algorithm() else { throw CryptoError(.invalidKey, "key too weak or of an unsupported kind") }
        if let alg = jwk.alg, alg != algorithm.rawValue { throw CryptoError(.invalidKey, "JWK alg does not match its key") }
        self.algorithm = algorithm
    }

    /// From a SubjectPublicKeyInfo PEM (`BEGIN PUBLIC KEY`).
    public init(pem: String) throws(CryptoError) {
        key = try OpenSSLKey.fromPEM(pem) { PEM_read_bio_PUBKEY($0, nil, nil, nil) }
        guard let algorithm = key.algorithm() else { throw CryptoError(.invalidKey, "key too weak or of an unsupported kind") }
        self.algorithm = algorithm
    }

    /// True when `signature` is valid for `message`. ES256 takes the raw 64-byte `r || s`.
    public func verify(signature: [UInt8], message: some Collection<UInt8>) -> Bool {
        switch algorithm {
        case .rs256:
            return key.verifySHA256(signature: signature, message: Array(message))
        case .es256:
            guard let der = ECDSASignature.der(fromRaw: signature) else { return false }
            return key.verifySHA256(signature: der, message: Array(message))
        }
    }
}
