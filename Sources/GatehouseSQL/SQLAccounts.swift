import GatehouseCore

extension UserID: SQLBindable { public var sqlValue: SQLValue { .text(rawValue) } }
extension SessionID: SQLBindable { public var sqlValue: SQLValue { .text(rawValue) } }

// Users, identities, sessions, refresh tokens, events and limits, always bound to `appID`.
extension SQLAppScopedStore {
    func insertUser(_ user: User, passwordHash: String?, identity: Identity?, event: Event) throws {
        try database.transaction { db in
            do {
                try db.execute("""
                    INSERT INTO users (id, app_id, email, email_verified, first_name, last_name, photo_url, password_hash, created_at, updated_at, last_sign_in_at)
                    VALUES (\(user.id), \(appID), \(user.email), \(user.emailVerified), \(user.firstName), \(user.lastName), \(user.photoURL),
                            \(passwordHash), \(user.createdAt), \(user.updatedAt), \(user.lastSignInAt))
                    """)
                if let identity { try insertIdentity(db, app: appID, user: user.id, identity) }
            } catch let error as SQLError where error.kind == .uniqueViolation {
                // The identity exists: the same email or provider account signed up just before.
                throw GatehouseError(.emailAlreadyInUse, "An account with this email already exists.")
            }
            try insertEvent(db, event)
        }
    }

    func user(_ id: UserID) throws -> User? {
        try database.query("SELECT * FROM users WHERE app_id = \(appID) AND id = \(id) AND deleted_at IS NULL").first.map(userRecord)
    }

    func passwordUser(email: String) throws -> (User, String)? {
        guard let row = try database.query("""
            SELECT users.* FROM identities JOIN users ON users.id = identities.user_id AND users.app_id = identities.app_id
            WHERE identities.app_id = \(appID) AND identities.provider = 'password' AND identities.subject = \(email) AND users.deleted_at IS NULL
            """).first, let hash = try row.optionalString("password_hash")
        else { return nil }
        return (try userRecord(row), hash)
    }

    func user(email: String) throws -> User? {
        // See the protocol: verified first (with a password first), then an unverified one with
        // a password at the address; never an unverified account of a provider.
        try database.query("""
            SELECT users.* FROM users
            LEFT JOIN identities ON identities.app_id = users.app_id AND identities.user_id = users.id AND identities.provider = 'password'
            WHERE users.app_id = \(appID) AND users.email = \(email) AND users.deleted_at IS NULL
              AND (users.email_verified = 1 OR identities.subject IS NOT NULL)
            ORDER BY CASE WHEN users.email_verified = 1 THEN 0 ELSE 1 END, CASE WHEN identities.subject IS NULL THEN 1 ELSE 0 END, users.created_at
            LIMIT 1
            """).first.map(userRecord)
    }

    func markEmailVerified(_ id: UserID, email: String, now: Int64) throws -> User? {
        try touchUser(id) { stamp in
            try database.query("""
                UPDATE users SET email_verified = \(true), updated_at = \(now), \(stamp)
                WHERE app_id = \(appID) AND id = \(id) AND email = \(email) AND deleted_at IS NULL RETURNING *
                """).first.map(userRecord)
        }
    }

    func changeEmail(_ id: UserID, from old: String?, to new: String, now: Int64) throws -> User? {
        do {
            return try touchUser(id) { stamp in try database.transaction { db in
                let sameOld: SQL = old.map { "email = \($0)" } ?? "email IS NULL"
                guard let row = try db.query("""
                    UPDATE users SET email = \(new), email_verified = \(true), updated_at = \(now), \(stamp)
                    WHERE app_id = \(appID) AND id = \(id) AND \(sameOld) AND deleted_at IS NULL RETURNING *
                    """).first
                else { return nil }
                // The password identity's subject is the address it signs in with.
                try db.execute("""
                    UPDATE identities SET subject = \(new), email = \(new) WHERE app_id = \(appID) AND user_id = \(id) AND provider = 'password'
                    """)
                return try userRecord(row)
            } }
        } catch let error as SQLError where error.kind == .uniqueViolation {
            throw GatehouseError(.emailAlreadyInUse, "Another account signs in with this email.")
        }
    }

    func setBan(_ id: UserID, _ ban: Ban?, now: Int64) throws -> User? {
        try touchUser(id) { stamp in
            try database.query("""
                UPDATE users SET ban_sanction_code = \(ban?.sanctionCode), ban_reason = \(ban?.reason), ban_suspended_until = \(ban?.suspendedUntil),
                                 updated_at = \(now), \(stamp)
                WHERE app_id = \(appID) AND id = \(id) AND deleted_at IS NULL RETURNING *
                """).first.map(userRecord)
        }
    }

    func lockUser(_ id: UserID) throws -> User? {
        try touchUser(id) { stamp in
            try database.query("""
                UPDATE users SET \(stamp) WHERE app_id = \(appID) AND id = \(id) AND deleted_at IS NULL RETURNING *
                """).first.map(userRecord)
        }
    }

    func forgetSignInMethods(_ id: UserID, now: Int64) throws -> [String] {
        try touchUser(id) { stamp in try database.transaction { db in
            try db.execute("""
                UPDATE users SET password_hash = NULL, updated_at = \(now), \(stamp) WHERE app_id = \(appID) AND id = \(id)
                """)
            let removed = try db.query("""
                DELETE FROM identities WHERE app_id = \(appID) AND user_id = \(id) RETURNING provider
                """).map { try $0.string("provider") }
            try db.execute("DELETE FROM provider_tokens WHERE app_id = \(appID) AND user_id = \(id)")
            // A web flow's login code would still open a session (the live ones, by the expiry index).
            try db.execute("DELETE FROM login_codes WHERE app_id = \(appID) AND expires_at > \(now) AND user_id = \(id)")
            return removed
        } }
    }

    func users(matching query: String?, after: (createdAt: Int64, id: UserID)?, limit: Int) throws -> [(User, [Identity])] {
        var conditions: [SQL] = ["users.app_id = \(appID)", "users.deleted_at IS NULL"]
        if let after { conditions.append("(users.created_at < \(after.createdAt) OR (users.created_at = \(after.createdAt) AND users.id < \(after.id)))") }
        var source: SQL = "users"
        if let query {
            if let id = UserID(parsing: query) {
                conditions.append("users.id = \(id)")
            } else {
                let substring = query.lowercased()
                conditions.append(Self.containing(substring))
                if database.dialect == .sqlite, let candidates = try searchCandidates(for: substring) {
                    // The trigram index's candidates, then the app, the cursor and the same LIKE
                    // as the scan: the index only narrows, the LIKE decides.
                    guard !candidates.isEmpty else { return [] }
                    source = "user_search_rows CROSS JOIN users ON users.id = user_search_rows.user_id"
                    // One JSON array, not a list of binds: one statement text, however many candidates.
                    let rows = "[" + candidates.map(String.init).joined(separator: ",") + "]"
                    conditions.append("user_search_rows.row IN (SELECT value FROM json_each(\(rows)))")
                }
            }
        }
        let filter = conditions.joined(separator: " AND ")
        let users = try database.query("""
            SELECT users.* FROM \(source) WHERE \(filter) ORDER BY users.created_at DESC, users.id DESC LIMIT \(Int64(limit))
            """).map(userRecord)
        guard !users.isEmpty else { return [] }
        var identities: [UserID: [Identity]] = [:]
        for row in try database.query("""
            SELECT user_id, provider, subject, email, created_at FROM identities
            WHERE app_id = \(appID) AND user_id IN (\(list: users.map(\.id.rawValue))) ORDER BY created_at, provider
            """) {
            identities[UserID(unchecked: try row.string("user_id")), default: []].append(try identityRecord(row, prefix: ""))
        }
        return users.map { ($0, identities[$0.id] ?? []) }
    }

    /// A case-insensitive substring of the email, first or last name: LIKE with its wildcards
    /// escaped, so the query is a substring, not a pattern. Both databases answer it; PostgreSQL
    /// from its trigram indexes on the same `lower(…)` expressions (migration 0013).
    private static func containing(_ substring: String) -> SQL {
        let pattern = "%" + substring.replacingOccurrences(of: "\\", with: "\\\\")
            .replacingOccurrences(of: "%", with: "\\%").replacingOccurrences(of: "_", with: "\\_") + "%"
        return """
            (lower(users.email) LIKE \(pattern) ESCAPE '\\' OR lower(users.first_name) LIKE \(pattern) ESCAPE '\\' \
            OR lower(users.last_name) LIKE \(pattern) ESCAPE '\\')
            """
    }

    /// The substring as one FTS5 phrase: the trigram tokenizer matches it anywhere in a column,
    /// folding case (a superset of the LIKE's matches, which SQLite folds for ASCII only).
    private static func phrase(_ substring: String) -> String {
        "\"" + substring.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// Candidates the SQLite trigram index may give before a newest-first walk is the better way.
    static let searchIndexCandidateLimit = 2_000

    /// The rows of SQLite's trigram index (`user_search`) whose email or names contain `substring`
    /// (folding case), or nil when the app's users are better walked newest first: under 3
    /// characters there is no trigram to look up, and a substring in thousands of users (of any
    /// app) is common, so the walk finds a page of them after a few thousand rows, while the
    /// index would hand over every one of them to be looked up and sorted.
    private func searchCandidates(for substring: String) throws -> [Int64]? {
        guard substring.unicodeScalars.count >= 3 else { return nil }
        let rows = try database.query("""
            SELECT rowid FROM user_search WHERE user_search MATCH \(Self.phrase(substring)) LIMIT \(Int64(Self.searchIndexCandidateLimit))
            """).map { try $0.int64("rowid") }
        return rows.count < Self.searchIndexCandidateLimit ? rows : nil
    }

    func passwordHash(_ id: UserID) throws -> String? {
        try database.query("SELECT password_hash FROM users WHERE app_id = \(appID) AND id = \(id) AND deleted_at IS NULL").first?.optionalString("password_hash")
    }

    func updateProfile(_ id: UserID, firstName: String?, lastName: String?, photoURL: String?, now: Int64) throws -> User? {
        try touchUser(id) { stamp in
            try database.query("""
                UPDATE users SET first_name = \(firstName), last_name = \(lastName), photo_url = \(photoURL), updated_at = \(now), \(stamp)
                WHERE app_id = \(appID) AND id = \(id) AND deleted_at IS NULL RETURNING *
                """).first.map(userRecord)
        }
    }

    func setPasswordHash(_ id: UserID, hash: String, replacing: String?, addIdentity: Identity?, now: Int64) throws -> Bool {
        let stillCurrent: SQL = replacing.map { "password_hash = \($0)" } ?? "password_hash IS NULL"
        do {
            return try touchUser(id) { stamp in try database.transaction { db in
                guard try db.execute("""
                    UPDATE users SET password_hash = \(hash), updated_at = \(now), \(stamp)
                    WHERE app_id = \(appID) AND id = \(id) AND \(stillCurrent) AND deleted_at IS NULL
                    """) == 1
                else { return false }
                if let addIdentity { try insertIdentity(db, app: appID, user: id, addIdentity) }
                return true
            } }
        } catch let error as SQLError where error.kind == .uniqueViolation {
            throw GatehouseError(.emailAlreadyInUse, "Another account signs in with this email and a password.")
        }
    }

    func identities(_ id: UserID) throws -> [Identity] {
        try database.query("""
            SELECT provider, subject, email, created_at FROM identities WHERE app_id = \(appID) AND user_id = \(id) ORDER BY created_at, provider
            """).map { try identityRecord($0, prefix: "") }
    }

    func userWithIdentities(_ id: UserID) throws -> (User, [Identity])? {
        // One statement: a row per identity (or one row of NULLs for none), the user's columns on each.
        let rows = try database.query("""
            SELECT users.*, identities.provider AS identity_provider, identities.subject AS identity_subject,
                   identities.email AS identity_email, identities.created_at AS identity_created_at
            FROM users LEFT JOIN identities ON identities.app_id = users.app_id AND identities.user_id = users.id
            WHERE users.app_id = \(appID) AND users.id = \(id) AND users.deleted_at IS NULL
            ORDER BY identities.created_at, identities.provider
            """)
        guard let first = rows.first else { return nil }
        let identities = try rows.compactMap { row in try row.optionalString("identity_provider") == nil ? nil : try identityRecord(row, prefix: "identity_") }
        return (try userRecord(first), identities)
    }

    /// An identity from its columns, named `<prefix>provider` and so on.
    private func identityRecord(_ row: SQLRow, prefix: String) throws -> Identity {
        Identity(
            provider: try row.string(prefix + "provider"), subject: try row.string(prefix + "subject"), email: try row.optionalString(prefix + "email"),
            createdAt: try row.int64(prefix + "created_at"))
    }

    func insertSession(_ session: Session, refreshTokenHash: String, event: Event, passwordHash: String?) throws {
        try touchUser(session.userID) { stamp in try database.transaction { db in
            try db.execute("""
                INSERT INTO sessions (id, app_id, user_id, method, auth_time, created_at, last_used_at, expires_at, ip, user_agent)
                VALUES (\(session.id), \(appID), \(session.userID), \(session.method.rawValue), \(session.authTime), \(session.createdAt),
                        \(session.lastUsedAt), \(session.expiresAt), \(session.ip), \(session.userAgent))
                """)
            try db.execute("""
                INSERT INTO refresh_tokens (token_hash, app_id, session_id, created_at) VALUES (\(refreshTokenHash), \(appID), \(session.id), \(session.createdAt))
                """)
            try insertEvent(db, event)
            // Last: the user's row stays locked until COMMIT, and concurrent sign-ins of one user
            // queue on it. A deletion, a ban and a password change take this row before they end
            // the sessions, so a sign-in racing one either commits first (and has its session
            // ended) or finds the change here and rolls back. (On PostgreSQL, an UPDATE that
            // waited for the row checks its WHERE again against the row as committed.)
            var conditions: [SQL] = [
                "app_id = \(appID)", "id = \(session.userID)", "deleted_at IS NULL", "deletion_due_at IS NULL",
                "(ban_sanction_code IS NULL OR ban_suspended_until <= \(session.createdAt))",
            ]
            if let passwordHash { conditions.append("password_hash = \(passwordHash)") }
            guard try db.execute("""
                UPDATE users SET last_sign_in_at = \(session.createdAt), \(stamp)
                WHERE \(conditions.joined(separator: " AND "))
                """) == 1
            else { throw try sessionRefusal(db, session.userID, at: session.createdAt) }
        } }
    }

    /// Why the guarded update at the end of `insertSession` matched no row, read in its transaction.
    private func sessionRefusal(_ db: any SQLConnection, _ id: UserID, at now: Int64) throws -> SessionRefusal {
        guard let row = try db.query("""
            SELECT * FROM users WHERE app_id = \(appID) AND id = \(id) AND deleted_at IS NULL AND deletion_due_at IS NULL
            """).first
        else { return .accountGone }
        if let ban = try userRecord(row).ban, ban.holds(at: now) { return .banned(ban) }
        return .passwordChanged
    }

    func session(_ id: SessionID) throws -> Session? {
        try database.query("SELECT * FROM sessions WHERE app_id = \(appID) AND id = \(id)").first.map(sessionRecord)
    }

    func activeSessions(_ user: UserID, now: Int64, usedSince: Int64) throws -> [Session] {
        try database.query("""
            SELECT * FROM sessions
            WHERE app_id = \(appID) AND user_id = \(user) AND ended_at IS NULL AND expires_at > \(now) AND last_used_at >= \(usedSince)
            ORDER BY last_used_at DESC, id
            """).map(sessionRecord)
    }

    func endSession(_ id: SessionID, user: UserID, reason: SessionEndReason, now: Int64) throws -> Bool {
        let ended = try database.execute("""
            UPDATE sessions SET ended_at = \(now), ended_db_at = \(database.dialect.nowMillis), end_reason = \(reason.rawValue)
            WHERE app_id = \(appID) AND id = \(id) AND user_id = \(user) AND ended_at IS NULL
            """) == 1
        if ended { ledger?.ended([id]) }
        return ended
    }

    func endSessions(of user: UserID, keeping: SessionID?, reason: SessionEndReason, now: Int64) throws -> [SessionID] {
        let ended = try database.query("""
            UPDATE sessions SET ended_at = \(now), ended_db_at = \(database.dialect.nowMillis), end_reason = \(reason.rawValue)
            WHERE app_id = \(appID) AND user_id = \(user) AND ended_at IS NULL AND id <> \(keeping?.rawValue ?? "")
            RETURNING id
            """).map { SessionID(unchecked: try $0.string("id")) }
        ledger?.ended(ended)
        return ended
    }

    func rotateRefreshToken(
        presentedHash: String, successorHash: String, graceMillis: Int64, usedSince: Int64, origin: RequestOrigin, now: Int64,
        reuseEvents: (Session) -> [Event]
    ) throws -> RefreshOutcome {
        if database.dialect == .postgres {
            // The common case in one statement, so one round trip (a statement is atomic on its own):
            // claim the current token, touch its live session, add the successor. A concurrent
            // refresh of the same token waits for the claim's row lock, then finds it taken.
            if let row = try database.query("""
                WITH claimed AS (
                    UPDATE refresh_tokens SET rotated_at = \(now)
                    WHERE token_hash = \(presentedHash) AND app_id = \(appID) AND rotated_at IS NULL
                    RETURNING session_id
                ), touched AS (
                    UPDATE sessions SET last_used_at = \(now), ip = \(origin.ip), user_agent = \(origin.userAgent)
                    FROM claimed
                    WHERE sessions.app_id = \(appID) AND sessions.id = claimed.session_id AND sessions.ended_at IS NULL AND sessions.expires_at > \(now)
                      AND sessions.last_used_at >= \(usedSince)
                    RETURNING sessions.*
                ), added AS (
                    INSERT INTO refresh_tokens (token_hash, app_id, session_id, created_at) SELECT \(successorHash), \(appID), id, \(now) FROM touched
                )
                SELECT claimed.session_id AS claimed_session_id, touched.* FROM claimed LEFT JOIN touched ON touched.id = claimed.session_id
                """).first {
                // Claimed; no live session (signed out, reused, expired, idle) means no new pair.
                return try row.optionalString("id") == nil ? .invalid : .rotated(try sessionRecord(row))
            }
            return try database.transaction { db in
                try rotatedBefore(db, presentedHash: presentedHash, successorHash: successorHash, graceMillis: graceMillis, usedSince: usedSince, now: now, reuseEvents: reuseEvents)
            }
        }
        return try database.transaction { db in
            // The common case in three statements: claim the current token (a concurrent refresh of
            // the same token loses this claim and goes on below as a retry), touch its live
            // session, add the successor.
            if let claimed = try db.query("""
                UPDATE refresh_tokens SET rotated_at = \(now)
                WHERE token_hash = \(presentedHash) AND app_id = \(appID) AND rotated_at IS NULL
                RETURNING session_id
                """).first {
                let sessionID = try claimed.string("session_id")
                // The session may have ended (sign-out, a concurrent reuse), expired or idled: no new pair.
                guard let row = try db.query("""
                    UPDATE sessions SET last_used_at = \(now), ip = \(origin.ip), user_agent = \(origin.userAgent)
                    WHERE app_id = \(appID) AND id = \(sessionID) AND ended_at IS NULL AND expires_at > \(now) AND last_used_at >= \(usedSince)
                    RETURNING *
                    """).first
                else { return .invalid }
                try db.execute("""
                    INSERT INTO refresh_tokens (token_hash, app_id, session_id, created_at) VALUES (\(successorHash), \(appID), \(sessionID), \(now))
                    """)
                return .rotated(try sessionRecord(row))
            }
            return try rotatedBefore(db, presentedHash: presentedHash, successorHash: successorHash, graceMillis: graceMillis, usedSince: usedSince, now: now, reuseEvents: reuseEvents)
        }
    }

    /// A token that is not (or no longer) the current one of its session: unknown or of a session
    /// that is no longer live (ended, expired, idle), a retry within the grace window whose
    /// successor is still current (the same pair again), or reuse, which ends the session.
    private func rotatedBefore(
        _ db: any SQLConnection, presentedHash: String, successorHash: String, graceMillis: Int64, usedSince: Int64, now: Int64,
        reuseEvents: (Session) -> [Event]
    ) throws -> RefreshOutcome {
        guard let row = try db.query("""
            SELECT refresh_tokens.rotated_at AS token_rotated_at, sessions.*
            FROM refresh_tokens JOIN sessions ON sessions.id = refresh_tokens.session_id
            WHERE refresh_tokens.token_hash = \(presentedHash) AND refresh_tokens.app_id = \(appID) AND sessions.app_id = \(appID)
            """).first
        else { return .invalid }
        var session = try sessionRecord(row)
        if session.endedAt != nil || session.expiresAt <= now || session.lastUsedAt < usedSince { return .invalid }
        let rotation = try row.optionalInt64("token_rotated_at") ?? now
        let successorIsCurrent = try !db.query("""
            SELECT 1 AS current FROM refresh_tokens
            WHERE token_hash = \(successorHash) AND app_id = \(appID) AND session_id = \(session.id) AND rotated_at IS NULL
            """).isEmpty
        if successorIsCurrent && now - rotation <= graceMillis { return .retried(session) }
        let endedNow = try db.execute("""
            UPDATE sessions SET ended_at = \(now), ended_db_at = \(db.dialect.nowMillis), end_reason = \(SessionEndReason.refreshReused.rawValue)
            WHERE app_id = \(appID) AND id = \(session.id) AND ended_at IS NULL
            """) == 1
        session.endedAt = now
        if endedNow {
            ledger?.ended([session.id])
            for event in reuseEvents(session) { try insertEvent(db, event) }
        }
        return .reused(session, endedNow: endedNow)
    }

    func setAuthTime(_ id: SessionID, now: Int64) throws {
        try database.execute("UPDATE sessions SET auth_time = \(now), last_used_at = \(now) WHERE app_id = \(appID) AND id = \(id)")
    }

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
    private func insertEvent(_ db: any SQLConnection, _ event: Event) throws {
        try db.execute("""
            INSERT INTO events (id, app_id, type, user_id, session_id, ip, user_agent, data, created_at)
            VALUES (\(event.id.rawValue), \(appID), \(event.type.rawValue), \(event.userID), \(event.sessionID), \(event.ip), \(event.userAgent),
                    \(event.data.serializedString), \(event.createdAt))
            """)
        guard let ledger else { return }
        // Reads and queues through the event's own transaction (they see its change).
        try ledger.recorded(event, in: inTransaction ? self : SQLAppScopedStore(database: TransactionBoundDatabase(db), appID: appID, userChanges: nil, ledger: ledger))
    }

    func hitRateLimit(bucket: String, windowStart: Int64) throws -> Int64 {
        try database.query("""
            INSERT INTO rate_limits (app_id, bucket, window_start, hits) VALUES (\(appID), \(bucket), \(windowStart), 1)
            ON CONFLICT (app_id, bucket) DO UPDATE SET
                hits = CASE WHEN rate_limits.window_start = excluded.window_start THEN rate_limits.hits + 1
                            WHEN rate_limits.window_start > excluded.window_start THEN rate_limits.hits
                            ELSE 1 END,
                window_start = CASE WHEN rate_limits.window_start > excluded.window_start THEN rate_limits.window_start
                                    ELSE excluded.window_start END
            RETURNING hits
            """).first?.int64("hits") ?? 1
    }

    func rateLimitHits(bucket: String, windowStart: Int64) throws -> Int64 {
        try database.query("""
            SELECT hits FROM rate_limits WHERE app_id = \(appID) AND bucket = \(bucket) AND window_start = \(windowStart)
            """).first?.int64("hits") ?? 0
    }

    func resetRateLimit(bucket: String) throws {
        try database.execute("DELETE FROM rate_limits WHERE app_id = \(appID) AND bucket = \(bucket)")
    }

    func purgeRateLimits(before: Int64) throws {
        try database.execute("DELETE FROM rate_limits WHERE app_id = \(appID) AND window_start < \(before)")
    }
}

func insertIdentity(_ db: any SQLConnection, app: AppID, user: UserID, _ identity: Identity) throws {
    try db.execute("""
        INSERT INTO identities (app_id, provider, subject, user_id, email, created_at)
        VALUES (\(app), \(identity.provider), \(identity.subject), \(user), \(identity.email), \(identity.createdAt))
        """)
}

func userRecord(_ row: SQLRow) throws -> User {
    User(
        id: UserID(unchecked: try row.string("id")), email: try row.optionalString("email"), emailVerified: try row.bool("email_verified"),
        firstName: try row.optionalString("first_name"), lastName: try row.optionalString("last_name"), photoURL: try row.optionalString("photo_url"),
        createdAt: try row.int64("created_at"), updatedAt: try row.int64("updated_at"), lastSignInAt: try row.optionalInt64("last_sign_in_at"),
        ban: try row.optionalString("ban_sanction_code").map { code in
            Ban(sanctionCode: code, reason: try row.optionalString("ban_reason"), suspendedUntil: try row.optionalInt64("ban_suspended_until"))
        },
        pendingDeletion: try row.optionalInt64("deletion_due_at").map { due in
            PendingDeletion(requestedAt: try row.optionalInt64("deletion_requested_at") ?? due, purgeAt: due)
        })
}

private func sessionRecord(_ row: SQLRow) throws -> Session {
    guard let method = SignInMethod(rawValue: try row.string("method")) else {
        throw SQLError(kind: .decoding, message: "sessions.method has an unknown value")
    }
    return Session(
        id: SessionID(unchecked: try row.string("id")), userID: UserID(unchecked: try row.string("user_id")), method: method,
        authTime: try row.int64("auth_time"), createdAt: try row.int64("created_at"), lastUsedAt: try row.int64("last_used_at"),
        expiresAt: try row.int64("expires_at"), endedAt: try row.optionalInt64("ended_at"), ip: try row.optionalString("ip"),
        userAgent: try row.optionalString("user_agent"))
}
