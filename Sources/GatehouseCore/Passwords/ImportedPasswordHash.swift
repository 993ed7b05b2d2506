import Foundation
import GatehouseCrypto

/// A password hash made by another system, imported with its user (ADR 0030). It is verified
/// with its own algorithm until the user's first successful sign-in, which replaces it with
/// argon2id. In the password column it is kept as ``storedForm(sealer:app:)``, a string that
/// begins with ``storedPrefix`` and so is never taken for an argon2id hash the server made.
public enum ImportedPasswordHash: Sendable, Equatable {
    /// `$2a$`, `$2b$` or `$2y$`, verified by libxcrypt.
    case bcrypt(String)
    /// A PHC string of argon2i or argon2id.
    case argon2(String, argon2i: Bool)
    /// scrypt (RFC 7914) with its parameters; `hash` is the derived key, of its own length.
    case scrypt(hash: [UInt8], salt: [UInt8], n: UInt64, r: Int, p: Int)
    /// PBKDF2-HMAC-SHA256 or, `sha512`, PBKDF2-HMAC-SHA512.
    case pbkdf2(hash: [UInt8], salt: [UInt8], iterations: Int, sha512: Bool)
    /// Firebase's modified scrypt, with its project's parameters.
    case firebaseScrypt(hash: [UInt8], salt: [UInt8], config: FirebaseHashConfig)

    /// The algorithms `password_hash.algorithm` names.
    public static let algorithms = ["bcrypt", "argon2id", "argon2i", "scrypt", "pbkdf2_sha256", "pbkdf2_sha512", "firebase_scrypt"]
    /// How every stored form begins.
    public static let storedPrefix = "$gatehouse-import$v=1$"
    /// The most memory one verification may take (scrypt, argon2): 1 GiB.
    static let maximumMemory: UInt64 = 1 << 30
    static let maximumPBKDF2Iterations: Int64 = 10_000_000
    static let maximumBcryptCost = 16

    /// The `algorithm` it was imported as (one of ``algorithms``).
    public var algorithm: String {
        switch self {
        case .bcrypt: "bcrypt"
        case .argon2(_, let argon2i): argon2i ? "argon2i" : "argon2id"
        case .scrypt: "scrypt"
        case .pbkdf2(_, _, _, let sha512): sha512 ? "pbkdf2_sha512" : "pbkdf2_sha256"
        case .firebaseScrypt: "firebase_scrypt"
        }
    }

    // MARK: - Decoding

    /// Decodes a `password_hash` object (`{algorithm, hash, salt?, iterations?, n?, r?, p?,
    /// signer_key?, salt_separator?, rounds?, mem_cost?}`). `firebase` is the app's Firebase
    /// parameters, used by `firebase_scrypt` when the object has none of its own. Throws
    /// `request/validation-failed` with errors under `path`, also for costs above the limits
    /// (bcrypt cost 16, scrypt N 2^20 and 1 GiB, PBKDF2 10,000,000 iterations, argon2 1 GiB
    /// and 10 passes).
    public static func decode(_ json: JSON, firebase: FirebaseHashConfig?, path: String = "password_hash") throws(GatehouseError) -> ImportedPasswordHash {
        var reader = FieldReader(json, path: path)
        let decoded = read(&reader, firebase: firebase)
        reader.rejectUnknown()
        guard reader.errors.isEmpty, let decoded else {
            throw .validation(reader.errors.isEmpty ? [FieldError(path, "Not a valid password hash.")] : reader.errors)
        }
        return decoded
    }

    private static func read(_ reader: inout FieldReader, firebase: FirebaseHashConfig?) -> ImportedPasswordHash? {
        guard let algorithm = reader.string("algorithm", maxLength: 32) else {
            if !reader.has("algorithm") { reader.fail("algorithm", "Required.") }
            return nil
        }
        switch algorithm {
        case "bcrypt":
            guard let hash = requiredString(&reader, "hash") else { return nil }
            guard let cost = bcryptCost(hash) else {
                reader.fail("hash", "Must be a bcrypt string ($2a$, $2b$ or $2y$, 60 characters).")
                return nil
            }
            guard cost <= maximumBcryptCost else {
                reader.fail("hash", "The bcrypt cost must be at most \(maximumBcryptCost).")
                return nil
            }
            return .bcrypt(hash)
        case "argon2id", "argon2i":
            guard let hash = requiredString(&reader, "hash") else { return nil }
            if let problem = argon2Problem(hash, argon2i: algorithm == "argon2i") {
                reader.fail("hash", problem)
                return nil
            }
            return .argon2(hash, argon2i: algorithm == "argon2i")
        case "scrypt":
            let hash = requiredBytes(&reader, "hash", 16...256)
            let salt = requiredBytes(&reader, "salt", 1...1024)
            let n = reader.int("n", 2...(1 << 20))
            let r = reader.int("r", 1...32)
            let p = reader.int("p", 1...16)
            for key in ["n", "r", "p"] where !reader.has(key) { reader.fail(key, "Required.") }
            guard let hash, let salt, let n, let r, let p else { return nil }
            if let problem = scryptProblem(n: UInt64(n), r: Int(r), p: Int(p)) {
                reader.fail(problem.field, problem.message)
                return nil
            }
            return .scrypt(hash: hash, salt: salt, n: UInt64(n), r: Int(r), p: Int(p))
        case "pbkdf2_sha256", "pbkdf2_sha512":
            let hash = requiredBytes(&reader, "hash", 16...128)
            let salt = requiredBytes(&reader, "salt", 1...1024)
            let iterations = reader.int("iterations", 1...maximumPBKDF2Iterations)
            if !reader.has("iterations") { reader.fail("iterations", "Required.") }
            guard let hash, let salt, let iterations else { return nil }
            return .pbkdf2(hash: hash, salt: salt, iterations: Int(iterations), sha512: algorithm == "pbkdf2_sha512")
        case "firebase_scrypt":
            let hash = requiredBytes(&reader, "hash", 1...1024)
            let salt = requiredBytes(&reader, "salt", 0...1024)
            let own = FirebaseHashConfig.read(&reader, required: false)
            guard let hash, let salt else { return nil }
            guard let config = own ?? firebase else {
                if reader.errors.isEmpty {
                    reader.fail(path: reader.field("signer_key"), "Required: the Firebase hash parameters are neither in the line nor in the app's settings.")
                }
                return nil
            }
            guard hash.count == config.signerKey.count else {
                reader.fail("hash", "Must be as long as the signer key.")
                return nil
            }
            return .firebaseScrypt(hash: hash, salt: salt, config: config)
        default:
            reader.fail("algorithm", "Must be one of \(algorithms.joined(separator: ", ")).")
            return nil
        }
    }

    private static func requiredString(_ reader: inout FieldReader, _ key: String) -> String? {
        let value = reader.string(key, maxLength: 1024)
        if value == nil, !reader.has(key) { reader.fail(key, "Required.") }
        return value
    }

    private static func requiredBytes(_ reader: inout FieldReader, _ key: String, _ range: ClosedRange<Int>) -> [UInt8]? {
        let value = bytes(&reader, key, range)
        if value == nil, !reader.has(key) { reader.fail(key, "Required.") }
        return value
    }

    /// Standard base64 (padded or not) of `range` bytes.
    static func bytes(_ reader: inout FieldReader, _ key: String, _ range: ClosedRange<Int>) -> [UInt8]? {
        guard let text = reader.string(key, maxLength: 4096) else { return nil }
        guard let bytes = base64(text) else {
            reader.fail(key, "Must be standard base64.")
            return nil
        }
        guard range.contains(bytes.count) else {
            reader.fail(key, "Must be \(range.lowerBound) to \(range.upperBound) bytes.")
            return nil
        }
        return bytes
    }

    static func base64(_ text: some StringProtocol) -> [UInt8]? {
        if text.isEmpty { return [] }
        var unpadded = Substring(text)
        if unpadded.hasSuffix("==") { unpadded = unpadded.dropLast(2) } else if unpadded.hasSuffix("=") { unpadded = unpadded.dropLast() }
        guard unpadded.count % 4 != 1, !unpadded.contains("=") else { return nil }
        let padded = String(unpadded) + String(repeating: "=", count: (4 - unpadded.count % 4) % 4)
        return Data(base64Encoded: padded).map { Array($0) }
    }

    static func scryptMemory(n: UInt64, r: UInt64) -> UInt64 { 128 * n * r }

    private static func scryptProblem(n: UInt64, r: Int, p: Int) -> (field: String, message: String)? {
        if n & (n - 1) != 0 { return ("n", "Must be a power of two.") }
        if scryptMemory(n: n, r: UInt64(r)) > maximumMemory { return ("n", "n × r × 128 bytes must be at most 1 GiB.") }
        // The work of one verification: the RFC's largest example (N = 2^20, r = 8, p = 1) at most.
        if n * UInt64(r) * UInt64(p) > 1 << 23 { return ("p", "n × r × p must be at most 2^23.") }
        return nil
    }

    /// The cost of a well-formed bcrypt string, or nil.
    private static func bcryptCost(_ hash: String) -> Int? {
        let bytes = Array(hash.utf8)
        guard bytes.count == 60, hash.hasPrefix("$2a$") || hash.hasPrefix("$2b$") || hash.hasPrefix("$2y$"), bytes[6] == UInt8(ascii: "$"),
            bytes[4..<6].allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
            let cost = Int(String(decoding: bytes[4..<6], as: UTF8.self)), (4...31).contains(cost)
        else { return nil }
        let alphabet = Set("./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8)
        guard bytes[7...].allSatisfy({ alphabet.contains($0) }) else { return nil }
        return cost
    }

    /// Why a PHC string is not one this server verifies (`$argon2i$[v=16|19$]m=…,t=…,p=…$salt$hash`),
    /// or nil.
    private static func argon2Problem(_ hash: String, argon2i: Bool) -> String? {
        var parts = hash.split(separator: "$", omittingEmptySubsequences: false)
        guard parts.count >= 5, parts[0].isEmpty, parts[1] == (argon2i ? "argon2i" : "argon2id") else {
            return "Must be a PHC string ($\(argon2i ? "argon2i" : "argon2id")$v=19$m=…,t=…,p=…$salt$hash)."
        }
        if parts[2].hasPrefix("v=") {
            guard parts[2] == "v=19" || parts[2] == "v=16" else { return "Must be version 16 or 19." }
            parts.remove(at: 2)
        }
        guard parts.count == 5 else { return "Must be a PHC string ($\(argon2i ? "argon2i" : "argon2id")$v=19$m=…,t=…,p=…$salt$hash)." }
        var values: [String: UInt64] = [:]
        for field in parts[2].split(separator: ",") {
            let pair = field.split(separator: "=", maxSplits: 1)
            guard pair.count == 2, pair[1].allSatisfy({ $0.isASCII && $0.isNumber }), let value = UInt64(pair[1]) else { return "Must have m, t and p parameters." }
            values[String(pair[0])] = value
        }
        guard values.count == 3, let m = values["m"], let t = values["t"], let p = values["p"] else { return "Must have m, t and p parameters." }
        guard (1...16).contains(p), (1...10).contains(t), m >= 8 * p, m <= maximumMemory / 1024 else {
            return "Its costs must be at most m=\(maximumMemory / 1024) (1 GiB), t=10 and p=16."
        }
        guard let salt = base64(parts[3]), salt.count >= 8, let output = base64(parts[4]), (4...256).contains(output.count) else {
            return "Its salt and hash must be base64."
        }
        return nil
    }

    // MARK: - Stored form

    /// Where the Firebase signer key is sealed in a stored form (the secret sealer's field).
    static let signerKeyField = "password_hash/firebase_signer_key"

    /// The string kept in the password column: ``storedPrefix``, the algorithm, then its own
    /// fields separated by `$` (ADR 0030). Firebase's signer key is a secret of the whole project
    /// (with it, every exported hash can be attacked offline): it is sealed with `sealer` for the
    /// app (`v2.…`), never written in the clear (ADR 0031).
    public func storedForm(sealer: SecretSealer, app: AppID) -> String {
        func b64(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }
        let payload = switch self {
        case .bcrypt(let hash): hash
        case .argon2(let hash, _): hash
        case .scrypt(let hash, let salt, let n, let r, let p): "n=\(n),r=\(r),p=\(p)$\(b64(salt))$\(b64(hash))"
        case .pbkdf2(let hash, let salt, let iterations, _): "i=\(iterations)$\(b64(salt))$\(b64(hash))"
        case .firebaseScrypt(let hash, let salt, let config):
            "rounds=\(config.rounds),mem_cost=\(config.memoryCost)$\(b64(salt))$\(b64(config.saltSeparator))$"
                + "\(sealer.seal(b64(config.signerKey), app: app, field: Self.signerKeyField))$\(b64(hash))"
        }
        return "\(Self.storedPrefix)\(algorithm)$\(payload)"
    }

    /// Whether a stored password hash is an imported one.
    public static func isStoredForm(_ stored: String) -> Bool { stored.hasPrefix(storedPrefix) }

    /// Reads a ``storedForm(sealer:app:)`` back, with the same checks as
    /// ``decode(_:firebase:path:)``; nil for anything else, and for a Firebase form whose signer
    /// key does not open with `sealer` for `app` (another app's row, another master key).
    public init?(storedForm stored: String, sealer: SecretSealer, app: AppID) {
        guard stored.hasPrefix(Self.storedPrefix) else { return nil }
        let rest = stored.dropFirst(Self.storedPrefix.count)
        guard let dollar = rest.firstIndex(of: "$") else { return nil }
        let algorithm = String(rest[..<dollar])
        let payload = String(rest[rest.index(after: dollar)...])
        var json: [String: JSON] = ["algorithm": .string(algorithm)]
        func parameters(_ text: Substring) -> [String: Int64]? {
            var values: [String: Int64] = [:]
            for field in text.split(separator: ",") {
                let pair = field.split(separator: "=", maxSplits: 1)
                guard pair.count == 2, let value = Int64(pair[1]) else { return nil }
                values[String(pair[0])] = value
            }
            return values
        }
        let parts = payload.split(separator: "$", omittingEmptySubsequences: false)
        switch algorithm {
        case "bcrypt", "argon2i", "argon2id":
            json["hash"] = .string(payload)
        case "scrypt":
            guard parts.count == 3, let values = parameters(parts[0]), let n = values["n"], let r = values["r"], let p = values["p"] else { return nil }
            json.merge(["n": .int(n), "r": .int(r), "p": .int(p), "salt": .string(String(parts[1])), "hash": .string(String(parts[2]))]) { $1 }
        case "pbkdf2_sha256", "pbkdf2_sha512":
            guard parts.count == 3, let values = parameters(parts[0]), let iterations = values["i"] else { return nil }
            json.merge(["iterations": .int(iterations), "salt": .string(String(parts[1])), "hash": .string(String(parts[2]))]) { $1 }
        case "firebase_scrypt":
            guard parts.count == 5, let values = parameters(parts[0]), let rounds = values["rounds"], let memoryCost = values["mem_cost"],
                let signerKey = try? sealer.open(String(parts[3]), app: app, field: Self.signerKeyField)
            else { return nil }
            json.merge([
                "rounds": .int(rounds), "mem_cost": .int(memoryCost), "salt": .string(String(parts[1])), "salt_separator": .string(String(parts[2])),
                "signer_key": .string(signerKey), "hash": .string(String(parts[4])),
            ]) { $1 }
        default:
            return nil
        }
        guard let decoded = try? Self.decode(.object(json), firebase: nil) else { return nil }
        self = decoded
    }

    // MARK: - Verifying

    /// Whether `password` is the one this hash was made from; the comparison is constant-time.
    /// Slow by design (up to the cost limits): call it where argon2id runs (``PasswordHasher``).
    public func verify(_ password: String) -> Bool {
        let secret = Array(password.utf8)
        switch self {
        case .bcrypt(let hash):
            return ImportedPasswordKDF.bcrypt(password: secret, encoded: hash)
        case .argon2(let hash, let argon2i):
            return ImportedPasswordKDF.argon2(password: secret, encoded: hash, argon2i: argon2i)
        case .scrypt(let hash, let salt, let n, let r, let p):
            guard let derived = ImportedPasswordKDF.scrypt(password: secret, salt: salt, n: n, r: UInt64(r), p: UInt64(p), length: hash.count) else { return false }
            return constantTimeEquals(derived, hash)
        case .pbkdf2(let hash, let salt, let iterations, let sha512):
            guard let derived = ImportedPasswordKDF.pbkdf2(password: secret, salt: salt, iterations: iterations, digest: sha512 ? .sha512 : .sha256, length: hash.count)
            else { return false }
            return constantTimeEquals(derived, hash)
        case .firebaseScrypt(let hash, let salt, let config):
            guard let derived = ImportedPasswordKDF.firebaseScrypt(
                password: secret, salt: salt, saltSeparator: config.saltSeparator, signerKey: config.signerKey, rounds: config.rounds, memoryCost: config.memoryCost)
            else { return false }
            return constantTimeEquals(derived, hash)
        }
    }
}
