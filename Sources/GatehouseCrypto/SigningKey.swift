import COpenSSL
import Synchronization

/// A private signing key: RSA (2048 to 8192 bits) for RS256 or P-256 for ES256.
///
/// Thread safety: `@unchecked Sendable` is sound because the wrapped `EVP_PKEY` is never modified
/// after `init` (OpenSSL documents `EVP_PKEY` as safe for concurrent read-only use, and RSA
/// blinding state is locked internally), and every ``sign(_:)`` call signs with its own
/// `EVP_MD_CTX`, copied from `template` under `templateLock`. The only other stored properties
/// are immutable `let`s.
public final class SigningKey: @unchecked Sendable {
    /// The algorithm this key signs with, fixed by its type.
    public let algorithm: SignatureAlgorithm
    /// The public half, for verifying this key's own signatures.
    public let verificationKey: VerificationKey
    private let key: OpaquePointer
    /// `EVP_DigestSignInit` done once: OpenSSL 3 fetches the digest and signature implementations
    /// and sets up the key's context at every init, so each signature copies this instead (about
    /// 6 % of an RSA-2048 signature here, measured with a C loop over both).
    private let template: OpaquePointer
    private let templateLock = Mutex<Void>(())

    /// Takes ownership of `key`, which must already have passed `EVPKey.algorithm(of:)`.
    private init(owning key: OpaquePointer, algorithm: SignatureAlgorithm) throws(CryptoError) {
        self.key = key
        self.algorithm = algorithm
        guard let template = EVP_MD_CTX_new() else {
            EVP_PKEY_free(key)
            throw CryptoError.openSSL(.internalFailure, "EVP_MD_CTX_new failed")
        }
        guard EVP_DigestSignInit(template, nil, EVP_sha256(), nil, key) == 1 else {
            EVP_MD_CTX_free(template)
            EVP_PKEY_free(key)
            throw CryptoError.openSSL(.internalFailure, "EVP_DigestSignInit failed")
        }
        self.template = template
        do {
            self.verificationKey = try VerificationKey(owning: try EVPKey.publicOnlyCopy(key))
        } catch {
            EVP_MD_CTX_free(template)
            EVP_PKEY_free(key)
            throw error
        }
    }

    deinit {
        EVP_MD_CTX_free(template)
        EVP_PKEY_free(key)
    }

    /// Generates a new key: RSA 2048 for ``SignatureAlgorithm/rs256``, P-256 for ``SignatureAlgorithm/es256``.
    public static func generate(_ algorithm: SignatureAlgorithm) throws(CryptoError) -> SigningKey {
        try SigningKey(owning: try EVPKey.generate(algorithm), algorithm: algorithm)
    }

    /// Loads a private key from PEM: PKCS#8 (`BEGIN PRIVATE KEY`, which is also Apple's `.p8`
    /// format) or the traditional `BEGIN RSA PRIVATE KEY` / `BEGIN EC PRIVATE KEY`. Throws
    /// ``CryptoError/Code/invalidKey`` if it cannot be read, is encrypted, or does not suit `algorithm`.
    public convenience init(pem: String, algorithm: SignatureAlgorithm) throws(CryptoError) {
        let key = try EVPKey.readPrivateKey(pem: pem)
        let actual: SignatureAlgorithm
        do {
            actual = try EVPKey.algorithm(of: key)
        } catch {
            EVP_PKEY_free(key)
            throw error
        }
        guard actual == algorithm else {
            EVP_PKEY_free(key)
            throw CryptoError(.invalidKey, "key type does not match \(algorithm.rawValue)")
        }
        try self.init(owning: key, algorithm: algorithm)
    }

    /// The private key as unencrypted PKCS#8 PEM (`BEGIN PRIVATE KEY`). This is secret: store it
    /// encrypted (for example with ``AESGCM``) and never log it.
    public func pkcs8PEM() -> String { EVPKey.privateKeyPEM(key) }

    /// The public key as a JWK with `use` `"sig"`, `alg` set, and the given `kid`.
    public func publicJWK(kid: String) -> JWK { verificationKey.publicJWK(kid: kid) }

    /// Signs `message` with SHA-256: RSASSA-PKCS1-v1_5 for RS256, or ECDSA returned as the raw
    /// 64-byte `r || s` (JWS form) for ES256.
    public func sign(_ message: some Collection<UInt8>) throws(CryptoError) -> [UInt8] {
        let input = Array(message)
        guard let context = EVP_MD_CTX_new() else {
            throw CryptoError.openSSL(.internalFailure, "EVP_MD_CTX_new failed")
        }
        defer { EVP_MD_CTX_free(context) }
        guard templateLock.withLock({ _ in EVP_MD_CTX_copy_ex(context, template) }) == 1 else {
            throw CryptoError.openSSL(.internalFailure, "EVP_MD_CTX_copy_ex failed")
        }
        var length = Int(EVP_PKEY_get_size(key))
        var signature = [UInt8](repeating: 0, count: length)
        let status = input.withUnsafeBufferPointer { input in
            signature.withUnsafeMutableBufferPointer { output in
                EVP_DigestSign(context, output.baseAddress, &length, input.baseAddress, input.count)
            }
        }
        guard status == 1 else { throw CryptoError.openSSL(.internalFailure, "EVP_DigestSign failed") }
        signature.removeSubrange(length...)
        switch algorithm {
        case .rs256:
            return signature
        case .es256:
            guard let raw = ECDSASignature.raw(fromDER: signature) else {
                throw CryptoError(.internalFailure, "cannot convert ECDSA signature")
            }
            return raw
        }
    }
}
