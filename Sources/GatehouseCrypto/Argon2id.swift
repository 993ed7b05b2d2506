import CArgon2
import Foundation

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
        let salt = SecureRandom.bytes(saltByteCount)
        var output = [UInt8](repeating: 0, count: hashByteCount)
        let status = compute(password: password, salt: salt, parameters: parameters, into: &output) { context in argon2_ctx(&context, Argon2_id) }
        guard status == ARGON2_OK.rawValue else {
            throw CryptoError(.internalFailure, "argon2id: \(String(cString: argon2_error_message(status)))")
        }
        return "$argon2id$v=19$m=\(parameters.memoryKiB),t=\(parameters.iterations),p=\(parameters.parallelism)$\(base64(salt))$\(base64(output))"
    }

    /// Whether `password` matches `encoded` (constant-time comparison inside libargon2). Returns
    /// `false` for malformed strings, other Argon2 variants or versions, and costs outside
    /// ``Parameters/isWithinLimits``.
    public static func verify(password: some Collection<UInt8>, encoded: String) -> Bool {
        guard let parameters = parameters(of: encoded), parameters.isWithinLimits else { return false }
        let parts = encoded.split(separator: "$", omittingEmptySubsequences: false)
        guard let salt = unbase64(parts[4]), let expected = unbase64(parts[5]),
            // libargon2's minimum lengths (ARGON2_MIN_SALT_LENGTH, ARGON2_MIN_OUTLEN), and a bound on
            // the output a stored string can make it compute.
            salt.count >= 8, salt.count <= 1024, expected.count >= 4, expected.count <= 1024
        else { return false }
        var output = [UInt8](repeating: 0, count: expected.count)
        let status = expected.withUnsafeBytes { expected in
            compute(password: password, salt: salt, parameters: parameters, into: &output) { context in
                argon2id_verify_ctx(&context, expected.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
        }
        return status == ARGON2_OK.rawValue
    }

    /// Runs `body` on a context for these inputs whose working memory comes from ``Argon2idMemory``.
    private static func compute(
        password: some Collection<UInt8>, salt: [UInt8], parameters: Parameters, into output: inout [UInt8],
        _ body: (inout argon2_context) -> Int32
    ) -> Int32 {
        var secret = Array(password)
        var salt = salt
        defer { secret.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) } }
        return secret.withUnsafeMutableBufferPointer { secret in
            salt.withUnsafeMutableBufferPointer { salt in
                output.withUnsafeMutableBufferPointer { output in
                    var context = argon2_context(
                        out: output.baseAddress, outlen: UInt32(output.count),
                        pwd: secret.baseAddress, pwdlen: UInt32(secret.count),
                        salt: salt.baseAddress, saltlen: UInt32(salt.count),
                        secret: nil, secretlen: 0, ad: nil, adlen: 0,
                        t_cost: parameters.iterations, m_cost: parameters.memoryKiB,
                        lanes: parameters.parallelism, threads: parameters.parallelism,
                        version: UInt32(ARGON2_VERSION_13.rawValue),
                        allocate_cbk: Argon2idMemory.allocate, free_cbk: Argon2idMemory.free,
                        flags: 0)  // ARGON2_DEFAULT_FLAGS
                    return body(&context)
                }
            }
        }
    }

    /// Standard base64 without padding, as the PHC string format writes salts and hashes.
    static func base64(_ bytes: [UInt8]) -> String {
        var text = Data(bytes).base64EncodedString()
        while text.last == "=" { text.removeLast() }
        return text
    }

    /// The bytes of unpadded standard base64, or nil.
    static func unbase64(_ text: Substring) -> [UInt8]? {
        guard !text.isEmpty, text.count % 4 != 1, !text.contains("=") else { return nil }
        let padded = String(text) + String(repeating: "=", count: (4 - text.count % 4) % 4)
        return Data(base64Encoded: padded).map { Array($0) }
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
