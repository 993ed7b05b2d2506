import COpenSSL

/// Cryptographically secure random bytes from OpenSSL's CSPRNG (`RAND_bytes`).
public enum SecureRandom {
    /// `count` random bytes. Stops the process if OpenSSL's RNG fails, because continuing
    /// with predictable "random" values (nonces, salts, tokens) would be worse than stopping.
    public static func bytes(_ count: Int) -> [UInt8] {
        precondition(count >= 0 && count <= Int(Int32.max), "invalid random byte count")
        if count == 0 { return [] }
        var output = [UInt8](repeating: 0, count: count)
        let status = output.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32(count)) }
        guard status == 1 else {
            fatalError("RAND_bytes failed: \(OpenSSLErrorQueue.drain() ?? "unknown")")
        }
        return output
    }

    /// A base64url (unpadded) token of `byteCount` random bytes: 32 bytes gives 43 characters
    /// and 256 bits of entropy, suitable for session IDs, refresh tokens and codes.
    public static func token(byteCount: Int = 32) -> String {
        Base64URL.encode(bytes(byteCount))
    }
}

/// Compares two byte strings in time that depends only on their lengths, never on their contents
/// (`CRYPTO_memcmp`). Different lengths return `false` without reading the contents.
public func constantTimeEquals(_ a: some Collection<UInt8>, _ b: some Collection<UInt8>) -> Bool {
    guard a.count == b.count else { return false }
    if a.isEmpty { return true }
    let left = Array(a)
    let right = Array(b)
    return left.withUnsafeBytes { left in
        right.withUnsafeBytes { right in
            CRYPTO_memcmp(left.baseAddress, right.baseAddress, left.count) == 0
        }
    }
}
