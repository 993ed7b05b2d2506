import GatehouseCore
import GatehouseCrypto
import Synchronization

/// The domain's `Store`, written once against `SQLDatabase` for SQLite and PostgreSQL.
public final class SQLStore: Store {
    public let database: any SQLDatabase
    public let apps: any AppCatalog
    public let outbox: any OutboxStore
    private let userChanges: (any UserChangeObserver)?
    /// Set while this process runs a maintenance round (``exclusively(_:)``).
    let maintenanceUnderWay = Atomic<Bool>(false)

    /// - Parameter userChanges: told, after the commit, of every change to a user's account.
    public init(database: any SQLDatabase, userChanges: (any UserChangeObserver)? = nil) {
        self.database = database
        self.apps = SQLAppCatalog(database: database)
        self.outbox = SQLOutbox(database: database)
        self.userChanges = userChanges
    }

    public func app(_ id: AppID) -> any AppScopedStore { SQLAppScopedStore(database: database, appID: id, userChanges: userChanges) }

    public func ping() -> Bool { database.ping() }

    public var connections: (open: Int, inUse: Int, waiting: Int) {
        let pool = database.poolStatistics
        return (pool.size, pool.inUse, pool.waiting)
    }

    public func serverValue(_ name: String) throws -> String? {
        try database.query("SELECT value FROM server_values WHERE name = \(name)").first?.string("value")
    }

    public func sessionsEnded(since: Int64?, lookBack: Int64) throws -> (ended: [(SessionID, Int64)], databaseNow: Int64) {
        let now = try databaseNow()
        let start = since ?? now - lookBack
        // `ended_db_at IS NULL`: ended by a node of the previous version during an upgrade (migration 0005).
        let ended = try database.query("""
            SELECT id, COALESCE(ended_db_at, ended_at) AS ended FROM sessions
            WHERE ended_db_at >= \(start) OR (ended_db_at IS NULL AND ended_at >= \(start))
            """).map { (SessionID(unchecked: try $0.string("id")), try $0.int64("ended")) }
        return (ended, now)
    }

    public func usersChanged(since: Int64?, lookBack: Int64) throws -> (changed: [(AppID, UserID)], databaseNow: Int64) {
        let now = try databaseNow()
        let changed = try database.query("SELECT app_id, id FROM users WHERE changed_at >= \(since ?? now - lookBack)").map {
            (AppID(unchecked: try $0.string("app_id")), UserID(unchecked: try $0.string("id")))
        }
        return (changed, now)
    }

    /// The database's clock, read first by the polls: whatever changes after this reading is
    /// stamped at or after it, so the next poll, which starts from it (less an overlap), finds it.
    private func databaseNow() throws -> Int64 {
        try database.query("SELECT \(database.dialect.nowMillis) AS now").first?.int64("now") ?? 0
    }

    public func accountsDueForPurge(now: Int64, limit: Int) throws -> [(AppID, UserID)] {
        try database.query("""
            SELECT app_id, id FROM users WHERE deletion_due_at <= \(now) AND deleted_at IS NULL ORDER BY deletion_due_at LIMIT \(Int64(limit))
            """).map { (AppID(unchecked: try $0.string("app_id")), UserID(unchecked: try $0.string("id"))) }
    }

    public func appsWithAnonymousUsers() throws -> [AppID] {
        // A loose index scan of `users_anonymous_seen` (migration 0025): one probe per app that has
        // anonymous users, not a walk over all of them (which a DISTINCT would be, on both databases).
        try database.query("""
            WITH RECURSIVE anonymous_apps(app_id) AS (
                SELECT (SELECT app_id FROM users WHERE is_anonymous = 1 AND deleted_at IS NULL ORDER BY app_id LIMIT 1)
                UNION ALL
                SELECT (SELECT app_id FROM users WHERE is_anonymous = 1 AND deleted_at IS NULL AND app_id > anonymous_apps.app_id ORDER BY app_id LIMIT 1)
                FROM anonymous_apps WHERE anonymous_apps.app_id IS NOT NULL
            )
            SELECT app_id FROM anonymous_apps WHERE app_id IS NOT NULL
            """).map { AppID(unchecked: try $0.string("app_id")) }
    }

    public func purgeErasedAccounts(before: Int64, limit: Int) throws -> Int {
        // Its sessions, their refresh tokens and its login codes go with the row (ON DELETE CASCADE).
        try database.execute("""
            DELETE FROM users WHERE id IN (SELECT id FROM users WHERE deleted_at < \(before) LIMIT \(Int64(limit)))
            """)
    }

    public func setServerValueIfAbsent(_ name: String, _ value: String) throws {
        try database.execute("INSERT INTO server_values (name, value) VALUES (\(name), \(value)) ON CONFLICT (name) DO NOTHING")
    }
}

extension AppID: SQLBindable {
    public var sqlValue: SQLValue { .text(rawValue) }
}

struct SQLAppScopedStore: AppScopedStore {
    let database: any SQLDatabase
    let appID: AppID
    let userChanges: (any UserChangeObserver)?
    /// In a unit of work: told of every event recorded, session ended and outbox item queued.
    var ledger: TransactionLedger? = nil
}

extension SQLError: StoreFailure {
    /// Unreachable, busy, or a commit not confirmed durable: worth a retry.
    public var isUnavailable: Bool { kind == .connection || kind == .busy || kind == .commitUnconfirmed }
    public var isInvalidValue: Bool { kind == .invalidValue }
}
