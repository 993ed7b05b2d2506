import CArgon2

/// Password hashing with Argon2id (RFC 9106) through libargon2, in the standard encoded form
/// `$argon2id$v=19$m=<KiB>,t=<iterations>,p=<lanes>$<salt>$<hash>` (16-byte salt, 32-byte hash).
public enum Argon2id {
    /// Argon2id cost parameters.
    public struct Parameters: Sendable, Equatable, CustomStringConvertible {
        /// Memory in KiB.
        public var memoryKiB: UInt32
        /// Number of passes over memory.
        public var iterations: UInt32
        /// Number of lanes (threads).
        public var parallelism: UInt32

        /// Creates parameters.
        public init(memoryKiB: UInt32, iterations: UInt32, parallelism: UInt32) {
            self.memoryKiB = memoryKiB
            self.iterations = iterations
            self.parallelism = parallelism
        }

        /// OWASP's recommended minimum: 19 MiB, 2 iterations, 1 lane (~20–30 ms here).
        public static let owasp = Parameters(memoryKiB: 19456, iterations: 2, parallelism: 1)

        /// `m=…,t=…,p=…`.
        public var description: String { "m=\(memoryKiB),t=\(iterations),p=\(parallelism)" }

        /// Whether these parameters are within the bounds this module hashes and verifies with:
        /// 1…64 lanes, 1…100 iterations, 8×lanes KiB … 1 GiB. The upper bounds stop a stored hash with
        /// absurd costs from exhausting the server on every login attempt.
        public var isWithinLimits: Bool {
            (1...64).contains(parallelism) && (1...100).contains(iterations)
                && memoryKiB >= 8 * parallelism && memoryKiB <= Argon2id.maximumMemoryKiB
        }
    }

    /// The largest memory cost accepted (1 GiB).
    public static let maximumMemoryKiB: UInt32 = 1 << 20
    static let saltByteCount = 16
    static let hashByteCount = 32

    /// Hashes `password` with a fresh 16-byte random salt; returns the encoded string to store.
    /// Throws ``CryptoError/Code/invalidParameters`` for parameters outside ``Parameters/isWithinLimits``.
    public static func hash(password: some Collection<UInt8>, parameters: Parameters) throws(CryptoError) -> String {
        guard parameters.isWithinLimits else {
            throw CryptoError(.invalidParameters, "Argon2id parameters out of range: \(parameters)")
        }
        let secret = Array(password)
        let salt = SecureRandom.bytes(saltByteCount)
        let length = argon2_encodedlen(parameters.iterations, parameters.memoryKiB, parameters.parallelism,
                                       UInt32(saltByteCount), UInt32(hashByteCount), Argon2_id) + 1
        var encoded = [CChar](repeating: 0, count: length)
        let status = secret.withUnsafeBytes { secret in
            salt.withUnsafeBytes { salt in
                encoded.withUnsafeMutableBufferPointer { output in
                    argon2id_hash_encoded(parameters.iterations, parameters.memoryKiB, parameters.parallelism,
                                          secret.baseAddress, secret.count, salt.baseAddress, salt.count,
                                          hashByteCount, output.baseAddress, output.count)
                }
            }
        }
        guard status == ARGON2_OK.rawValue else {
            throw CryptoError(.internalFailure, "argon2id: \(String(cString: argon2_error_message(status)))")
        }
        return encoded.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// Whether `password` matches `encoded` (constant-time comparison inside libargon2). Returns
    /// `false` for malformed strings, other Argon2 variants or versions, and costs outside
    /// ``Parameters/isWithinLimits``.
    public static func verify(password: some Collection<UInt8>, encoded: String) -> Bool {
        guard let parameters = parameters(of: encoded), parameters.isWithinLimits else { return false }
        let secret = Array(password)
        let status = encoded.withCString { encoded in
            secret.withUnsafeBytes { secret in argon2id_verify(encoded, secret.baseAddress, secret.count) }
        }
        return status == ARGON2_OK.rawValue
    }

    /// Whether a stored hash should be replaced after a successful login: `true` when its parameters
    /// differ from `parameters`, or when it is not a parseable `$argon2id$v=19$` string.
    public static func needsRehash(encoded: String, parameters: Parameters) -> Bool {
        self.parameters(of: encoded) != parameters
    }

    /// The cost parameters of an encoded `$argon2id$v=19$m=…,t=…,p=…$salt$hash` string.
    public static func parameters(of encoded: String) -> Parameters? {
        let parts = encoded.split(separator: "$", omittingEmptySubsequences: false)
        guard parts.count == 6, parts[0].isEmpty, parts[1] == "argon2id", parts[2] == "v=19",
              !parts[4].isEmpty, !parts[5].isEmpty
        else { return nil }
        let fields = parts[3].split(separator: ",", omittingEmptySubsequences: false)
        guard fields.count == 3 else { return nil }
        func value(_ field: Substring, _ name: String) -> UInt32? {
            guard field.hasPrefix(name + "=") else { return nil }
            return UInt32(field.dropFirst(name.count + 1))
        }
        guard let memory = value(fields[0], "m"), let iterations = value(fields[1], "t"),
              let parallelism = value(fields[2], "p")
        else { return nil }
        return Parameters(memoryKiB: memory, iterations: iterations, parallelism: parallelism)
    }
}
