/// A Firebase project's password hash parameters (its console's "Password Hash Parameters"), which
/// every `firebase_scrypt` hash of the project needs besides its own salt.
public struct FirebaseHashConfig: Sendable, Equatable {
    /// `signer_key`: the key every hash encrypts.
    public let signerKey: [UInt8]
    /// `salt_separator`: appended to each account's salt.
    public let saltSeparator: [UInt8]
    /// `rounds`: scrypt's r.
    public let rounds: Int
    /// `mem_cost`: scrypt's N is 2^`memoryCost`.
    public let memoryCost: Int

    /// Parameters as they are; ``decode(_:path:)`` checks them.
    public init(signerKey: [UInt8], saltSeparator: [UInt8], rounds: Int, memoryCost: Int) {
        self.signerKey = signerKey
        self.saltSeparator = saltSeparator
        self.rounds = rounds
        self.memoryCost = memoryCost
    }

    /// `{signer_key, salt_separator, rounds, mem_cost}` (keys in standard base64), as the app's
    /// `firebase.hash_config` or inside a `password_hash`; field errors under `path`.
    public static func decode(_ json: JSON, path: String = "firebase.hash_config") throws(GatehouseError) -> FirebaseHashConfig {
        var reader = FieldReader(json, path: path)
        let config = read(&reader, required: true)
        reader.rejectUnknown()
        guard reader.errors.isEmpty, let config else {
            throw .validation(reader.errors.isEmpty ? [FieldError(path, "Not valid Firebase hash parameters.")] : reader.errors)
        }
        return config
    }

    /// Reads the four fields from `reader`; nil when none is there and `required` is false (or
    /// after recording errors).
    static func read(_ reader: inout FieldReader, required: Bool) -> FirebaseHashConfig? {
        let keys = ["signer_key", "salt_separator", "rounds", "mem_cost"]
        guard required || keys.contains(where: { reader.has($0) }) else {
            for key in keys { _ = reader.raw(key) }
            return nil
        }
        let signerKey = ImportedPasswordHash.bytes(&reader, "signer_key", 1...1024)
        let separator = ImportedPasswordHash.bytes(&reader, "salt_separator", 0...1024)
        let rounds = reader.int("rounds", 1...32)
        let memoryCost = reader.int("mem_cost", 1...20)
        for key in ["rounds", "mem_cost"] where !reader.has(key) { reader.fail(key, "Required.") }
        guard let signerKey, let separator, let rounds, let memoryCost else { return nil }
        guard ImportedPasswordHash.scryptMemory(n: 1 << UInt64(memoryCost), r: UInt64(rounds)) <= ImportedPasswordHash.maximumMemory else {
            reader.fail("mem_cost", "2^mem_cost × rounds × 128 bytes must be at most 1 GiB.")
            return nil
        }
        return FirebaseHashConfig(signerKey: signerKey, saltSeparator: separator, rounds: Int(rounds), memoryCost: Int(memoryCost))
    }
}
