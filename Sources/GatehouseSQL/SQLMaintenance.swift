import Foundation
import GatehouseCore
import Synchronization

extension SQLStore: MaintenanceStore {
    /// How long a round's turn lasts without being renewed; each batch renews it (ADR 0034).
    /// A node that dies mid-round holds the turn at most this long.
    public static let maintenanceLeaseMillis: Int64 = 60_000

    public func exclusively<T>(_ round: (any MaintenanceRound) throws -> T) throws -> T? {
        // One round per process whatever the database (a test may run one beside the jobs thread).
        guard maintenanceUnderWay.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return nil }
        defer { maintenanceUnderWay.store(false, ordering: .releasing) }
        switch database.dialect {
        case .sqlite:
            // One process serves an SQLite file: its own guard above is the cluster's.
            return try round(SQLMaintenanceRound(database: database, lease: nil))
        case .postgres:
            // The turn is a row (the lock as data), not a session's advisory lock: through a
            // transaction pooler the statements of a round may each run on another server
            // connection, so nothing may outlive a transaction (ADR 0034). Taken when free or run
            // out, renewed before each batch, given back at the end.
            let lease = MaintenanceLease(database: database, holder: UUID().uuidString)
            guard try lease.take() else { return nil }
            defer { lease.giveBack() }
            return try round(SQLMaintenanceRound(database: database, lease: lease))
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

/// The maintenance round's turn on PostgreSQL: the one row of `maintenance_lease` (migration 0028),
/// its holder and when its lease runs out, in the database's clock (the nodes' clocks may differ).
struct MaintenanceLease {
    let database: any SQLDatabase
    /// This round's own name, random.
    let holder: String
    static let name = "maintenance"

    private static let now: SQL = "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"

    /// Takes the turn if no one holds it or its holder's lease has run out; one statement, so two
    /// nodes trying at once cannot both succeed (the second waits for the first's row and finds
    /// it held).
    func take() throws -> Bool {
        let rows = try database.query("""
            INSERT INTO maintenance_lease (name, holder, expires_at) VALUES (\(Self.name), \(holder), \(Self.now) + \(SQLStore.maintenanceLeaseMillis))
            ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
            WHERE maintenance_lease.expires_at <= \(Self.now)
            RETURNING holder
            """)
        return rows.count == 1
    }

    /// Extends the lease in a batch's transaction (`db`): the lease row stays locked until the
    /// batch commits, so no other node takes the turn while it runs. Throws
    /// ``MaintenanceTurnLost`` when the turn is no longer this round's.
    func renew(in db: any SQLConnection) throws {
        let renewed = try db.execute("""
            UPDATE maintenance_lease SET expires_at = \(Self.now) + \(SQLStore.maintenanceLeaseMillis)
            WHERE name = \(Self.name) AND holder = \(holder) AND expires_at > \(Self.now)
            """)
        guard renewed == 1 else { throw MaintenanceTurnLost() }
    }

    /// Ends the turn now rather than at the lease's end; a failure leaves the lease to run out.
    func giveBack() {
        _ = try? database.execute("DELETE FROM maintenance_lease WHERE name = \(Self.name) AND holder = \(holder)")
    }
}

/// A maintenance round's access to the database: short transactions, one a batch; on PostgreSQL
/// each renews the round's lease first; on SQLite they are `BEGIN IMMEDIATE` and queue with other writers.
struct SQLMaintenanceRound: MaintenanceRound {
    let database: any SQLDatabase
    let lease: MaintenanceLease?

    func delete(_ task: MaintenanceTask, in window: MaintenanceWindow, limit: Int) throws -> Int {
        let statement = SQLStore.maintenanceStatement(task, in: window, limit: limit, dialect: database.dialect)
        // Each batch its own short transaction, so no row lock outlives it (and under a pooler it
        // gets the transaction's statement timeout). On PostgreSQL the lease is renewed in the
        // same transaction: its row stays locked until the batch commits, so another node's
        // `take` waits for the batch rather than overlapping it.
        return try database.transaction { db in
            try lease?.renew(in: db)
            return try db.execute(statement)
        }
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
