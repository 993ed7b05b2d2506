import COpenSSL

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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

    /// `count` (at most 256) random bytes for an identifier that must be unique but is no secret,
    /// such as a request id. Each `RAND_bytes` call costs about 3 µs of DRBG bookkeeping whatever
    /// its length (8 % of the CPU of a `GET /v1/me` load), so these are cut from 4 KiB drawn at a
    /// time, per thread. Not for keys, tokens or codes: their bytes would sit in memory before use.
    public static func identifierBytes(_ count: Int) -> [UInt8] {
        precondition(count >= 0 && count <= 256, "invalid identifier byte count")
        return IdentifierPool.current.take(count)
    }

    /// A base64url (unpadded) token of `byteCount` random bytes: 32 bytes gives 43 characters
    /// and 256 bits of entropy, suitable for session IDs, refresh tokens and codes.
    public static func token(byteCount: Int = 32) -> String {
        Base64URL.encode(bytes(byteCount))
    }
}

/// This thread's random bytes for ``SecureRandom/identifierBytes(_:)``: refilled from
/// `RAND_bytes` when used up, freed when the thread ends.
private final class IdentifierPool {
    private var bytes = [UInt8](repeating: 0, count: 4096)
    private var next = 4096

    func take(_ count: Int) -> [UInt8] {
        if next + count > bytes.count {
            let status = bytes.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32($0.count)) }
            guard status == 1 else { fatalError("RAND_bytes failed: \(OpenSSLErrorQueue.drain() ?? "unknown")") }
            next = 0
        }
        defer { next += count }
        return Array(bytes[next..<next + count])
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        // The pointer is optional in Glibc's signature, not in Darwin's.
        let status = pthread_key_create(&key) { pool in
            if let pool = pool as UnsafeMutableRawPointer? { Unmanaged<IdentifierPool>.fromOpaque(pool).release() }
        }
        precondition(status == 0, "pthread_key_create failed")
        return key
    }()

    static var current: IdentifierPool {
        if let pool = pthread_getspecific(key) { return Unmanaged<IdentifierPool>.fromOpaque(pool).takeUnretainedValue() }
        let pool = IdentifierPool()
        pthread_setspecific(key, Unmanaged.passRetained(pool).toOpaque())
        return pool
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
