import GatehouseCore
import GatehouseCrypto

/// The outbox table (migration 0007), shared by every node's worker.
struct SQLOutbox: OutboxStore {
    let database: any SQLDatabase

    func enqueue(_ item: NewOutboxItem, now: Int64) throws -> Bool {
        try database.withConnection { db in try insertOutboxItem(db, item, now: now) }
    }

    func claim(kinds: [OutboxKind], limit: Int, leaseMillis: Int64, node: String, now: Int64) throws -> [OutboxItem] {
        guard !kinds.isEmpty else { return [] }
        let due: SQL = """
            delivered_at IS NULL AND dead_at IS NULL AND next_attempt_at <= \(now) AND (lease_until IS NULL OR lease_until <= \(now))
              AND kind IN (\(list: kinds.map(\.rawValue)))
            """
        // Cheap and shared first: most polls find nothing due, and on SQLite a claim is a write.
        guard try !database.query("SELECT id FROM outbox WHERE \(due) LIMIT 1").isEmpty else { return [] }
        // PostgreSQL: rows another node is claiming are skipped, not waited for. SQLite: the
        // transaction is BEGIN IMMEDIATE, so one claim runs at a time.
        let skipLocked: SQL = database.dialect == .postgres ? " FOR UPDATE SKIP LOCKED" : ""
        return try database.transaction { db in
            try db.query("""
                UPDATE outbox SET lease_until = \(now + leaseMillis), leased_by = \(node)
                WHERE id IN (SELECT id FROM outbox WHERE \(due) ORDER BY next_attempt_at LIMIT \(Int64(limit))\(skipLocked))
                RETURNING *
                """).map(outboxItem)
        }
    }

    func markDelivered(_ id: String, node: String, now: Int64) throws {
        try database.execute("""
            UPDATE outbox SET delivered_at = \(now), attempts = attempts + 1, last_error = NULL, lease_until = NULL, leased_by = NULL,
                              payload = CASE WHEN sealed = 1 THEN '' ELSE payload END
            WHERE id = \(id) AND leased_by = \(node)
            """)
    }

    func markRetry(_ id: String, node: String, nextAttemptAt: Int64, error: String, now: Int64) throws {
        try database.execute("""
            UPDATE outbox SET attempts = attempts + 1, next_attempt_at = \(nextAttemptAt), last_error = \(String(error.prefix(1000))),
                              lease_until = NULL, leased_by = NULL
            WHERE id = \(id) AND leased_by = \(node)
            """)
    }

    func markDead(_ id: String, node: String, error: String, now: Int64, event: (app: AppID, event: Event)?) throws -> Bool {
        try database.transaction { db in
            guard try db.execute("""
                UPDATE outbox SET attempts = attempts + 1, dead_at = \(now), last_error = \(String(error.prefix(1000))), lease_until = NULL,
                                  leased_by = NULL, payload = CASE WHEN sealed = 1 THEN '' ELSE payload END
                WHERE id = \(id) AND leased_by = \(node) AND dead_at IS NULL
                """) == 1
            else { return false }
            if let event {
                try SQLAppScopedStore(database: TransactionBoundDatabase(db), appID: event.app, userChanges: nil).record(event.event)
            }
            return true
        }
    }

    func release(_ ids: [String], node: String) throws {
        for id in ids {
            try database.execute("UPDATE outbox SET lease_until = NULL, leased_by = NULL WHERE id = \(id) AND leased_by = \(node)")
        }
    }

    func statistics(now: Int64) throws -> OutboxStatistics {
        let row = try database.query("""
            SELECT
              (SELECT count(*) FROM outbox WHERE delivered_at IS NULL AND dead_at IS NULL) AS queued,
              (SELECT count(*) FROM outbox WHERE delivered_at IS NULL AND dead_at IS NULL AND lease_until > \(now)) AS in_flight,
              (SELECT count(*) FROM outbox WHERE dead_at IS NOT NULL) AS dead,
              (SELECT min(next_attempt_at) FROM outbox WHERE delivered_at IS NULL AND dead_at IS NULL AND next_attempt_at <= \(now)
                 AND (lease_until IS NULL OR lease_until <= \(now))) AS oldest_due
            """)[0]
        let oldestDue = try row.optionalInt64("oldest_due")
        return OutboxStatistics(
            queued: Int(try row.int64("queued")), inFlight: Int(try row.int64("in_flight")), dead: Int(try row.int64("dead")),
            oldestDueAgeMillis: oldestDue.map { max(0, now - $0) } ?? 0)
    }
}

/// Queues an outbox item on `db`: inside a store method's transaction, so the item commits with
/// the change that causes it, or not at all. False when its idempotency key is queued already.
func insertOutboxItem(_ db: any SQLConnection, _ item: NewOutboxItem, now: Int64) throws -> Bool {
    try db.execute("""
        INSERT INTO outbox (id, app_id, kind, idempotency_key, payload, sealed, attempts, next_attempt_at, created_at)
        VALUES (\("obx_" + Digest.hex(SecureRandom.bytes(15))), \(item.appID), \(item.kind.rawValue), \(item.idempotencyKey), \(item.payload),
                \(item.sealed), 0, \(item.dueAt ?? now), \(now))
        ON CONFLICT (idempotency_key) DO NOTHING
        """) == 1
}

/// Removes an item no worker has attempted or holds; whether there was one.
func withdrawOutboxItem(_ db: any SQLConnection, app: AppID, idempotencyKey: String) throws -> Bool {
    try db.execute("""
        DELETE FROM outbox WHERE app_id = \(app) AND idempotency_key = \(idempotencyKey) AND attempts = 0 AND delivered_at IS NULL AND dead_at IS NULL AND lease_until IS NULL
        """) == 1
}

private func outboxItem(_ row: SQLRow) throws -> OutboxItem {
    OutboxItem(
        id: try row.string("id"), appID: try row.optionalString("app_id").map(AppID.init(unchecked:)), kind: OutboxKind(rawValue: try row.string("kind")),
        idempotencyKey: try row.string("idempotency_key"), payload: try row.string("payload"), sealed: try row.bool("sealed"),
        attempts: Int(try row.int64("attempts")), createdAt: try row.int64("created_at"))
}
