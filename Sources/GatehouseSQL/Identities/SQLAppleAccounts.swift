import GatehouseCore

/// What Apple's notifications keep (migration 0018), bound to `appID`.
extension SQLAppScopedStore: AppleAccountStore {
    func recordAppleNotification(subjectDigest: String, type: String, eventTime: Int64, now: Int64) throws -> Bool {
        try database.execute("""
            INSERT INTO apple_notifications (app_id, subject_digest, type, event_time, received_at)
            VALUES (\(appID), \(subjectDigest), \(type), \(eventTime), \(now))
            ON CONFLICT (app_id, subject_digest, type, event_time) DO NOTHING
            """) == 1
    }

    func setRelayForwarding(_ address: String, user: UserID, forwarding: Bool, eventTime: Int64, now: Int64) throws -> Bool {
        try database.transaction { db in
            let current = try db.query("""
                SELECT forwarding, event_time FROM apple_relay_forwarding WHERE app_id = \(appID) AND address = \(address)
                """).first
            // Apple may deliver out of order: an event older than the one that set the state is stale.
            if let current, try current.int64("event_time") >= eventTime { return false }
            try db.execute("""
                INSERT INTO apple_relay_forwarding (app_id, address, user_id, forwarding, event_time, updated_at)
                VALUES (\(appID), \(address), \(user), \(forwarding), \(eventTime), \(now))
                ON CONFLICT (app_id, address) DO UPDATE SET
                  user_id = excluded.user_id, forwarding = excluded.forwarding, event_time = excluded.event_time, updated_at = excluded.updated_at
                WHERE apple_relay_forwarding.event_time < excluded.event_time
                """)
            // No row: Apple forwards (the relay's default).
            return try (current?.bool("forwarding") ?? true) != forwarding
        }
    }

    func isRelayForwardingOff(_ address: String) throws -> Bool {
        try !database.query("""
            SELECT 1 AS off FROM apple_relay_forwarding WHERE app_id = \(appID) AND address = \(address) AND forwarding = \(false)
            """).isEmpty
    }

    func revokeAppleIdentity(_ user: UserID, subject: String, remember: Bool, now: Int64) throws -> Bool {
        try touchUser(user) { stamp in try database.transaction { db in
            // The user's row first, as unlinking and deletion take it.
            try db.execute("UPDATE users SET \(stamp) WHERE app_id = \(appID) AND id = \(user)")
            let removed = try db.execute("""
                DELETE FROM identities WHERE app_id = \(appID) AND user_id = \(user) AND provider = \(IdentityProvider.apple) AND subject = \(subject)
                """)
            guard removed > 0 else { return false }
            try db.execute("DELETE FROM provider_tokens WHERE app_id = \(appID) AND user_id = \(user) AND provider = \(IdentityProvider.apple)")
            if remember {
                try db.execute("""
                    INSERT INTO apple_revoked_identities (app_id, subject, user_id, revoked_at) VALUES (\(appID), \(subject), \(user), \(now))
                    ON CONFLICT (app_id, subject) DO UPDATE SET user_id = excluded.user_id, revoked_at = excluded.revoked_at
                    """)
            }
            return true
        } }
    }

    func revokedAppleIdentityOwner(subject: String) throws -> UserID? {
        try database.query("""
            SELECT apple_revoked_identities.user_id FROM apple_revoked_identities
            JOIN users ON users.app_id = apple_revoked_identities.app_id AND users.id = apple_revoked_identities.user_id
            WHERE apple_revoked_identities.app_id = \(appID) AND apple_revoked_identities.subject = \(subject) AND users.deleted_at IS NULL
            """).first.map { UserID(unchecked: try $0.string("user_id")) }
    }

    func takeRevokedAppleIdentity(subject: String) throws -> UserID? {
        try database.query("""
            DELETE FROM apple_revoked_identities WHERE app_id = \(appID) AND subject = \(subject) RETURNING user_id
            """).first.map { UserID(unchecked: try $0.string("user_id")) }
    }

    func endSessions(of user: UserID, startedWith method: SignInMethod, reason: SessionEndReason, now: Int64) throws -> [SessionID] {
        let ended = try database.query("""
            UPDATE sessions SET ended_at = \(now), ended_db_at = \(database.dialect.nowMillis), end_reason = \(reason.rawValue)
            WHERE app_id = \(appID) AND user_id = \(user) AND method = \(method.rawValue) AND ended_at IS NULL
            RETURNING id
            """).map { SessionID(unchecked: try $0.string("id")) }
        ledger?.ended(ended)
        return ended
    }
}
