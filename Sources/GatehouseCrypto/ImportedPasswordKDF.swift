import CArgon2
import CCrypt
import COpenSSL

/// The functions that verify password hashes made by other systems (ADR 0030), each from a C
/// library: bcrypt from libxcrypt (`crypt_rn`), scrypt and PBKDF2 from OpenSSL, argon2i and
/// argon2id from libargon2, and Firebase's scrypt from OpenSSL's scrypt and AES-256-CTR. Callers
/// bound the costs before calling (``ImportedPasswordHash`` in GatehouseCore does, at decode).
public enum ImportedPasswordKDF {
    /// Whether `password` matches a bcrypt string (`$2a$`, `$2b$`, `$2y$`): libxcrypt hashes the
    /// password with the string as its setting, and the result is compared with the string in
    /// constant time. False for any other string, and for a password with a NUL byte (which C
    /// would cut short).
    public static func bcrypt(password: some Collection<UInt8>, encoded: String) -> Bool {
        guard encoded.hasPrefix("$2a$") || encoded.hasPrefix("$2b$") || encoded.hasPrefix("$2y$"), encoded.utf8.count == 60 else { return false }
        var phrase = Array(password)
        guard !phrase.contains(0) else { return false }
        phrase.append(0)
        defer { phrase.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) } }
        let size = MemoryLayout<crypt_data>.size
        let data = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: MemoryLayout<crypt_data>.alignment)
        data.initializeMemory(as: UInt8.self, repeating: 0, count: size)
        defer {
            data.initializeMemory(as: UInt8.self, repeating: 0, count: size)
            data.deallocate()
        }
        let output: [UInt8]? = phrase.withUnsafeBufferPointer { phrase in
            phrase.withMemoryRebound(to: CChar.self) { phrase in
                guard let result = crypt_rn(phrase.baseAddress, encoded, data, Int32(size)) else { return nil }
                return Array(String(cString: result).utf8)
            }
        }
        guard let output else { return false }
        return constantTimeEquals(output, Array(encoded.utf8))
    }

    /// scrypt (RFC 7914) from OpenSSL's `EVP_PBE_scrypt`; nil when OpenSSL refuses the
    /// parameters (`n` not a power of two above 1, or more than `maxMemory` bytes of work).
    public static func scrypt(
        password: some Collection<UInt8>, salt: [UInt8], n: UInt64, r: UInt64, p: UInt64, length: Int, maxMemory: UInt64 = 1 << 31
    ) -> [UInt8]? {
        var secret = Array(password)
        defer { secret.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) } }
        var output = [UInt8](repeating: 0, count: length)
        let status = secret.withUnsafeBufferPointer { secret in
            salt.withUnsafeBufferPointer { salt in
                output.withUnsafeMutableBufferPointer { output in
                    secret.withMemoryRebound(to: CChar.self) { secret in
                        EVP_PBE_scrypt(secret.baseAddress, secret.count, salt.baseAddress, salt.count, n, r, p, maxMemory, output.baseAddress, output.count)
                    }
                }
            }
        }
        guard status == 1 else {
            _ = OpenSSLErrorQueue.drain()
            return nil
        }
        return output
    }

    /// The hash functions PBKDF2's HMAC runs with.
    public enum HashFunction: Sendable { case sha256, sha512 }

    /// PBKDF2-HMAC (RFC 8018) from OpenSSL's `PKCS5_PBKDF2_HMAC`.
    public static func pbkdf2(password: some Collection<UInt8>, salt: [UInt8], iterations: Int, digest: HashFunction, length: Int) -> [UInt8]? {
        guard iterations >= 1, iterations <= Int(Int32.max), length >= 1 else { return nil }
        var secret = Array(password)
        defer { secret.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) } }
        var output = [UInt8](repeating: 0, count: length)
        let md = digest == .sha256 ? EVP_sha256() : EVP_sha512()
        let status = secret.withUnsafeBufferPointer { secret in
            salt.withUnsafeBufferPointer { salt in
                output.withUnsafeMutableBufferPointer { output in
                    secret.withMemoryRebound(to: CChar.self) { secret in
                        PKCS5_PBKDF2_HMAC(
                            secret.baseAddress, Int32(secret.count), salt.baseAddress, Int32(salt.count), Int32(iterations), md,
                            Int32(output.count), output.baseAddress)
                    }
                }
            }
        }
        guard status == 1 else {
            _ = OpenSSLErrorQueue.drain()
            return nil
        }
        return output
    }

    /// Whether `password` matches a PHC string of argon2i (`argon2i: true`) or argon2id, through
    /// libargon2's `argon2_verify` (which compares in constant time).
    public static func argon2(password: some Collection<UInt8>, encoded: String, argon2i: Bool) -> Bool {
        var secret = Array(password)
        defer { secret.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) } }
        let status = secret.withUnsafeBufferPointer { secret in
            argon2_verify(encoded, secret.baseAddress, secret.count, argon2i ? Argon2_i : Argon2_id)
        }
        return status == ARGON2_OK.rawValue
    }

    /// Firebase's modified scrypt (github.com/firebase/scrypt): the key is scrypt of the password
    /// with the account's salt followed by the project's salt separator, N = 2^`memoryCost`,
    /// r = `rounds`, p = 1, 32 bytes; the hash is the project's signer key encrypted with that
    /// key by AES-256-CTR from a zero counter block. Returns that hash, to compare in constant time.
    public static func firebaseScrypt(
        password: some Collection<UInt8>, salt: [UInt8], saltSeparator: [UInt8], signerKey: [UInt8], rounds: Int, memoryCost: Int
    ) -> [UInt8]? {
        guard (1...31).contains(memoryCost), rounds >= 1, !signerKey.isEmpty,
            var key = scrypt(password: password, salt: salt + saltSeparator, n: 1 << UInt64(memoryCost), r: UInt64(rounds), p: 1, length: 32)
        else { return nil }
        defer { key.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) } }
        guard let context = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(context) }
        let iv = [UInt8](repeating: 0, count: 16)
        var output = [UInt8](repeating: 0, count: signerKey.count + 16)
        var written: Int32 = 0
        var final: Int32 = 0
        let ok = key.withUnsafeBufferPointer { key in
            output.withUnsafeMutableBufferPointer { output in
                EVP_EncryptInit_ex(context, EVP_aes_256_ctr(), nil, key.baseAddress, iv) == 1
                    && EVP_EncryptUpdate(context, output.baseAddress, &written, signerKey, Int32(signerKey.count)) == 1
                    && EVP_EncryptFinal_ex(context, output.baseAddress! + Int(written), &final) == 1
            }
        }
        guard ok else {
            _ = OpenSSLErrorQueue.drain()
            return nil
        }
        return Array(output.prefix(Int(written + final)))
    }
}
