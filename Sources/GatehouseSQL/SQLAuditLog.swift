import GatehouseCore

/// The `events` table of one app, read newest first (indexes `events_app`, `events_user`,
/// `events_type`).
struct SQLAuditLog {
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

/// Events are recorded by the scoped store itself (its fan-out goes with them) and read by ``SQLAuditLog``.
extension SQLAppScopedStore: AuditLogStore {
    var auditLog: any AuditLogStore { self }

    func events(_ query: EventQuery) throws -> [Event] { try SQLAuditLog(database: database, appID: appID).events(query) }

    func record(_ event: Event) throws {
        // An event with outbox items commits with them: in a transaction of its own when it is
        // recorded outside a unit of work (in one, `transaction` joins it).
        if let fanOut = fanOut?.current, fanOut.wants(event.type, app: appID) {
            try database.transaction { db in try insertEvent(db, event) }
        } else {
            try database.withConnection { db in try insertEvent(db, event) }
        }
    }

    /// Every audit event is written here, in the transaction of the change it records; its
    /// webhook deliveries (the ``EventFanOut``) are queued on the same connection, so the change,
    /// the event and the deliveries commit together or not at all.
    func insertEvent(_ db: any SQLConnection, _ event: Event) throws {
        try db.execute("""
            INSERT INTO events (id, app_id, type, user_id, session_id, ip, user_agent, data, created_at)
            VALUES (\(event.id.rawValue), \(appID), \(event.type.rawValue), \(event.userID), \(event.sessionID), \(event.ip), \(event.userAgent),
                    \(event.data.serializedString), \(event.createdAt))
            """)
        guard let fanOut = fanOut?.current, fanOut.wants(event.type, app: appID) else { return }
        // Reads through the event's own transaction (they see its change); records nothing further.
        let reader = SQLAppScopedStore(database: TransactionBoundDatabase(db), appID: appID, userChanges: nil)
        for item in try fanOut.items(for: event, app: appID, store: reader) {
            _ = try insertOutboxItem(db, item, now: event.createdAt)
        }
    }
}
