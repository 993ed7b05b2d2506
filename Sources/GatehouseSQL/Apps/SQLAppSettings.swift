import GatehouseCore

/// The configuration of one app (``AppSettingsStore``): the `apps` row, its `app_origins`,
/// `signing_keys` and `app_secret_keys`.
struct SQLAppSettings: AppSettingsStore {
    let database: any SQLDatabase
    let appID: AppID

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

extension SQLAppScopedStore {
    var settings: any AppSettingsStore { SQLAppSettings(database: database, appID: appID) }
}
