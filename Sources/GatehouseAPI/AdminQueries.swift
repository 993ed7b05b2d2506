import GatehouseCore
import GatehouseCrypto

/// `GET /v1/admin/events` query: `user_id`, `type`, `limit` (1–100, default 50) and a keyset
/// `cursor` (the position of the previous page's last event, so pages stay stable while events
/// are added).
enum EventsQuery {
    static func parse(_ request: Request) throws(GatehouseError) -> EventQuery {
        var query = EventQuery()
        var errors: [FieldError] = []
        if let text = request.http.queryValue("user_id") {
            if let id = UserID(parsing: text) { query.userID = id } else { errors.append(FieldError("user_id", "Not a user id (usr_…).")) }
        }
        if let text = request.http.queryValue("type") {
            if isEventType(text) { query.type = EventType(rawValue: text) } else { errors.append(FieldError("type", "Not an event type, such as user.signed_in.")) }
        }
        if let text = request.http.queryValue("limit") {
            if let n = Int(text), (1...100).contains(n) { query.limit = n } else { errors.append(FieldError("limit", "Must be a whole number from 1 to 100.")) }
        }
        if let text = request.http.queryValue("cursor") {
            if let position = position(text) { query.after = position } else { errors.append(FieldError("cursor", "Not a cursor this endpoint gave out.")) }
        }
        if !errors.isEmpty { throw .validation(errors) }
        return query
    }

    static func cursor(_ position: EventPosition) -> String {
        Base64URL.encode(Array("k:\(position.createdAt):\(position.id.rawValue)".utf8))
    }

    private static func position(_ cursor: String) -> EventPosition? {
        guard cursor.utf8.count <= 200, let bytes = Base64URL.decode(cursor), let text = String(validating: bytes, as: UTF8.self) else { return nil }
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "k", let millis = Int64(parts[1]), let id = EventID(parsing: parts[2]) else { return nil }
        return EventPosition(createdAt: millis, id: id)
    }

    /// `word.word` of lowercase letters and underscores, as every type is.
    private static func isEventType(_ text: String) -> Bool {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        return text.utf8.count <= 64 && parts.count == 2
            && parts.allSatisfy { !$0.isEmpty && $0.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x5F } }
    }

    /// An event as the audit log shows it (API.md, "Shapes").
    static func json(_ event: Event) -> JSON {
        [
            "id": .string(event.id.rawValue), "type": .string(event.type.rawValue), "user_id": .optional(event.userID?.rawValue),
            "session_id": .optional(event.sessionID?.rawValue), "ip": .optional(event.ip), "user_agent": .optional(event.userAgent),
            "created_at": .string(rfc3339(millis: event.createdAt)), "data": event.data,
        ]
    }
}

/// `GET /v1/admin/users` query: `query` (at most 200 characters), `limit` (1–100, default 50) and
/// a keyset `cursor`.
enum UsersQuery {
    static func parse(_ request: Request) throws(GatehouseError) -> (query: String?, after: AdminUsers.Position?, limit: Int) {
        var errors: [FieldError] = []
        var query: String?
        if let text = request.http.queryValue("query") {
            let trimmed = text.trimmingCharacters(in: .whitespaces)
            if trimmed.count > 200 || InputRules.hasControlOrFormatCharacters(trimmed) {
                errors.append(FieldError("query", "At most 200 characters, no control characters."))
            } else if !trimmed.isEmpty {
                query = trimmed
            }
        }
        var limit = 50
        if let text = request.http.queryValue("limit") {
            if let n = Int(text), (1...100).contains(n) { limit = n } else { errors.append(FieldError("limit", "Must be a whole number from 1 to 100.")) }
        }
        var after: AdminUsers.Position?
        if let text = request.http.queryValue("cursor") {
            if let position = position(text) { after = position } else { errors.append(FieldError("cursor", "Not a cursor this endpoint gave out.")) }
        }
        if !errors.isEmpty { throw .validation(errors) }
        return (query, after, limit)
    }

    static func cursor(_ position: AdminUsers.Position) -> String {
        Base64URL.encode(Array("u:\(position.createdAt):\(position.id.rawValue)".utf8))
    }

    private static func position(_ cursor: String) -> AdminUsers.Position? {
        guard cursor.utf8.count <= 200, let bytes = Base64URL.decode(cursor), let text = String(validating: bytes, as: UTF8.self) else { return nil }
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "u", let millis = Int64(parts[1]), let id = UserID(parsing: parts[2]) else { return nil }
        return AdminUsers.Position(createdAt: millis, id: id)
    }
}
