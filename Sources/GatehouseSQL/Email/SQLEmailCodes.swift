import GatehouseCore

/// The `email_codes` table (migration 0008) of one app.
struct SQLEmailCodes: EmailCodeStore {
    let database: any SQLDatabase
    let appID: AppID

    func lock(purpose: EmailPurpose, subject: String, create: Bool) throws -> EmailCodeRecord? {
        try database.withConnection { db in
            if create {
                try db.execute("""
                    INSERT INTO email_codes (app_id, purpose, subject) VALUES (\(appID), \(purpose.rawValue), \(subject))
                    ON CONFLICT (app_id, purpose, subject) DO NOTHING
                    """)
            }
            let forUpdate: SQL = db.dialect == .postgres ? " FOR UPDATE" : ""
            return try db.query("""
                SELECT * FROM email_codes WHERE app_id = \(appID) AND purpose = \(purpose.rawValue) AND subject = \(subject)\(forUpdate)
                """).first.map { row in
                EmailCodeRecord(
                    purpose: purpose, subject: subject, userID: try row.optionalString("user_id").map(UserID.init(unchecked:)),
                    codeHash: try row.optionalString("code_hash"), failures: Int(try row.int64("failures")), expiresAt: try row.int64("expires_at"),
                    lastSentAt: try row.int64("last_sent_at"), windowStart: try row.int64("window_start"), windowSends: Int(try row.int64("window_sends")))
            }
        }
    }

    func save(_ record: EmailCodeRecord) throws {
        try database.execute("""
            INSERT INTO email_codes (app_id, purpose, subject, user_id, code_hash, failures, expires_at, last_sent_at, window_start, window_sends)
            VALUES (\(appID), \(record.purpose.rawValue), \(record.subject), \(record.userID), \(record.codeHash), \(Int64(record.failures)),
                    \(record.expiresAt), \(record.lastSentAt), \(record.windowStart), \(Int64(record.windowSends)))
            ON CONFLICT (app_id, purpose, subject) DO UPDATE SET
                user_id = excluded.user_id, code_hash = excluded.code_hash, failures = excluded.failures, expires_at = excluded.expires_at,
                last_sent_at = excluded.last_sent_at, window_start = excluded.window_start, window_sends = excluded.window_sends
            """)
    }

    func purge(before: Int64) throws {
        let stale: SQL = "app_id = \(appID) AND last_sent_at < \(before) AND window_start < \(before) AND expires_at < \(before)"
        guard database.dialect == .postgres else {
            try database.execute("DELETE FROM email_codes WHERE \(stale)")
            return
        }
        // Rows another transaction holds (a send's, an address lock) are skipped, not waited for:
        // two purges never wait on each other's rows, and a held lock is never deleted under it.
        try database.execute("""
            DELETE FROM email_codes WHERE (app_id, purpose, subject) IN (
                SELECT app_id, purpose, subject FROM email_codes WHERE \(stale) FOR UPDATE SKIP LOCKED)
            """)
    }
}

extension SQLAppScopedStore {
    var emailCodes: any EmailCodeStore { SQLEmailCodes(database: database, appID: appID) }
}
