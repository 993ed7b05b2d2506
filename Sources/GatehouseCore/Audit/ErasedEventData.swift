/// What an erased account's audit events keep of their `data` (API.md, "Erasure reaches the
/// audit log"; docs/admin.md). The rule errs towards removing: at any depth,
/// - a string that holds an email address — an `@` with a character other than a blank on each
///   side, anywhere in it — is removed (the member, or the array element), whatever its key, so a
///   free-text reason that quotes an address goes whole;
/// - a member whose name is `email` or ends in `_email` is removed whatever its value, so an
///   address kept in another shape (an object, a masked form) goes too;
/// - a member whose name holds an address is removed.
/// Everything else (ids, times, counts, flags such as `email_verified`) stays.
public enum ErasedEventData {
    /// `data` without the email addresses it holds.
    public static func redacted(_ data: JSON) -> JSON {
        switch data {
        case .object(let members):
            var kept: [String: JSON] = [:]
            for (name, value) in members where !namesAnAddress(name) && !holdsAnAddress(value) {
                kept[name] = redacted(value)
            }
            return .object(kept)
        case .array(let elements):
            return .array(elements.filter { !holdsAnAddress($0) }.map(redacted))
        case .string, .null, .bool, .int, .double:
            return data
        }
    }

    private static func namesAnAddress(_ name: String) -> Bool {
        name == "email" || name.hasSuffix("_email") || containsAddress(name)
    }

    private static func holdsAnAddress(_ value: JSON) -> Bool {
        if case .string(let text) = value { return containsAddress(text) }
        return false
    }

    /// An `@` with a non-blank character right before and right after it.
    static func containsAddress(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        func isBlank(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }
        for index in bytes.indices where bytes[index] == UInt8(ascii: "@") {
            if index > 0, index + 1 < bytes.count, !isBlank(bytes[index - 1]), !isBlank(bytes[index + 1]) { return true }
        }
        return false
    }
}
