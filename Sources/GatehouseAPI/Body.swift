import GatehouseCore

/// Reads a JSON request body field by field; `finish()` rejects unknown fields and reports every
/// problem at once as `request/validation-failed`.
struct Body {
    private var reader: FieldReader

    init(_ request: Request, allowEmpty: Bool = false) throws {
        reader = FieldReader(try request.jsonBody(allowEmpty: allowEmpty))
    }

    /// A required string; `maxLength` guards against absurd inputs before any work is done.
    mutating func required(_ key: String, maxLength: Int = 1024) -> String {
        if !reader.has(key) {
            _ = reader.raw(key)
            reader.fail(key, "Required.")
            return ""
        }
        return reader.string(key, maxLength: maxLength) ?? ""
    }

    mutating func optional(_ key: String, maxLength: Int = 1024) -> String? { reader.string(key, maxLength: maxLength) }

    /// Absent → nil; null → .some(nil); a string → .some(value).
    mutating func nullable(_ key: String, maxLength: Int = 1024) -> String?? {
        guard reader.isPresent(key) else { return nil }
        if !reader.has(key) {
            _ = reader.raw(key)
            return .some(nil)
        }
        guard let value = reader.string(key, maxLength: maxLength) else { return nil }
        return .some(value)
    }

    func isPresent(_ key: String) -> Bool { reader.isPresent(key) }

    /// An optional JSON object (nil when absent or null).
    mutating func optionalObject(_ key: String) -> JSON? {
        guard let value = reader.raw(key) else { return nil }
        guard case .object = value else {
            reader.fail(key, "Must be a JSON object.")
            return nil
        }
        return value
    }

    /// Absent → nil; null → .some(nil); any other value → .some(value), left for the domain to check
    /// (custom data: ``UserMetadata/checked(_:field:)`` says what is wrong with it).
    mutating func nullableValue(_ key: String) -> JSON?? {
        guard reader.isPresent(key) else { return nil }
        return .some(reader.raw(key))
    }

    /// A required JSON object (a WebAuthn credential), read as it is.
    mutating func requiredObject(_ key: String) -> JSON {
        guard let value = reader.raw(key) else {
            reader.fail(key, "Required.")
            return .null
        }
        guard case .object = value else {
            reader.fail(key, "Must be a JSON object.")
            return .null
        }
        return value
    }

    /// Throws the problems found so far (unknown fields are left for `finish`).
    func check() throws(GatehouseError) {
        if !reader.errors.isEmpty { throw .validation(reader.errors) }
    }

    func finish() throws(GatehouseError) {
        var copy = reader
        copy.rejectUnknown()
        if !copy.errors.isEmpty { throw .validation(copy.errors) }
    }
}

extension Request {
    var origin: RequestOrigin { RequestOrigin(ip: clientIP, userAgent: header("User-Agent")) }
}
