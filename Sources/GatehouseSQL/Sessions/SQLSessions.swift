import GatehouseCore

extension SessionID: SQLBindable { public var sqlValue: SQLValue { .text(rawValue) } }

/// Sessions and their refresh tokens, bound to `appID`.
extension SQLAppScopedStore: SessionStore {
    var sessions: any SessionStore { self }

    func insertSession(_ session: Session, refreshTokenHash: String, event: Event, passwordHash: String?) throws {
        try touchUser(session.userID) { stamp in try database.transaction { db in
            try db.execute("""
                INSERT INTO sessions (id, app_id, user_id, method, provider, auth_time, created_at, last_used_at, expires_at, ip, user_agent, amr)
                VALUES (\(session.id), \(appID), \(session.userID), \(session.method.rawValue), \(session.provider), \(session.authTime),
                        \(session.createdAt), \(session.lastUsedAt), \(session.expiresAt), \(session.ip), \(session.userAgent),
                        \(session.amr?.joined(separator: " ")))
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
            // The session is found by its key from the claim (at most one row: `token_hash` is the
            // key of `refresh_tokens`), not by a join with it: the join let the generic plan of the
            // prepared statement read every live session (through `sessions_ended`) on a table
            // without statistics yet: in the benchmark, about 150 rows read per refresh, one per session.
            if let row = try database.query("""
                WITH claimed AS (
                    UPDATE refresh_tokens SET rotated_at = \(now)
                    WHERE token_hash = \(presentedHash) AND app_id = \(appID) AND rotated_at IS NULL
                    RETURNING session_id
                ), touched AS (
                    UPDATE sessions SET last_used_at = \(now), ip = \(origin.ip), user_agent = \(origin.userAgent)
                    WHERE sessions.app_id = \(appID) AND sessions.id = (SELECT session_id FROM claimed) AND sessions.ended_at IS NULL
                      AND sessions.expires_at > \(now) AND sessions.last_used_at >= \(usedSince)
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
        if successorIsCurrent && now - rotation <= graceMillis {
            // The same pair again, read, not written: but the rotation read may be one whose commit
            // was not confirmed by a synchronous standby (its client was answered 503 and retries
            // now). A write of no change (WAL-logged all the same; a transaction id alone writes no
            // WAL, and its commit would not wait) makes this statement's commit wait for the standby
            // like a rotation's, and the standby that confirms it holds every commit before it: the
            // pair is answered only once a failover would keep it.
            if db.dialect == .postgres {
                try db.execute("UPDATE refresh_tokens SET rotated_at = rotated_at WHERE token_hash = \(successorHash) AND app_id = \(appID)")
            }
            return .retried(session)
        }
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
}

private func sessionRecord(_ row: SQLRow) throws -> Session {
    guard let method = SignInMethod(rawValue: try row.string("method")) else {
        throw SQLError(kind: .decoding, message: "sessions.method has an unknown value")
    }
    return Session(
        id: SessionID(unchecked: try row.string("id")), userID: UserID(unchecked: try row.string("user_id")), method: method,
        authTime: try row.int64("auth_time"), createdAt: try row.int64("created_at"), lastUsedAt: try row.int64("last_used_at"),
        expiresAt: try row.int64("expires_at"), endedAt: try row.optionalInt64("ended_at"), ip: try row.optionalString("ip"),
        userAgent: try row.optionalString("user_agent"),
        // Space-separated (each value is a short token of RFC 8176's registry); null: the method's.
        amr: try row.optionalString("amr").map { $0.split(separator: " ").map(String.init) }, provider: try row.optionalString("provider"))
}
