import COpenSSL

/// AES-256-GCM authenticated encryption through OpenSSL's EVP interface.
///
/// A sealed box is `nonce (12 bytes) || ciphertext || tag (16 bytes)`. Each ``seal(_:associatedData:)``
/// draws a fresh random nonce, so one key must not seal more than about 2^32 messages (NIST SP 800-38D);
/// rotate keys well before that.
public struct AESGCM: Sendable {
    /// Key length in bytes (AES-256).
    public static let keyByteCount = 32
    /// Nonce length in bytes, prepended to every box.
    public static let nonceByteCount = 12
    /// Authentication tag length in bytes, appended to every box.
    public static let tagByteCount = 16

    private let key: [UInt8]

    /// Creates a cipher for a 32-byte key; any other length throws ``CryptoError/Code/invalidKey``.
    public init(key: [UInt8]) throws(CryptoError) {
        guard key.count == Self.keyByteCount else {
            throw CryptoError(.invalidKey, "AES-256-GCM key must be 32 bytes")
        }
        self.key = key
    }

    /// A fresh random 32-byte key.
    public static func generateKey() -> [UInt8] { SecureRandom.bytes(keyByteCount) }

    /// Encrypts and authenticates `plaintext`, binding `associatedData` (authenticated, not encrypted).
    /// Returns `nonce || ciphertext || tag`.
    public func seal(_ plaintext: some Collection<UInt8>, associatedData: [UInt8] = []) -> [UInt8] {
        let nonce = SecureRandom.bytes(Self.nonceByteCount)
        let input = Array(plaintext)
        do {
            return try Self.run(encrypt: true, key: key, nonce: nonce, input: input, tag: nil,
                                associatedData: associatedData) { ciphertext, tag in nonce + ciphertext + tag }
        } catch {
            // Only reachable if OpenSSL itself fails (allocation): there is no caller-side fix.
            fatalError("AES-256-GCM seal failed: \(error)")
        }
    }

    /// Verifies and decrypts a box made by ``seal(_:associatedData:)`` with the same key and
    /// associated data. Throws ``CryptoError/Code/authenticationFailed`` for a wrong key, wrong
    /// associated data or any tampering, and ``CryptoError/Code/malformedInput`` for a box too short
    /// to hold a nonce and tag. No plaintext is returned unless the tag verifies.
    public func open(_ box: [UInt8], associatedData: [UInt8] = []) throws(CryptoError) -> [UInt8] {
        guard box.count >= Self.nonceByteCount + Self.tagByteCount else {
            throw CryptoError(.malformedInput, "sealed box is too short")
        }
        let nonce = Array(box[..<Self.nonceByteCount])
        let ciphertext = Array(box[Self.nonceByteCount..<(box.count - Self.tagByteCount)])
        let tag = Array(box[(box.count - Self.tagByteCount)...])
        return try Self.run(encrypt: false, key: key, nonce: nonce, input: ciphertext, tag: tag,
                            associatedData: associatedData) { plaintext, _ in plaintext }
    }

    /// One EVP encryption or decryption pass. For decryption `tag` is the expected tag and the
    /// output is handed to `finish` only if it verifies.
    private static func run(
        encrypt: Bool, key: [UInt8], nonce: [UInt8], input: [UInt8], tag expectedTag: [UInt8]?,
        associatedData: [UInt8], finish: ([UInt8], [UInt8]) -> [UInt8]
    ) throws(CryptoError) -> [UInt8] {
        guard let context = EVP_CIPHER_CTX_new() else {
            throw CryptoError.openSSL(.internalFailure, "EVP_CIPHER_CTX_new failed")
        }
        defer { EVP_CIPHER_CTX_free(context) }

        let initialised = key.withUnsafeBufferPointer { key in
            nonce.withUnsafeBufferPointer { nonce in
                encrypt
                    ? EVP_EncryptInit_ex(context, EVP_aes_256_gcm(), nil, key.baseAddress, nonce.baseAddress)
                    : EVP_DecryptInit_ex(context, EVP_aes_256_gcm(), nil, key.baseAddress, nonce.baseAddress)
            }
        }
        guard initialised == 1 else { throw CryptoError.openSSL(.internalFailure, "AES-GCM init failed") }

        // Feeds `bytes` through EVP_{En,De}cryptUpdate in Int32-sized chunks, appending to `output`
        // (or discarding output for associated data, where `output` is nil).
        func update(_ bytes: [UInt8], into output: inout [UInt8]?) -> Bool {
            let chunkSize = 1 << 30
            var offset = 0
            while offset < bytes.count {
                let count = min(chunkSize, bytes.count - offset)
                var written: Int32 = 0
                var chunkOutput = [UInt8](repeating: 0, count: output == nil ? 0 : count)
                let status = bytes.withUnsafeBufferPointer { bytes in
                    chunkOutput.withUnsafeMutableBufferPointer { out in
                        let target = output == nil ? nil : out.baseAddress
                        return encrypt
                            ? EVP_EncryptUpdate(context, target, &written, bytes.baseAddress! + offset, Int32(count))
                            : EVP_DecryptUpdate(context, target, &written, bytes.baseAddress! + offset, Int32(count))
                    }
                }
                guard status == 1 else { return false }
                if output != nil { output!.append(contentsOf: chunkOutput[..<Int(written)]) }
                offset += count
            }
            return true
        }

        var noOutput: [UInt8]? = nil
        guard update(associatedData, into: &noOutput) else {
            throw CryptoError.openSSL(.internalFailure, "AES-GCM associated data failed")
        }
        var output: [UInt8]? = []
        output!.reserveCapacity(input.count)
        guard update(input, into: &output) else {
            throw CryptoError.openSSL(.internalFailure, "AES-GCM update failed")
        }

        if var expectedTag {
            let set = expectedTag.withUnsafeMutableBytes { tag in
                EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, Int32(tagByteCount), tag.baseAddress)
            }
            guard set == 1 else { throw CryptoError.openSSL(.internalFailure, "AES-GCM set tag failed") }
        }

        // GCM produces no output in the final step, but OpenSSL still wants a valid pointer.
        var finalBlock = [UInt8](repeating: 0, count: 16)
        var finalWritten: Int32 = 0
        let finished = finalBlock.withUnsafeMutableBufferPointer { out in
            encrypt
                ? EVP_EncryptFinal_ex(context, out.baseAddress, &finalWritten)
                : EVP_DecryptFinal_ex(context, out.baseAddress, &finalWritten)
        }
        guard finished == 1 else {
            if encrypt { throw CryptoError.openSSL(.internalFailure, "AES-GCM final failed") }
            OpenSSLErrorQueue.clear()
            throw CryptoError(.authenticationFailed, "AES-GCM authentication failed")
        }

        var tag = [UInt8](repeating: 0, count: tagByteCount)
        if encrypt {
            let got = tag.withUnsafeMutableBytes { tag in
                EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, Int32(tagByteCount), tag.baseAddress)
            }
            guard got == 1 else { throw CryptoError.openSSL(.internalFailure, "AES-GCM get tag failed") }
        }
        return finish(output!, tag)
    }
}
