import COpenSSL

/// An owned `EVP_PKEY`. Once created it is never mutated, and OpenSSL 3 allows an `EVP_PKEY` to
/// be used from many threads at once for signing and verifying (each operation makes its own
/// `EVP_MD_CTX`), which is why the classes holding it are `@unchecked Sendable`.
final class OpenSSLKey {
    let pointer: OpaquePointer

    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { EVP_PKEY_free(pointer) }

    var bits: Int { Int(EVP_PKEY_get_bits(pointer)) }
    func isA(_ name: String) -> Bool { EVP_PKEY_is_a(pointer, name) == 1 }

    /// The algorithm this key's type implies: RSA of at least 2048 bits → RS256; EC P-256 → ES256.
    func algorithm() -> SignatureAlgorithm? {
        if isA("RSA") { return bits >= 2048 ? .rs256 : nil }
        if isA("EC") { return groupName() == "prime256v1" || groupName() == "P-256" ? .es256 : nil }
        return nil
    }

    func groupName() -> String? {
        var buffer = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_utf8_string_param(pointer, "group", &buffer, buffer.count, &length) == 1 else {
            OpenSSLErrorQueue.clear()
            return nil
        }
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A big-number parameter as unsigned big-endian bytes, left-padded to `width` when given.
    func bigNumber(_ name: String, width: Int? = nil) -> [UInt8]? {
        var bn: OpaquePointer?
        guard EVP_PKEY_get_bn_param(pointer, name, &bn) == 1, let bn else {
            OpenSSLErrorQueue.clear()
            return nil
        }
        defer { BN_free(bn) }
        let count = width ?? Int((BN_num_bits(bn) + 7) / 8)
        var bytes = [UInt8](repeating: 0, count: count)
        guard BN_bn2binpad(bn, &bytes, Int32(count)) == Int32(count) else { return nil }
        return bytes
    }

    /// Signs with SHA-256. RSA: PKCS#1 v1.5. EC: DER ECDSA (the caller converts for JWS).
    func signSHA256(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw CryptoError.openSSL(.internalFailure, "EVP_MD_CTX_new failed") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, pointer) == 1 else {
            throw CryptoError.openSSL(.internalFailure, "EVP_DigestSignInit failed")
        }
        var length = 0
        guard EVP_DigestSign(context, nil, &length, message, message.count) == 1 else {
            throw CryptoError.openSSL(.internalFailure, "EVP_DigestSign (size) failed")
        }
        var signature = [UInt8](repeating: 0, count: length)
        guard EVP_DigestSign(context, &signature, &length, message, message.count) == 1 else {
            throw CryptoError.openSSL(.internalFailure, "EVP_DigestSign failed")
        }
        return Array(signature.prefix(length))
    }

    func verifySHA256(signature: [UInt8], message: [UInt8]) -> Bool {
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, pointer) == 1 else {
            OpenSSLErrorQueue.clear()
            return false
        }
        let ok = EVP_DigestVerify(context, signature, signature.count, message, message.count) == 1
        if !ok { OpenSSLErrorQueue.clear() }
        return ok
    }

    /// Reads a PEM with `read` from a memory BIO.
    static func fromPEM(_ pem: String, _ read: (OpaquePointer) -> OpaquePointer?) throws(CryptoError) -> OpenSSLKey {
        let bytes = Array(pem.utf8)
        guard bytes.count <= 64 * 1024 else { throw CryptoError(.invalidKey, "PEM too large") }
        let key: OpaquePointer? = bytes.withUnsafeBufferPointer { buffer in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
            defer { BIO_free(bio) }
            return read(bio)
        }
        guard let key else { throw CryptoError.openSSL(.invalidKey, "not a readable PEM key") }
        return OpenSSLKey(key)
    }

    /// Generates a new RSA 2048 or P-256 key.
    static func generate(_ algorithm: SignatureAlgorithm) throws(CryptoError) -> OpenSSLKey {
        let type = algorithm == .rs256 ? "RSA" : "EC"
        guard let context = EVP_PKEY_CTX_new_from_name(nil, type, nil) else {
            throw CryptoError.openSSL(.internalFailure, "EVP_PKEY_CTX_new_from_name failed")
        }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_keygen_init(context) == 1 else { throw CryptoError.openSSL(.internalFailure, "keygen init failed") }
        let configured =
            algorithm == .rs256 ? EVP_PKEY_CTX_set_rsa_keygen_bits(context, 2048) : EVP_PKEY_CTX_set_group_name(context, "P-256")
        guard configured == 1 else { throw CryptoError.openSSL(.internalFailure, "keygen parameters failed") }
        var key: OpaquePointer?
        guard EVP_PKEY_generate(context, &key) == 1, let key else { throw CryptoError.openSSL(.internalFailure, "key generation failed") }
        return OpenSSLKey(key)
    }

    /// A public key built from parameters (JWK members).
    static func publicKey(type: StaticString, _ push: (OpaquePointer) -> Bool) throws(CryptoError) -> OpenSSLKey {
        guard let builder = OSSL_PARAM_BLD_new() else { throw CryptoError.openSSL(.internalFailure, "OSSL_PARAM_BLD_new failed") }
        defer { OSSL_PARAM_BLD_free(builder) }
        guard push(builder), let parameters = OSSL_PARAM_BLD_to_param(builder) else {
            throw CryptoError.openSSL(.invalidKey, "cannot build key parameters")
        }
        defer { OSSL_PARAM_free(parameters) }
        let typeName = String(cString: type.utf8Start)
        guard let context = EVP_PKEY_CTX_new_from_name(nil, typeName, nil) else {
            throw CryptoError.openSSL(.internalFailure, "EVP_PKEY_CTX_new_from_name failed")
        }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_fromdata_init(context) == 1,
            EVP_PKEY_fromdata(context, &key, gatehouse_evp_pkey_public_key_selection(), parameters) == 1, let key
        else { throw CryptoError.openSSL(.invalidKey, "OpenSSL rejected the public key") }
        return OpenSSLKey(key)
    }
}
