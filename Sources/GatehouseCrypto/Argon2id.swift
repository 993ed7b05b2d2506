import CArgon2

/// Password hashing with argon2id (libargon2), stored as the standard encoded string
/// (`$argon2id$v=19$m=…,t=…,p=…$salt$hash`) so parameters can change later.
public enum Argon2id {
    public struct Parameters: Sendable, Equatable {
        public var memoryKiB: UInt32
        public var iterations: UInt32
        public var parallelism: UInt32
        public init(memoryKiB: UInt32, iterations: UInt32, parallelism: UInt32) {
            self.memoryKiB = memoryKiB
            self.iterations = iterations
            self.parallelism = parallelism
        }
        /// OWASP's recommendation: m=19456 KiB, t=2, p=1.
        public static let owasp = Parameters(memoryKiB: 19456, iterations: 2, parallelism: 1)
    }

    static let saltLength = 16
    static let hashLength = 32

    /// Hashes with a fresh 16-byte salt into a 32-byte hash.
    public static func hash(password: some Collection<UInt8>, parameters: Parameters) throws(CryptoError) -> String {
        let password = Array(password)
        let salt = SecureRandom.bytes(saltLength)
        let length = argon2_encodedlen(parameters.iterations, parameters.memoryKiB, parameters.parallelism, UInt32(saltLength), UInt32(hashLength), Argon2_id)
        var encoded = [CChar](repeating: 0, count: length)
        let result = argon2id_hash_encoded(
            parameters.iterations, parameters.memoryKiB, parameters.parallelism, password, password.count, salt, salt.count, hashLength, &encoded, length)
        guard result == ARGON2_OK.rawValue else {
            throw CryptoError(.invalidParameters, "argon2id: \(String(cString: argon2_error_message(result)))")
        }
        return String(decoding: encoded.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// True when `password` matches `encoded` (libargon2 compares in constant time).
    public static func verify(password: some Collection<UInt8>, encoded: String) -> Bool {
        guard encoded.hasPrefix("$argon2id$"), encoded.utf8.count < 512 else { return false }
        let password = Array(password)
        return argon2id_verify(encoded, password, password.count) == ARGON2_OK.rawValue
    }

    /// True when `encoded` was made with other parameters than `parameters` (rehash on sign-in).
    public static func needsRehash(encoded: String, parameters: Parameters) -> Bool {
        let fields = encoded.split(separator: "$")
        guard fields.count == 5, fields[0] == "argon2id", fields[1] == "v=19" else { return true }
        return fields[2] != "m=\(parameters.memoryKiB),t=\(parameters.iterations),p=\(parameters.parallelism)"
    }
}
