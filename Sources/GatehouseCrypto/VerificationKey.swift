import COpenSSL

/// A public key that verifies RS256 or ES256 signatures; the algorithm follows from the key type.
///
/// Thread safety: `@unchecked Sendable` is sound because the wrapped `EVP_PKEY` holds only public
/// material, is never modified after `init` (OpenSSL allows concurrent read-only use of an
/// `EVP_PKEY`), and every ``verify(signature:message:)`` call creates its own `EVP_MD_CTX`.
public final class VerificationKey: @unchecked Sendable {
    /// The algorithm this key verifies, derived from its type (RSA → RS256, P-256 → ES256).
    public let algorithm: SignatureAlgorithm
    private let key: OpaquePointer

    /// Takes ownership of `key`; frees it and throws if it is not an accepted RSA or P-256 key.
    init(owning key: OpaquePointer) throws(CryptoError) {
        do {
            self.algorithm = try EVPKey.algorithm(of: key)
        } catch {
            EVP_PKEY_free(key)
            throw error
        }
        self.key = key
    }

    deinit { EVP_PKEY_free(key) }

    /// Builds a key from a public JWK: `kty` `"RSA"` with `n` and `e` (modulus 2048 to 8192 bits),
    /// or `kty` `"EC"` with `crv` `"P-256"` and 32-byte `x`, `y` on the curve. Any other key type or
    /// curve, or an `alg` member that contradicts the key type, throws ``CryptoError/Code/invalidKey``.
    public convenience init(jwk: JWK) throws(CryptoError) {
        try self.init(owning: try EVPKey.publicKey(jwk: jwk))
    }

    /// Loads a SubjectPublicKeyInfo PEM (`BEGIN PUBLIC KEY`) holding an RSA or P-256 key.
    public convenience init(pem: String) throws(CryptoError) {
        try self.init(owning: try EVPKey.readPublicKey(pem: pem))
    }

    /// The key as SubjectPublicKeyInfo PEM (`BEGIN PUBLIC KEY`).
    public func spkiPEM() -> String { EVPKey.publicKeyPEM(key) }

    /// The key as a JWK with `use` `"sig"`, `alg` set, and the given `kid`.
    public func publicJWK(kid: String) -> JWK { EVPKey.publicJWK(key, algorithm: algorithm, kid: kid) }

    /// Whether `signature` is a valid signature of `message` under this key. For ES256 the signature
    /// must be the raw 64-byte `r || s`; anything else (including DER) returns `false`.
    public func verify(signature: [UInt8], message: some Collection<UInt8>) -> Bool {
        let encoded: [UInt8]
        switch algorithm {
        case .rs256:
            encoded = signature
        case .es256:
            guard let der = ECDSASignature.der(fromRaw: signature) else { return false }
            encoded = der
        }
        guard !encoded.isEmpty else { return false }
        let input = Array(message)
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1 else {
            OpenSSLErrorQueue.clear()
            return false
        }
        let status = input.withUnsafeBufferPointer { input in
            encoded.withUnsafeBufferPointer { signature in
                EVP_DigestVerify(context, signature.baseAddress, signature.count, input.baseAddress, input.count)
            }
        }
        if status != 1 { OpenSSLErrorQueue.clear() }
        return status == 1
    }
}
