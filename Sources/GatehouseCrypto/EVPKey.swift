import COpenSSL

/// Internal helpers around OpenSSL's `EVP_PKEY`: PEM and DER I/O, generation, inspection and JWK
/// conversion. Every function that returns an `EVP_PKEY` transfers ownership: the caller frees it
/// with `EVP_PKEY_free`.
enum EVPKey {
    /// Smallest RSA modulus accepted anywhere (NIST SP 800-57: 112-bit security).
    static let minimumRSABits: Int32 = 2048
    /// Largest RSA modulus accepted, bounding the cost of a verification chosen by a remote JWKS.
    static let maximumRSABits: Int32 = 8192

    // MARK: PEM / DER

    /// Parses a private key from PEM: PKCS#8 (`BEGIN PRIVATE KEY`) or the traditional
    /// `BEGIN RSA PRIVATE KEY` / `BEGIN EC PRIVATE KEY` forms. Encrypted keys are rejected
    /// (the password callback supplies none, so OpenSSL never prompts on a terminal).
    static func readPrivateKey(pem: String) throws(CryptoError) -> OpaquePointer {
        let key = withReadBIO(pem) { bio in
            PEM_read_bio_PrivateKey(bio, nil, { _, _, _, _ in 0 }, nil)
        }
        guard let key else { throw CryptoError.openSSL(.invalidKey, "cannot read private key PEM") }
        return key
    }

    /// Parses a SubjectPublicKeyInfo PEM (`BEGIN PUBLIC KEY`).
    static func readPublicKey(pem: String) throws(CryptoError) -> OpaquePointer {
        let key = withReadBIO(pem) { bio in
            PEM_read_bio_PUBKEY(bio, nil, { _, _, _, _ in 0 }, nil)
        }
        guard let key else { throw CryptoError.openSSL(.invalidKey, "cannot read public key PEM") }
        return key
    }

    /// Unencrypted PKCS#8 PEM (`BEGIN PRIVATE KEY`) of a private key.
    static func privateKeyPEM(_ key: OpaquePointer) -> String {
        writePEM { bio in PEM_write_bio_PrivateKey(bio, key, nil, nil, 0, nil, nil) }
    }

    /// SubjectPublicKeyInfo PEM (`BEGIN PUBLIC KEY`) of a key's public half.
    static func publicKeyPEM(_ key: OpaquePointer) -> String {
        writePEM { bio in PEM_write_bio_PUBKEY(bio, key) }
    }

    /// A new `EVP_PKEY` holding only the public half of `key` (round trip through SPKI DER), so a
    /// verification key never carries private material.
    static func publicOnlyCopy(_ key: OpaquePointer) throws(CryptoError) -> OpaquePointer {
        let length = i2d_PUBKEY(key, nil)
        guard length > 0 else { throw CryptoError.openSSL(.internalFailure, "cannot encode public key") }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { out -> Int32 in
            var cursor = out.baseAddress
            return i2d_PUBKEY(key, &cursor)
        }
        guard written == length else { throw CryptoError.openSSL(.internalFailure, "cannot encode public key") }
        let copy = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor = buffer.baseAddress
            return d2i_PUBKEY(nil, &cursor, buffer.count)
        }
        guard let copy else { throw CryptoError.openSSL(.internalFailure, "cannot decode public key") }
        return copy
    }

    private static func withReadBIO(_ text: String, _ body: (OpaquePointer) -> OpaquePointer?) -> OpaquePointer? {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.count <= Int(Int32.max) else { return nil }
        return bytes.withUnsafeBytes { buffer -> OpaquePointer? in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
            defer { BIO_free(bio) }
            return body(bio)
        }
    }

    private static func writePEM(_ body: (OpaquePointer) -> Int32) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { fatalError("BIO_new failed") }
        defer { BIO_free(bio) }
        guard body(bio) == 1 else {
            // Writing an in-memory PEM of a valid key only fails on allocation failure.
            fatalError("PEM write failed: \(OpenSSLErrorQueue.drain() ?? "unknown")")
        }
        let pending = Int(BIO_ctrl_pending(bio))
        var output = [UInt8](repeating: 0, count: pending)
        let read = output.withUnsafeMutableBytes { BIO_read(bio, $0.baseAddress, Int32(pending)) }
        precondition(Int(read) == pending, "short read from memory BIO")
        return String(decoding: output, as: UTF8.self)
    }

    // MARK: Generation and inspection

    /// A fresh RSA-2048 (RS256) or P-256 (ES256) key pair.
    static func generate(_ algorithm: SignatureAlgorithm) throws(CryptoError) -> OpaquePointer {
        let type = algorithm == .rs256 ? "RSA" : "EC"
        guard let context = EVP_PKEY_CTX_new_from_name(nil, type, nil) else {
            throw CryptoError.openSSL(.internalFailure, "EVP_PKEY_CTX_new_from_name failed")
        }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_keygen_init(context) == 1 else {
            throw CryptoError.openSSL(.internalFailure, "EVP_PKEY_keygen_init failed")
        }
        let configured: Int32
        switch algorithm {
        case .rs256: configured = EVP_PKEY_CTX_set_rsa_keygen_bits(context, minimumRSABits)
        case .es256: configured = EVP_PKEY_CTX_set_group_name(context, "P-256")
        }
        guard configured == 1 else { throw CryptoError.openSSL(.internalFailure, "key generation setup failed") }
        var key: OpaquePointer?
        guard EVP_PKEY_generate(context, &key) == 1, let key else {
            throw CryptoError.openSSL(.internalFailure, "key generation failed")
        }
        return key
    }

    /// The algorithm a key can be used with, after checking it is RSA of an accepted size or
    /// EC on P-256; anything else throws ``CryptoError/Code/invalidKey``.
    static func algorithm(of key: OpaquePointer) throws(CryptoError) -> SignatureAlgorithm {
        if EVP_PKEY_is_a(key, "RSA") == 1 {
            let bits = EVP_PKEY_get_bits(key)
            guard bits >= minimumRSABits else { throw CryptoError(.invalidKey, "RSA key is smaller than 2048 bits") }
            guard bits <= maximumRSABits else { throw CryptoError(.invalidKey, "RSA key is larger than 8192 bits") }
            return .rs256
        }
        if EVP_PKEY_is_a(key, "EC") == 1 {
            var name = [CChar](repeating: 0, count: 64)
            var length = 0
            guard EVP_PKEY_get_group_name(key, &name, name.count, &length) == 1 else {
                throw CryptoError.openSSL(.invalidKey, "EC key has no named curve")
            }
            let curve = String(decoding: name[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            guard curve == "prime256v1" || curve == "P-256" else {
                throw CryptoError(.invalidKey, "EC key is not on P-256")
            }
            return .es256
        }
        throw CryptoError(.invalidKey, "key is neither RSA nor EC")
    }

    // MARK: JWK

    /// The public JWK of a key already checked by ``algorithm(of:)``.
    static func publicJWK(_ key: OpaquePointer, algorithm: SignatureAlgorithm, kid: String) -> JWK {
        switch algorithm {
        case .rs256:
            let n = bigNumberParameter(key, "n", width: nil)
            let e = bigNumberParameter(key, "e", width: nil)
            return JWK(kty: "RSA", kid: kid, use: "sig", alg: algorithm.rawValue,
                       n: Base64URL.encode(n), e: Base64URL.encode(e))
        case .es256:
            let x = bigNumberParameter(key, "qx", width: 32)
            let y = bigNumberParameter(key, "qy", width: 32)
            return JWK(kty: "EC", kid: kid, use: "sig", alg: algorithm.rawValue, crv: "P-256",
                       x: Base64URL.encode(x), y: Base64URL.encode(y))
        }
    }

    /// A public key parameter as big-endian bytes: minimal length when `width` is nil
    /// (JWK `n`, `e`), else left-padded to `width` (JWK `x`, `y`).
    private static func bigNumberParameter(_ key: OpaquePointer, _ name: String, width: Int?) -> [UInt8] {
        var number: OpaquePointer?
        guard EVP_PKEY_get_bn_param(key, name, &number) == 1, let number else {
            fatalError("cannot read key parameter \(name): \(OpenSSLErrorQueue.drain() ?? "unknown")")
        }
        defer { BN_free(number) }
        let length = width ?? Int((BN_num_bits(number) + 7) / 8)
        var output = [UInt8](repeating: 0, count: length)
        let written = output.withUnsafeMutableBufferPointer { BN_bn2binpad(number, $0.baseAddress, Int32(length)) }
        precondition(Int(written) == length, "key parameter \(name) does not fit")
        return output
    }

    /// Builds a public `EVP_PKEY` from a JWK: RSA (`n`, `e`, 2048–8192 bits) or EC P-256 (`x`, `y`,
    /// a point on the curve). The JWK's `alg`, if present, must match the key type.
    static func publicKey(jwk: JWK) throws(CryptoError) -> OpaquePointer {
        switch jwk.kty {
        case "RSA":
            return try rsaPublicKey(jwk: jwk)
        case "EC":
            return try p256PublicKey(jwk: jwk)
        default:
            throw CryptoError(.invalidKey, "unsupported JWK kty")
        }
    }

    private static func rsaPublicKey(jwk: JWK) throws(CryptoError) -> OpaquePointer {
        if let alg = jwk.alg, alg != SignatureAlgorithm.rs256.rawValue {
            throw CryptoError(.invalidKey, "JWK alg does not match an RSA key")
        }
        guard let n = jwk.n.flatMap(Base64URL.decode), let e = jwk.e.flatMap(Base64URL.decode) else {
            throw CryptoError(.invalidKey, "RSA JWK needs base64url n and e")
        }
        let modulus: [UInt8] = Array(n.drop { $0 == 0 })
        let exponent: [UInt8] = Array(e.drop { $0 == 0 })
        let bits: Int = modulus.isEmpty ? 0 : modulus.count * 8 - modulus[0].leadingZeroBitCount
        guard bits >= Int(minimumRSABits) else { throw CryptoError(.invalidKey, "RSA key is smaller than 2048 bits") }
        guard bits <= Int(maximumRSABits) else { throw CryptoError(.invalidKey, "RSA key is larger than 8192 bits") }
        let exponentIsOdd = (exponent.last ?? 0) & 1 == 1
        guard exponentIsOdd, exponent.count <= 8, exponent != [1] else {
            throw CryptoError(.invalidKey, "RSA public exponent is invalid")
        }
        guard let nNumber = bigNumber(modulus) else { throw CryptoError.openSSL(.internalFailure, "BN_bin2bn failed") }
        defer { BN_free(nNumber) }
        guard let eNumber = bigNumber(exponent) else { throw CryptoError.openSSL(.internalFailure, "BN_bin2bn failed") }
        defer { BN_free(eNumber) }
        // The builder keeps these BIGNUM pointers until OSSL_PARAM_BLD_to_param inside fromParameters.
        return try fromParameters(type: "RSA") { builder in
            guard OSSL_PARAM_BLD_push_BN(builder, cName("n"), nNumber) == 1 else { return false }
            return OSSL_PARAM_BLD_push_BN(builder, cName("e"), eNumber) == 1
        }
    }

    private static func p256PublicKey(jwk: JWK) throws(CryptoError) -> OpaquePointer {
        if let alg = jwk.alg, alg != SignatureAlgorithm.es256.rawValue {
            throw CryptoError(.invalidKey, "JWK alg does not match a P-256 key")
        }
        guard jwk.crv == "P-256" else { throw CryptoError(.invalidKey, "EC JWK must use crv P-256") }
        guard let x = jwk.x.flatMap(Base64URL.decode), let y = jwk.y.flatMap(Base64URL.decode),
              x.count == 32, y.count == 32
        else { throw CryptoError(.invalidKey, "P-256 JWK needs 32-byte base64url x and y") }
        var point: [UInt8] = [0x04]  // SEC 1 uncompressed point: 04 || x || y
        point.append(contentsOf: x)
        point.append(contentsOf: y)
        // The builder keeps the octet-string pointer until OSSL_PARAM_BLD_to_param, so the whole
        // build happens while `point` is pinned.
        let built: Result<OpaquePointer, CryptoError> = point.withUnsafeBytes { point in
            Result { () throws(CryptoError) -> OpaquePointer in
                try fromParameters(type: "EC") { builder in
                    guard OSSL_PARAM_BLD_push_utf8_string(builder, cName("group"), cName("prime256v1"), 0) == 1
                    else { return false }
                    return OSSL_PARAM_BLD_push_octet_string(builder, cName("pub"), point.baseAddress, point.count) == 1
                }
            }
        }
        let key = try built.get()
        do {
            try checkPublicKey(key)
        } catch {
            EVP_PKEY_free(key)
            throw error
        }
        return key
    }

    /// Rejects a public key OpenSSL considers invalid (for EC: a point not on the curve).
    private static func checkPublicKey(_ key: OpaquePointer) throws(CryptoError) {
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else {
            throw CryptoError.openSSL(.internalFailure, "EVP_PKEY_CTX_new_from_pkey failed")
        }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_public_check(context) == 1 else {
            throw CryptoError.openSSL(.invalidKey, "public key failed validation")
        }
    }

    /// Builds a public key of `type` from the parameters `push` adds to an OSSL_PARAM_BLD.
    /// Anything `push` hands to the builder by pointer must stay alive until this returns.
    private static func fromParameters(
        type: String, _ push: (OpaquePointer) -> Bool
    ) throws(CryptoError) -> OpaquePointer {
        guard let builder = OSSL_PARAM_BLD_new() else {
            throw CryptoError.openSSL(.internalFailure, "OSSL_PARAM_BLD_new failed")
        }
        defer { OSSL_PARAM_BLD_free(builder) }
        guard push(builder), let parameters = OSSL_PARAM_BLD_to_param(builder) else {
            throw CryptoError.openSSL(.internalFailure, "cannot build key parameters")
        }
        defer { OSSL_PARAM_free(parameters) }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, type, nil) else {
            throw CryptoError.openSSL(.internalFailure, "EVP_PKEY_CTX_new_from_name failed")
        }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_fromdata_init(context) == 1 else {
            throw CryptoError.openSSL(.internalFailure, "EVP_PKEY_fromdata_init failed")
        }
        var key: OpaquePointer?
        let selection = gatehouse_evp_pkey_public_key_selection()
        guard EVP_PKEY_fromdata(context, &key, selection, parameters) == 1, let key else {
            throw CryptoError.openSSL(.invalidKey, "OpenSSL rejected the \(type) public key")
        }
        return key
    }

    private static func bigNumber(_ bytes: [UInt8]) -> OpaquePointer? {
        bytes.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, Int32($0.count), nil) }
    }

    /// A NUL-terminated C string for a literal. OSSL_PARAM_BLD keeps the *pointer* to parameter
    /// names and string values until `OSSL_PARAM_BLD_to_param`, so they must not be temporaries.
    private static func cName(_ literal: StaticString) -> UnsafePointer<CChar> {
        UnsafeRawPointer(literal.utf8Start).assumingMemoryBound(to: CChar.self)
    }
}
