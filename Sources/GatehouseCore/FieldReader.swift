/// Reads a JSON object field by field, collecting every problem (wrong type, out of range,
/// unknown field) instead of stopping at the first, so that a client sees them all at once.
public struct FieldReader {
    public private(set) var errors: [FieldError] = []
    private let object: [String: JSON]
    private let path: String
    private var seen: Set<String> = []

    /// `json` must be an object; otherwise one error is recorded for `path` (or `body`).
    public init(_ json: JSON, path: String = "") {
        self.path = path
        if case .object(let o) = json {
            object = o
        } else {
            object = [:]
            errors.append(FieldError(path.isEmpty ? "body" : path, "Must be a JSON object."))
        }
    }

    public func field(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    public mutating func fail(_ key: String, _ message: String) { errors.append(FieldError(field(key), message)) }
    public mutating func fail(path: String, _ message: String) { errors.append(FieldError(path, message)) }
    public mutating func absorb(_ other: [FieldError]) { errors.append(contentsOf: other) }

    /// The raw value, marking the key as known. `nil` when absent or JSON null.
    public mutating func raw(_ key: String) -> JSON? {
        seen.insert(key)
        guard let v = object[key], v != .null else { return nil }
        return v
    }

    /// The raw value without marking the key as known; `nil` when absent or JSON null.
    public func peek(_ key: String) -> JSON? {
        guard let v = object[key], v != .null else { return nil }
        return v
    }

    public func has(_ key: String) -> Bool { object[key] != nil && object[key] != .null }

    /// True when the key is in the object, even with a null value.
    public func isPresent(_ key: String) -> Bool { object[key] != nil }

    public mutating func string(_ key: String, maxLength: Int = 1024) -> String? {
        guard let v = raw(key) else { return nil }
        guard case .string(let s) = v else { fail(key, "Must be a string."); return nil }
        if !InputRules.fits(s, characters: maxLength) { fail(key, "Must be at most \(maxLength) characters."); return nil }
        if InputRules.hasControlCharacters(s) {
            fail(key, "Must not contain control characters.")
            return nil
        }
        return s
    }

    public mutating func bool(_ key: String) -> Bool? {
        guard let v = raw(key) else { return nil }
        guard case .bool(let b) = v else { fail(key, "Must be true or false."); return nil }
        return b
    }

    public mutating func int(_ key: String, _ range: ClosedRange<Int64>) -> Int64? {
        guard let v = raw(key) else { return nil }
        let n: Int64
        switch v {
        case .int(let i): n = i
        case .double(let d) where d.rounded() == d && abs(d) < 9e15: n = Int64(d)
        default: fail(key, "Must be a whole number."); return nil
        }
        guard range.contains(n) else { fail(key, "Must be from \(range.lowerBound) to \(range.upperBound)."); return nil }
        return n
    }

    public mutating func stringArray(_ key: String, maxCount: Int, maxLength: Int = 1024) -> [String]? {
        guard let v = raw(key) else { return nil }
        guard case .array(let items) = v else { fail(key, "Must be an array of strings."); return nil }
        if items.count > maxCount { fail(key, "Must have at most \(maxCount) items."); return nil }
        var result: [String] = []
        for (i, item) in items.enumerated() {
            guard case .string(let s) = item, !s.isEmpty, InputRules.fits(s, characters: maxLength),
                !InputRules.hasControlCharacters(s)
            else {
                errors.append(FieldError("\(field(key))[\(i)]", "Must be a non-empty string of at most \(maxLength) characters."))
                continue
            }
            result.append(s)
        }
        return result
    }

    /// Records an error for every key that no accessor asked for.
    public mutating func rejectUnknown() {
        for key in object.keys.sorted() where !seen.contains(key) {
            errors.append(FieldError(field(key), "Unknown field."))
        }
    }
}
