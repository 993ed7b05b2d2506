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

struct SQLAppCatalog: AppCatalog {
    let database: any SQLDatabase

    func insert(_ app: AppRecord, allowedOrigins: [String], secretKey: SecretKeyRecord?, signingKeys: [SigningKeyRecord]) throws {
        do {
            try database.transaction { db in
                try db.execute("""
                    INSERT INTO apps (id, app_key, settings, version, source, source_checksum, created_at, updated_at)
                    VALUES (\(app.id), \(app.appKey), \(app.settingsJSON), \(app.version), \(app.source), \(app.sourceChecksum),
                            \(app.createdAt), \(app.updatedAt))
                    """)
                try replaceOrigins(db, app: app.id, origins: allowedOrigins)
                if let secretKey { try insertSecretKey(db, app: app.id, secretKey) }
                for key in signingKeys { try insertSigningKey(db, app: app.id, key) }
            }
        } catch let error as SQLError where error.kind == .uniqueViolation && (error.constraint ?? "").contains("app_key") {
            throw GatehouseError(.appKeyTaken, "Another app uses this app key.")
        }
    }

    func find(appKey: String) throws -> AppRecord? {
        try database.query("SELECT * FROM apps WHERE app_key = \(appKey)").first.map(appRecord)
    }

    func find(id: AppID) throws -> AppRecord? {
        try database.query("SELECT * FROM apps WHERE id = \(id)").first.map(appRecord)
    }

    func all() throws -> [AppRecord] {
        try database.query("SELECT * FROM apps ORDER BY created_at, id").map(appRecord)
    }

    func find(secretKeyHash: String, now: Int64) throws -> AppRecord? {
        try database.query("""
            SELECT apps.* FROM app_secret_keys JOIN apps ON apps.id = app_secret_keys.app_id
            WHERE app_secret_keys.key_hash = \(secretKeyHash)
              AND (app_secret_keys.expires_at IS NULL OR app_secret_keys.expires_at > \(now))
            """).first.map(appRecord)
    }

    func version(of id: AppID) throws -> Int64? {
        try database.query("SELECT version FROM apps WHERE id = \(id)").first?.int64("version")
    }

    func isOriginAllowedByAnyApp(_ origin: String) throws -> Bool {
        try !database.query("SELECT 1 AS found FROM app_origins WHERE origin = \(origin) LIMIT 1").isEmpty
    }

    func forgetLegacySourceChecksums() throws {
        try database.execute("UPDATE apps SET legacy_source_checksum = NULL WHERE legacy_source_checksum IS NOT NULL")
    }
}

struct SQLAppScopedStore: AppScopedStore {
    let database: any SQLDatabase
    let appID: AppID
    let userChanges: (any UserChangeObserver)?
    /// In a unit of work: told of every event recorded, session ended and outbox item queued.
    var ledger: TransactionLedger? = nil

    func updateSettings(json: String, allowedOrigins: [String], sourceChecksum: String?, expectedVersion: Int64?, now: Int64) throws -> AppRecord? {
        try database.transaction { db in
            let sameVersion: SQL = expectedVersion.map { "version = \($0)" } ?? "TRUE"
            // An admin's change keeps an earlier version's checksum for the next apply to compare with.
            let legacy: SQL = sourceChecksum == nil ? "" : ", legacy_source_checksum = NULL"
            let rows = try db.query("""
                UPDATE apps SET settings = \(json), source_checksum = \(sourceChecksum)\(legacy), version = version + 1, updated_at = \(now)
                WHERE id = \(appID) AND \(sameVersion) RETURNING *
                """)
            guard let row = rows.first else { return nil }
            try replaceOrigins(db, app: appID, origins: allowedOrigins)
            return try appRecord(row)
        }
    }

    func setDisabled(at disabledAt: Int64?, now: Int64) throws -> AppRecord? {
        let otherState: SQL = disabledAt == nil ? "disabled_at IS NOT NULL" : "disabled_at IS NULL"
        return try database.query("""
            UPDATE apps SET disabled_at = \(disabledAt), version = version + 1, updated_at = \(now)
            WHERE id = \(appID) AND \(otherState) RETURNING *
            """).first.map(appRecord)
    }

    func keepSourceChecksum(_ checksum: String) throws {
        try database.execute("UPDATE apps SET source_checksum = \(checksum), legacy_source_checksum = NULL WHERE id = \(appID)")
    }

    func signingKeys(now: Int64) throws -> [SigningKeyRecord] {
        try database.query("""
            SELECT * FROM signing_keys WHERE app_id = \(appID) AND (expires_at IS NULL OR expires_at > \(now))
            ORDER BY created_at
            """).map(signingKeyRecord)
    }

    func rotateSigningKeys(_ rotation: SigningKeyRotation, now: Int64) throws -> SigningKeyRotation.Outcome {
        try database.transaction { db in
            // Lock the app row first so that two rotations at once are serialised.
            guard try db.execute("UPDATE apps SET version = version + 1, updated_at = \(now) WHERE id = \(appID)") == 1 else { return .noNextKey }
            // The newest key was published by the last rotation (or the app's creation).
            if let newest = try db.query("SELECT max(created_at) AS newest FROM signing_keys WHERE app_id = \(appID)").first?.optionalInt64("newest"),
                newest + rotation.minimumIntervalMillis > now
            {
                throw SigningKeyRotation.TooSoon(retryAfterMillis: newest + rotation.minimumIntervalMillis - now)
            }
            guard let next = try db.query("SELECT * FROM signing_keys WHERE app_id = \(appID) AND state = 'next' ORDER BY created_at DESC LIMIT 1").first
            else { return .noNextKey }
            let promoted = try signingKeyRecord(next)
            if rotation.revokePrevious {
                try db.execute("DELETE FROM signing_keys WHERE app_id = \(appID) AND state IN ('current', 'retired')")
            } else {
                try db.execute("DELETE FROM signing_keys WHERE app_id = \(appID) AND expires_at IS NOT NULL AND expires_at <= \(now)")
                try db.execute("""
                    UPDATE signing_keys SET state = 'retired', expires_at = \(rotation.retiredExpiresAt)
                    WHERE app_id = \(appID) AND state = 'current'
                    """)
                // Only the newest few retired keys stay published: each one costs every verifier.
                try db.execute("""
                    DELETE FROM signing_keys WHERE app_id = \(appID) AND state = 'retired' AND kid NOT IN (
                        SELECT kid FROM signing_keys WHERE app_id = \(appID) AND state = 'retired'
                        ORDER BY created_at DESC, kid LIMIT \(Int64(rotation.maxRetired)))
                    """)
            }
            try db.execute("UPDATE signing_keys SET state = 'current' WHERE app_id = \(appID) AND kid = \(promoted.kid)")
            try insertSigningKey(db, app: appID, rotation.newNext)
            var current = promoted
            current.state = .current
            return .rotated(current)
        }
    }

    func addSecretKey(_ key: SecretKeyRecord, othersExpireAt: Int64) throws {
        try database.transaction { db in
            try db.execute("""
                UPDATE app_secret_keys SET expires_at = \(othersExpireAt)
                WHERE app_id = \(appID) AND (expires_at IS NULL OR expires_at > \(othersExpireAt))
                """)
            try insertSecretKey(db, app: appID, key)
        }
    }
}

// MARK: - Rows

private func replaceOrigins(_ db: any SQLConnection, app: AppID, origins: [String]) throws {
    try db.execute("DELETE FROM app_origins WHERE app_id = \(app)")
    for origin in Set(origins) {
        try db.execute("INSERT INTO app_origins (app_id, origin) VALUES (\(app), \(origin))")
    }
}

private func insertSecretKey(_ db: any SQLConnection, app: AppID, _ key: SecretKeyRecord) throws {
    try db.execute("""
        INSERT INTO app_secret_keys (id, app_id, key_hash, hint, created_at, expires_at)
        VALUES (\(key.id), \(app), \(key.keyHash), \(key.hint), \(key.createdAt), \(key.expiresAt))
        """)
}

private func insertSigningKey(_ db: any SQLConnection, app: AppID, _ key: SigningKeyRecord) throws {
    try db.execute("""
        INSERT INTO signing_keys (kid, app_id, algorithm, private_key, public_jwk, state, created_at, expires_at)
        VALUES (\(key.kid), \(app), \(key.algorithm.rawValue), \(key.sealedPrivateKey), \(key.publicJWK), \(key.state.rawValue),
                \(key.createdAt), \(key.expiresAt))
        """)
}

private func appRecord(_ row: SQLRow) throws -> AppRecord {
    AppRecord(
        id: AppID(unchecked: try row.string("id")), appKey: try row.string("app_key"), settingsJSON: try row.string("settings"),
        version: try row.int64("version"), source: try row.string("source"), sourceChecksum: try row.optionalString("source_checksum"),
        legacySourceChecksum: try row.optionalString("legacy_source_checksum"),
        createdAt: try row.int64("created_at"), updatedAt: try row.int64("updated_at"), disabledAt: try row.optionalInt64("disabled_at"))
}

private func signingKeyRecord(_ row: SQLRow) throws -> SigningKeyRecord {
    let algorithmText = try row.string("algorithm")
    let stateText = try row.string("state")
    guard let algorithm = SignatureAlgorithm(rawValue: algorithmText), let state = SigningKeyState(rawValue: stateText) else {
        throw SQLError(kind: .decoding, message: "signing_keys row has algorithm \(algorithmText) / state \(stateText)")
    }
    return SigningKeyRecord(
        kid: try row.string("kid"), algorithm: algorithm, sealedPrivateKey: try row.string("private_key"),
        publicJWK: try row.string("public_jwk"), state: state, createdAt: try row.int64("created_at"),
        expiresAt: try row.optionalInt64("expires_at"))
}

extension SQLError: StoreFailure {
    /// Unreachable or busy: worth a retry.
    public var isUnavailable: Bool { kind == .connection || kind == .busy }
    public var isInvalidValue: Bool { kind == .invalidValue }
}
