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
        query.limit = Page.limit(request, errors: &errors)
        query.after = KeysetCursor.read(request, tag: "k", errors: &errors, id: EventID.init(parsing:)).map {
            EventPosition(createdAt: $0.millis, id: $0.id)
        }
        if !errors.isEmpty { throw .validation(errors) }
        return query
    }

    static func cursor(_ position: EventPosition) -> String { KeysetCursor.make(tag: "k", millis: position.createdAt, id: position.id.rawValue) }

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

/// `GET /v1/admin/users` query: `query` (at most 200 characters), `anonymous` (`true`: only
/// anonymous users, `false`: none), `limit` (1–100, default 50) and a keyset `cursor`.
enum UsersQuery {
    static func parse(_ request: Request) throws(GatehouseError) -> (query: String?, anonymous: Bool?, after: AdminUsers.Position?, limit: Int) {
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
        var anonymous: Bool?
        switch request.http.queryValue("anonymous") {
        case nil: break
        case "true": anonymous = true
        case "false": anonymous = false
        default: errors.append(FieldError("anonymous", "Must be true or false."))
        }
        let limit = Page.limit(request, errors: &errors)
        let after = KeysetCursor.read(request, tag: "u", errors: &errors, id: UserID.init(parsing:)).map {
            AdminUsers.Position(createdAt: $0.millis, id: $0.id)
        }
        if !errors.isEmpty { throw .validation(errors) }
        return (query, anonymous, after, limit)
    }

    static func cursor(_ position: AdminUsers.Position) -> String { KeysetCursor.make(tag: "u", millis: position.createdAt, id: position.id.rawValue) }
}

/// `GET /v1/admin/outbox` query: `state` (only `dead`), `app_id` (one app's items), `limit`
/// (1–100, default 50) and a keyset `cursor`.
enum OutboxQuery {
    static func parse(_ request: Request) throws(GatehouseError) -> (app: AppID?, after: DeadLetterPosition?, limit: Int) {
        var errors: [FieldError] = []
        if request.http.queryValue("state") != "dead" {
            errors.append(FieldError("state", "Required: dead (the only state listed)."))
        }
        var app: AppID?
        if let text = request.http.queryValue("app_id") {
            if let id = AppID(parsing: text) { app = id } else { errors.append(FieldError("app_id", "Not an app id (app_…).")) }
        }
        let limit = Page.limit(request, errors: &errors)
        let after = KeysetCursor.read(request, tag: "d", errors: &errors) { DeadLetters.isItemID($0) ? String($0) : nil }.map {
            DeadLetterPosition(createdAt: $0.millis, id: $0.id)
        }
        if !errors.isEmpty { throw .validation(errors) }
        return (app, after, limit)
    }

    static func cursor(_ position: DeadLetterPosition) -> String { KeysetCursor.make(tag: "d", millis: position.createdAt, id: position.id) }

    static func json(_ item: OutboxItemRecord) -> JSON { item.adminJSON }
}

/// `GET /v1/admin/webhooks/deliveries` query: `state` (`queued`, `delivered` or `dead`),
/// `event_type` (a webhook type such as `user.created`, or `webhook.test`), `limit` (1–100,
/// default 50) and a keyset `cursor`.
enum DeliveriesQuery {
    static func parse(_ request: Request) throws(GatehouseError) -> (state: WebhookDeliveryState?, eventType: String?, after: DeadLetterPosition?, limit: Int) {
        var errors: [FieldError] = []
        var state: WebhookDeliveryState?
        if let text = request.http.queryValue("state") {
            if let value = WebhookDeliveryState(rawValue: text) { state = value } else { errors.append(FieldError("state", "One of queued, delivered, dead.")) }
        }
        var eventType: String?
        if let text = request.http.queryValue("event_type") {
            let parts = text.split(separator: ".", omittingEmptySubsequences: false)
            if text.utf8.count <= 64, parts.count == 2, parts.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x5F } }) {
                eventType = text
            } else {
                errors.append(FieldError("event_type", "Not a webhook type, such as user.created or webhook.test."))
            }
        }
        let limit = Page.limit(request, errors: &errors)
        let after = KeysetCursor.read(request, tag: "w", errors: &errors) { DeadLetters.isItemID($0) ? String($0) : nil }.map {
            DeadLetterPosition(createdAt: $0.millis, id: $0.id)
        }
        if !errors.isEmpty { throw .validation(errors) }
        return (state, eventType, after, limit)
    }

    static func cursor(_ position: DeadLetterPosition) -> String { KeysetCursor.make(tag: "w", millis: position.createdAt, id: position.id) }
}

/// A keyset cursor: a place in a list ordered by time and id (`<tag>:<ms>:<id>`, base64url), so
/// pages neither repeat nor skip while items are added. The tag keeps one list's cursor from
/// being taken by another.
enum KeysetCursor {
    static func make(tag: String, millis: Int64, id: String) -> String { Base64URL.encode(Array("\(tag):\(millis):\(id)".utf8)) }

    /// The `cursor` parameter's place, nil when absent; a cursor that is not one of `tag`'s, or
    /// whose id `id` does not parse, is a field error.
    static func read<ID>(
        _ request: Request, tag: String, errors: inout [FieldError], id parse: (Substring) -> ID?
    ) -> (millis: Int64, id: ID)? {
        guard let cursor = request.http.queryValue("cursor") else { return nil }
        guard cursor.utf8.count <= 200, let bytes = Base64URL.decode(cursor), let text = String(validating: bytes, as: UTF8.self),
            case let parts = text.split(separator: ":", omittingEmptySubsequences: false), parts.count == 3, parts[0] == tag,
            let millis = Int64(parts[1]), let id = parse(parts[2])
        else {
            errors.append(FieldError("cursor", "Not a cursor this endpoint gave out."))
            return nil
        }
        return (millis, id)
    }
}
