import GatehouseCore
import Synchronization

extension SQLStore: MaintenanceStore {
    /// The first half of the session-level advisory lock that makes a maintenance round the
    /// cluster's only one; the second is `hashtext(current_schema())`, so that installations in
    /// two schemas of one database (the tests' do) do not take each other's turns.
    public static let maintenanceLockClass: Int64 = 0x4D61_696E  // "Main"

    public func exclusively<T>(_ round: (any MaintenanceRound) throws -> T) throws -> T? {
        // One round per process whatever the database (a test may run one beside the jobs thread).
        guard maintenanceUnderWay.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return nil }
        defer { maintenanceUnderWay.store(false, ordering: .releasing) }
        switch database.dialect {
        case .sqlite:
            // One process serves an SQLite file: its own guard above is the cluster's.
            return try round(SQLMaintenanceRound(database: database, lockHolder: nil))
        case .postgres:
            // A session-level lock on one pooled connection, held for the whole round and released
            // before the connection goes back to the pool; the round's statements run on that
            // connection, each in its own (autocommit) transaction, so no row lock outlives its
            // batch. Were the connection lost, PostgreSQL drops the lock with the session. A
            // transaction-level lock per batch would let two nodes interleave their batches.
            return try database.withConnection { connection in
                let lock: SQL = "pg_try_advisory_lock(CAST(\(Self.maintenanceLockClass) AS INTEGER), hashtext(current_schema()))"
                guard try connection.query("SELECT CASE WHEN \(lock) THEN 1 ELSE 0 END AS locked").first?.bool("locked") == true
                else { return nil }
                // All, not one: a lock left by a round whose unlock failed would otherwise stay on
                // this pooled connection (session locks stack) and keep every node out for good.
                defer { _ = try? connection.query("SELECT 1 AS released FROM (SELECT pg_advisory_unlock_all()) AS unlocked") }
                return try round(SQLMaintenanceRound(database: database, lockHolder: connection))
            }
        }
    }

    /// The statement that deletes one batch of `task` (public for the test that explains each plan).
    public static func maintenanceStatement(_ task: MaintenanceTask, in window: MaintenanceWindow, limit: Int, dialect: SQLDialect) -> SQL {
        let (from, to, limit) = (window.from, window.to, Int64(limit))
        let rowAddress = dialect == .postgres ? "ctid" : "rowid"
        // A batch picks the oldest due rows in the order of the time column's index (PostgreSQL
        // then walks the index even when most of a table is due, as in the first round after an
        // upgrade, rather than scanning the table for each batch) and deletes them by their
        // physical address (SQLite's rowid, PostgreSQL's ctid), never walking the range again.
        // Rows that others write (a rate-limit window starting anew, a nonce taken over, a code
        // sent) are locked as they are picked on PostgreSQL, skipping any another transaction
        // holds: a picked row cannot change before it goes, and no batch waits for a request.
        func batch(_ table: String, by column: String, _ condition: SQL, othersWrite: Bool = false) -> SQL {
            let lock = othersWrite && dialect == .postgres ? " FOR UPDATE SKIP LOCKED" : ""
            return picked(table, """
                SELECT \(unsafeSQL: rowAddress) FROM \(unsafeSQL: table) WHERE \(condition) ORDER BY \(unsafeSQL: column) LIMIT \(limit)\(unsafeSQL: lock)
                """)
        }
        func picked(_ table: String, _ rows: SQL) -> SQL {
            switch dialect {
            case .sqlite: "DELETE FROM \(unsafeSQL: table) WHERE rowid IN (\(rows))"
            case .postgres: "DELETE FROM \(unsafeSQL: table) WHERE ctid = ANY(ARRAY(\(rows)))"
            }
        }
        func tokens(ofSessionsBy column: String) -> SQL {
            // The tokens of a session that is over: no one writes them any more.
            picked("refresh_tokens", """
                SELECT refresh_tokens.\(unsafeSQL: rowAddress) FROM sessions JOIN refresh_tokens ON refresh_tokens.session_id = sessions.id
                WHERE sessions.\(unsafeSQL: column) >= \(from) AND sessions.\(unsafeSQL: column) < \(to) ORDER BY sessions.\(unsafeSQL: column) LIMIT \(limit)
                """)
        }
        switch task {
        case .tokensOfEndedSessions: return tokens(ofSessionsBy: "ended_at")
        case .tokensOfExpiredSessions: return tokens(ofSessionsBy: "expires_at")
        case .endedSessions: return batch("sessions", by: "ended_at", "ended_at >= \(from) AND ended_at < \(to)")
        case .expiredSessions: return batch("sessions", by: "expires_at", "expires_at >= \(from) AND expires_at < \(to)")
        case .webFlows: return batch("web_flows", by: "expires_at", "expires_at >= \(from) AND expires_at < \(to)")
        case .loginCodes: return batch("login_codes", by: "expires_at", "expires_at >= \(from) AND expires_at < \(to)")
        case .mfaChallenges: return batch("mfa_challenges", by: "expires_at", "expires_at >= \(from) AND expires_at < \(to)")
        case .emailCodes:
            return batch(
                "email_codes", by: "last_sent_at", "last_sent_at >= \(from) AND last_sent_at < \(to) AND window_start < \(to) AND expires_at < \(to)", othersWrite: true)
        case .providerNonces: return batch("provider_nonces", by: "expires_at", "expires_at >= \(from) AND expires_at < \(to)", othersWrite: true)
        case .webauthnChallenges: return batch("webauthn_challenges", by: "expires_at", "expires_at >= \(from) AND expires_at < \(to)")
        case .appleNotifications: return batch("apple_notifications", by: "received_at", "received_at >= \(from) AND received_at < \(to)")
        case .rateLimits: return batch("rate_limits", by: "window_start", "window_start >= \(from) AND window_start < \(to)", othersWrite: true)
        case .deliveredOutbox:
            return batch("outbox", by: "delivered_at", "delivered_at IS NOT NULL AND delivered_at >= \(from) AND delivered_at < \(to)")
        case .deadOutboxPayloads:
            // An update, not a delete: the dead item stays listed, its secret goes. The rows still
            // to erase are those of the partial index outbox_dead_sealed (0018): erased ones leave it.
            // Locked as picked on PostgreSQL (a retry by hand may be taking the same row); the
            // outer conditions hold for a row a retry took between the pick and the update.
            let lock = dialect == .postgres ? " FOR UPDATE SKIP LOCKED" : ""
            let rows: SQL = """
                SELECT \(unsafeSQL: rowAddress) FROM outbox WHERE dead_at IS NOT NULL AND sealed = 1 AND payload <> ''
                  AND dead_at >= \(from) AND dead_at < \(to) ORDER BY dead_at LIMIT \(limit)\(unsafeSQL: lock)
                """
            let picked: SQL = dialect == .postgres ? "ctid = ANY(ARRAY(\(rows)))" : "rowid IN (\(rows))"
            return "UPDATE outbox SET payload = '' WHERE \(picked) AND dead_at IS NOT NULL AND dead_at < \(to)"
        case .events: return batch("events", by: "created_at", "created_at >= \(from) AND created_at < \(to)")
        case .outboxDestinations:
            return batch("outbox_destinations", by: "updated_at", "updated_at >= \(from) AND updated_at < \(to)", othersWrite: true)
        }
    }
}

/// A maintenance round's access to the database: on PostgreSQL the connection that holds the
/// advisory lock; on SQLite short `BEGIN IMMEDIATE` transactions that queue with other writers.
struct SQLMaintenanceRound: MaintenanceRound {
    let database: any SQLDatabase
    let lockHolder: (any SQLConnection)?

    func delete(_ task: MaintenanceTask, in window: MaintenanceWindow, limit: Int) throws -> Int {
        let statement = SQLStore.maintenanceStatement(task, in: window, limit: limit, dialect: database.dialect)
        if let lockHolder { return try lockHolder.execute(statement) }
        return try database.transaction { db in try db.execute(statement) }
    }

    func compact(pagesPerStep: Int) throws -> Int {
        // 2 = INCREMENTAL. A file made before it was the default (0 = NONE) reuses its free pages
        // but does not shrink until a one-time VACUUM converts it (docs/operations.md, ADR 0015).
        guard database.dialect == .sqlite, try database.query("PRAGMA auto_vacuum").first?.int64("auto_vacuum") == 2 else { return 0 }
        func freePages() throws -> Int64 { try database.query("PRAGMA freelist_count").first?.int64("freelist_count") ?? 0 }
        var freed = 0
        var free = try freePages()
        // A step at a time, each a short write transaction; stops when a step frees nothing.
        while free > 0 {
            try database.transaction { db in try db.executeScript("PRAGMA incremental_vacuum(\(pagesPerStep))") }
            let left = try freePages()
            guard left < free else { break }
            freed += Int(free - left)
            free = left
        }
        // The file shrinks when the WAL is checkpointed over it; a passive one waits for no reader.
        if freed > 0 { try database.withConnection { db in try db.executeScript("PRAGMA wal_checkpoint(PASSIVE)") } }
        return freed
    }
}
