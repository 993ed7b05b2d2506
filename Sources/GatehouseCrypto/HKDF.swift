import COpenSSL

/// HKDF-SHA-256 (RFC 5869) from OpenSSL: one secret, many independent keys, one per purpose.
public enum HKDF {
    /// Derives `length` bytes from `key` for the purpose named by `info`. Different `info` values
    /// give keys that tell nothing about each other or about `key`.
    public static func sha256(key: [UInt8], salt: [UInt8] = [], info: [UInt8], length: Int = 32) -> [UInt8] {
        precondition(!key.isEmpty && length > 0 && length <= 255 * 32, "HKDF: bad key or length")
        guard let context = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nil) else { fatalError("HKDF: no context") }
        defer { EVP_PKEY_CTX_free(context) }
        let infoBytes = info
        var output = [UInt8](repeating: 0, count: length)
        var outputLength = length
        let status: Int32 = key.withUnsafeBufferPointer { key in
            salt.withUnsafeBufferPointer { salt in
                infoBytes.withUnsafeBufferPointer { info in
                    guard EVP_PKEY_derive_init(context) == 1, EVP_PKEY_CTX_set_hkdf_md(context, EVP_sha256()) == 1,
                        EVP_PKEY_CTX_set1_hkdf_key(context, key.baseAddress, Int32(key.count)) == 1,
                        salt.isEmpty || EVP_PKEY_CTX_set1_hkdf_salt(context, salt.baseAddress, Int32(salt.count)) == 1,
                        info.isEmpty || EVP_PKEY_CTX_add1_hkdf_info(context, info.baseAddress, Int32(info.count)) == 1
                    else { return 0 }
                    return output.withUnsafeMutableBufferPointer { EVP_PKEY_derive(context, $0.baseAddress, &outputLength) }
                }
            }
        }
        guard status == 1, outputLength == length else { fatalError("HKDF failed: \(OpenSSLErrorQueue.drain() ?? "unknown")") }
        return output
    }
}
