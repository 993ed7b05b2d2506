import COpenSSL

/// Time-based one-time passwords (RFC 6238) as authenticator apps make them: HMAC-SHA-1 over the
/// 30-second step counter (RFC 4226's HOTP), dynamically truncated to 6 digits. The secret travels
/// to the app as RFC 4648 base32 (uppercase, no padding) in an `otpauth://` URL.
public enum TOTP {
    public static let digits = 6
    public static let periodSeconds: Int64 = 30
    /// Steps either side of the current one a code may come from (clock drift, a slow typist).
    public static let window: Int64 = 1
    /// A new secret's length: 160 bits, RFC 4226's recommendation for HMAC-SHA-1.
    public static let secretByteCount = 20

    /// The step counter of a Unix time (seconds).
    public static func step(at unixSeconds: Int64) -> Int64 { unixSeconds / periodSeconds }

    /// The code of `step` under `secret`: HOTP (RFC 4226 section 5.3) with `digits` digits,
    /// zero-padded. `hash` is the HMAC's digest (`SHA1` for every authenticator app; `SHA256` and
    /// `SHA512` only for RFC 6238's own vectors).
    public static func code(secret: [UInt8], step: Int64, digits: Int = TOTP.digits, hash: String = "SHA1") -> String {
        var counter = [UInt8](repeating: 0, count: 8)
        for i in 0..<8 { counter[7 - i] = UInt8(truncatingIfNeeded: UInt64(bitPattern: step) >> (UInt64(i) * 8)) }
        let mac = hmac(hash, key: secret, data: counter)
        let offset = Int(mac[mac.count - 1] & 0x0F)
        let binary = (UInt32(mac[offset] & 0x7F) << 24) | (UInt32(mac[offset + 1]) << 16) | (UInt32(mac[offset + 2]) << 8) | UInt32(mac[offset + 3])
        var modulus: UInt32 = 1
        for _ in 0..<digits { modulus *= 10 }
        let value = String(binary % modulus)
        return String(repeating: "0", count: digits - value.count) + value
    }

    /// The step within ``window`` of `unixSeconds` whose code is `code`, compared in constant
    /// time; nil when none is. The caller refuses a step already used (a code is good once).
    public static func matchingStep(_ code: String, secret: [UInt8], at unixSeconds: Int64) -> Int64? {
        let presented = Array(code.utf8)
        guard presented.count == digits, presented.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        let now = step(at: unixSeconds)
        var found: Int64?
        // Every candidate is computed and compared, whichever matches.
        for candidate in (now - window)...(now + window) where constantTimeEquals(Array(self.code(secret: secret, step: candidate).utf8), presented) {
            found = found ?? candidate
        }
        return found
    }

    /// HMAC with the named digest, one-off (OpenSSL's `EVP_Q_mac`).
    static func hmac(_ digest: String, key: [UInt8], data: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: 64)
        var length = 0
        let keyBytes = key.isEmpty ? [0] : key
        let result = keyBytes.withUnsafeBufferPointer { keyBuffer in
            data.withUnsafeBufferPointer { input in
                output.withUnsafeMutableBufferPointer { out in
                    EVP_Q_mac(nil, "HMAC", nil, digest, nil, keyBuffer.baseAddress, key.count, input.baseAddress, input.count, out.baseAddress, out.count, &length)
                }
            }
        }
        guard result != nil, length > 0 else { fatalError("HMAC-\(digest) failed: \(OpenSSLErrorQueue.drain() ?? "unknown")") }
        return Array(output.prefix(length))
    }
}
