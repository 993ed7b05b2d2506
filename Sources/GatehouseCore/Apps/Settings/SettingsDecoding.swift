import Foundation

/// Where a settings document comes from, which decides how secrets may be given.
public enum SettingsSource {
    /// The admin API. Secrets are plain strings; `{"set": true}` keeps the current value (so a
    /// settings object read with GET can be sent back); `_file`/`_env` forms are refused, since a
    /// tenant admin must never read the server's files or environment.
    case admin(current: AppSettings?)
    /// An operator's file under `Tenants/`: plain strings, or `<name>_file` (relative to the file's
    /// folder) and `<name>_env`, resolved now.
    case tenantFile(directory: String, environment: [String: String])
    /// The database: secrets are `{"sealed": "<base64>"}`, opened with `unseal`.
    case storage(unseal: (_ sealed: String, _ field: String) throws -> String)
}

/// How secrets are written out.
public enum SecretRendering {
    /// `{"set": true}` (or null when unset): what admins see.
    case redacted
    /// Plain text: used in memory to apply a merge patch.
    case plain
    /// `{"sealed": "<base64>"}` for the database.
    case sealed((_ plaintext: String, _ field: String) -> String)

    /// One secret (`field` names it for the seal), rendered as asked; null when unset.
    func render(_ value: String?, _ field: String) -> JSON {
        guard let value else { return .null }
        switch self {
        case .redacted: return ["set": true]
        case .plain: return .string(value)
        case .sealed(let seal): return ["sealed": .string(seal(value, field))]
        }
    }
}

/// What each section of a settings document is decoded with besides its fields: where the
/// document comes from (how secrets are read, how strict the checks are), the platform's caps,
/// and whether tenants' outbound URLs may be private.
struct SettingsDecoding {
    let source: SettingsSource
    let caps: AppSettings.PlatformCaps
    /// `GATEHOUSE_ALLOW_PRIVATE_OUTBOUND`: a webhook URL may be `http` or name a private address.
    let allowPrivateOutbound: Bool

    /// The settings an admin's document replaces, whose secrets `{"set": true}` keeps.
    var current: AppSettings? { if case .admin(let c) = source { c } else { nil } }

    /// Read from storage: what an earlier version stored under looser rules still loads (else
    /// every request of that app would fail, the PATCH that could mend it included); the next
    /// save must mend it.
    var storedBefore: Bool { if case .storage = source { true } else { false } }

    /// The highest value a cap may be given: the platform's ceiling, but any value for one read
    /// from storage (saved under a higher ceiling; the caller lowers it to the ceiling).
    func ceiling(_ platform: Int64) -> Int64 { storedBefore ? Int64.max : platform }

    /// Reads a secret field according to the source's rules.
    func secret(_ f: inout FieldReader, _ key: String, current: String?, allowFile: Bool = true) -> String? {
        switch source {
        case .admin:
            // Named at all, even as null: admin settings have no such fields.
            for suffix in ["_file", "_env"] where f.isPresent(key + suffix) {
                _ = f.raw(key + suffix)
                f.fail(key + suffix, "Only files under Tenants/ may read secrets from files or the environment.")
            }
            guard let v = f.raw(key) else { return nil }
            if case .object(let o) = v, o == ["set": .bool(true)] {
                if current == nil { f.fail(key, "No value is set to keep; send the secret itself.") }
                return current
            }
            guard case .string(let s) = v, !s.isEmpty, s.utf8.count <= 16384 else {
                f.fail(key, "Must be a non-empty string (or {\"set\": true} to keep the current value).")
                return nil
            }
            return s
        case .tenantFile(let directory, let environment):
            let fileKey = key + "_file", envKey = key + "_env"
            let given = [key, fileKey, envKey].filter { f.has($0) }
            if given.count > 1 {
                for k in given { _ = f.raw(k) }
                f.fail(key, "Give only one of \(given.joined(separator: ", ")).")
                return nil
            }
            if allowFile, let name = f.string(fileKey) {
                let path = name.hasPrefix("/") ? name : (directory as NSString).appendingPathComponent(name)
                guard let text = try? String(contentsOfFile: path, encoding: .utf8), !text.isEmpty else {
                    f.fail(fileKey, "Cannot read \(name).")
                    return nil
                }
                return text
            } else if !allowFile, f.has(fileKey) {
                _ = f.raw(fileKey)
                f.fail(fileKey, "Not supported for this field; use \(envKey).")
                return nil
            }
            if let name = f.string(envKey, maxLength: 255) {
                guard let text = environment[name], !text.isEmpty else {
                    f.fail(envKey, "The environment variable \(name) is not set.")
                    return nil
                }
                return text
            }
            guard let v = f.raw(key) else { return nil }
            guard case .string(let s) = v, !s.isEmpty else { f.fail(key, "Must be a non-empty string."); return nil }
            return s
        case .storage(let unseal):
            guard let v = f.raw(key) else { return nil }
            guard case .object(let o) = v, case .string(let sealed)? = o["sealed"] else { f.fail(key, "Stored secret is not sealed."); return nil }
            do { return try unseal(sealed, f.field(key)) } catch {
                f.fail(key, "Stored secret cannot be opened with this master key.")
                return nil
            }
        }
    }
}

extension FieldReader {
    /// The object under `key` (nil when absent or null) decoded by `decode` with a reader of its
    /// own, whose fields are named `key.field` and whose unknown fields are refused; its problems
    /// join this reader's.
    mutating func section<Section>(
        _ key: String, _ context: SettingsDecoding, _ decode: (inout FieldReader, SettingsDecoding) -> Section
    ) -> Section? {
        guard let value = raw(key) else { return nil }
        var f = FieldReader(value, path: key)
        let section = decode(&f, context)
        f.rejectUnknown()
        absorb(f.errors)
        return section
    }
}

extension JSON {
    /// An array of strings.
    static func strings(_ values: [String]) -> JSON { .array(values.map(JSON.string)) }
}

/// The values in their first order, without repeats.
func uniqued(_ values: [String]) -> [String] {
    var seen = Set<String>()
    return values.filter { seen.insert($0).inserted }
}
