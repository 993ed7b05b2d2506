/// Custom data on a user (`app_metadata`, `user_metadata`): a JSON object, checked by
/// ``checked(_:field:)`` before it is stored, so every stored one keeps its rules.
///
/// The rules: a JSON object (any keys: there is no reserved prefix, since the data sits under its
/// own key, in the user object and in the token alike, and can never shadow a field or claim of
/// Gatehouse's); at most ``maxBytes`` bytes serialized (as the server serializes it, without
/// whitespace); at most ``maxDepth`` levels of objects and arrays, the object itself counting as one.
public struct UserMetadata: Sendable, Equatable {
    public let fields: [String: JSON]

    public static let empty = UserMetadata(unchecked: [:])
    /// Serialized size limit (API.md: ≤ 4 KiB).
    public static let maxBytes = 4096
    /// Nesting limit: `{"a": {"b": {"c": {"d": {"e": 1}}}}}` is 5 levels, the deepest allowed.
    public static let maxDepth = 5

    /// Stored data, read back as it was checked.
    public init(unchecked fields: [String: JSON]) { self.fields = fields }

    public var json: JSON { .object(fields) }
    public var isEmpty: Bool { fields.isEmpty }

    /// The value as a request gave it, checked; nil (a JSON null) is the empty object.
    public static func checked(_ value: JSON?, field: String) throws(GatehouseError) -> UserMetadata {
        guard let value, value != .null else { return .empty }
        guard case .object(let fields) = value else { throw .validation(field, "Must be a JSON object (or null: empty).") }
        guard depth(value) <= maxDepth else { throw .validation(field, "Must not nest objects and arrays more than \(maxDepth) levels deep.") }
        guard value.serialized().count <= maxBytes else { throw .validation(field, "Must be at most \(maxBytes) bytes as JSON.") }
        return UserMetadata(unchecked: fields)
    }

    /// Parses stored text; a stored value that no longer parses as an object reads as empty.
    public static func stored(_ text: String) -> UserMetadata {
        guard let json = try? JSON.parse(Array(text.utf8)), case .object(let fields) = json else { return .empty }
        return UserMetadata(unchecked: fields)
    }

    /// The stored text: the serialized object.
    public var storedText: String { json.serializedString }

    private static func depth(_ value: JSON) -> Int {
        switch value {
        case .object(let fields): 1 + (fields.values.map(depth).max() ?? 0)
        case .array(let items): 1 + (items.map(depth).max() ?? 0)
        default: 0
        }
    }
}
