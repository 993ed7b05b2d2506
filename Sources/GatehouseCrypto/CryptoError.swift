import COpenSSL

/// An error from the crypto layer: a stable ``Code`` plus a short human-readable reason.
///
/// The reason never contains key material, plaintext or passwords; at most it names the operation
/// and the OpenSSL reason string (for example "unsupported"), which describe *what* failed.
public struct CryptoError: Error, Sendable, CustomStringConvertible, Equatable {
    /// A stable, machine-readable error code. New codes can be added without breaking a `switch`.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The stable string form, e.g. `"crypto/invalid-key"`.
        public let rawValue: String
        /// Creates a code from its stable string form.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The string form.
        public var description: String { rawValue }

        /// A key could not be parsed, has the wrong type or size, or does not match the algorithm.
        public static let invalidKey = Code(rawValue: "crypto/invalid-key")
        /// Input (a token, a box, an encoded hash) is malformed.
        public static let malformedInput = Code(rawValue: "crypto/malformed-input")
        /// An authenticated decryption failed: wrong key, wrong associated data, or tampering.
        public static let authenticationFailed = Code(rawValue: "crypto/authentication-failed")
        /// Parameters (Argon2 cost, key size) are outside what this module accepts.
        public static let invalidParameters = Code(rawValue: "crypto/invalid-parameters")
        /// The underlying library failed in a way the caller cannot fix (allocation, RNG, signing).
        public static let internalFailure = Code(rawValue: "crypto/internal-failure")
    }

    /// The stable error code.
    public let code: Code
    /// A short reason, safe to log; never includes secrets.
    public let reason: String

    /// Creates an error with a code and a short, secret-free reason.
    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    /// `"<code>: <reason>"`.
    public var description: String { "\(code.rawValue): \(reason)" }

    /// An error that appends OpenSSL's reason for the most recent failure, then clears this
    /// thread's OpenSSL error queue so stale entries cannot confuse other OpenSSL users
    /// (libcurl's TLS code reads the same queue).
    static func openSSL(_ code: Code, _ reason: String) -> CryptoError {
        let detail = OpenSSLErrorQueue.drain()
        return CryptoError(code, detail.map { "\(reason) (\($0))" } ?? reason)
    }
}

/// Access to OpenSSL's per-thread error queue.
enum OpenSSLErrorQueue {
    /// Returns the reason string of the earliest queued error (if any) and empties the queue.
    static func drain() -> String? {
        let first = ERR_get_error()
        defer { ERR_clear_error() }
        guard first != 0, let reason = ERR_reason_error_string(first) else { return nil }
        return String(cString: reason)
    }

    /// Empties the queue after an expected failure (e.g. a signature that does not verify).
    static func clear() { ERR_clear_error() }
}
