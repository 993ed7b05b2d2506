import GatehouseCore

/// The `events` table of one app, read newest first (indexes `events_app`, `events_user`,
/// `events_type`).
struct SQLAuditLog: AuditLogStore {
    let database: any SQLDatabase
    let appID: AppID

    func events(_ query: EventQuery) throws -> [Event] {
        var conditions: [SQL] = ["app_id = \(appID)"]
        if let user = query.userID { conditions.append("user_id = \(user)") }
        if let type = query.type { conditions.append("type = \(type.rawValue)") }
        if let after = query.after {
            conditions.append("(created_at < \(after.createdAt) OR (created_at = \(after.createdAt) AND id < \(after.id.rawValue)))")
        }
        let filter = conditions.joined(separator: " AND ")
        return try database.query("""
            SELECT * FROM events WHERE \(filter) ORDER BY created_at DESC, id DESC LIMIT \(Int64(query.limit))
            """).map { row in
            Event(
                type: EventType(rawValue: try row.string("type")), userID: try row.optionalString("user_id").map(UserID.init(unchecked:)),
                sessionID: try row.optionalString("session_id").map(SessionID.init(unchecked:)), ip: try row.optionalString("ip"),
                userAgent: try row.optionalString("user_agent"), data: (try? JSON.parse(Array(try row.string("data").utf8))) ?? [:],
                createdAt: try row.int64("created_at"), id: EventID(unchecked: try row.string("id")))
        }
    }
}

extension SQLAppScopedStore {
    var auditLog: any AuditLogStore { SQLAuditLog(database: database, appID: appID) }
}
