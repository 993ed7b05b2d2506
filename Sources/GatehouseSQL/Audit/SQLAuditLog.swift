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
        // Reported, it may queue outbox items that commit with it: in a transaction of its own
        // outside a unit of work (in one, `transaction` joins it).
        if ledger != nil {
            try database.transaction { db in try insertEvent(db, event) }
        } else {
            try database.withConnection { db in try insertEvent(db, event) }
        }
    }

    /// Every audit event is written here, in the transaction of the change it records, and
    /// reported to the ledger, which queues its webhook deliveries in the same transaction: the
    /// change, the event and the deliveries commit together or not at all.
    func insertEvent(_ db: any SQLConnection, _ event: Event) throws {
        try db.execute("""
            INSERT INTO events (id, app_id, type, user_id, session_id, ip, user_agent, data, created_at)
            VALUES (\(event.id.rawValue), \(appID), \(event.type.rawValue), \(event.userID), \(event.sessionID), \(event.ip), \(event.userAgent),
                    \(event.data.serializedString), \(event.createdAt))
            """)
        guard let ledger else { return }
        // Reads and queues through the event's own transaction (they see its change).
        try ledger.recorded(event, in: inTransaction ? self : SQLAppScopedStore(database: TransactionBoundDatabase(db), appID: appID, userChanges: nil, ledger: ledger))
    }
}
