import GatehouseCore

/// The platform-level queries of apps (not scoped to one app).
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
            throw AppConflict.appKeyTaken
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
