import GatehouseCore

/// Pending deletion and the erase of one app's accounts (migration 0012).
struct SQLAccountDeletion: AccountDeletionStore {
    let store: SQLAppScopedStore

    func schedule(_ id: UserID, _ pending: PendingDeletion, now: Int64) throws -> Bool {
        try store.touchUser(id) { stamp in
            try store.database.execute("""
                UPDATE users SET deletion_requested_at = \(pending.requestedAt), deletion_due_at = \(pending.purgeAt), \(stamp)
                WHERE app_id = \(store.appID) AND id = \(id) AND deleted_at IS NULL AND deletion_due_at IS NULL
                """) == 1
        }
    }

    func cancel(_ id: UserID, now: Int64) throws -> Bool {
        try store.touchUser(id) { stamp in
            try store.database.execute("""
                UPDATE users SET deletion_requested_at = NULL, deletion_due_at = NULL, \(stamp)
                WHERE app_id = \(store.appID) AND id = \(id) AND deleted_at IS NULL AND deletion_due_at > \(now)
                """) == 1
        }
    }

    func erase(_ id: UserID, dueBy: Int64?, now: Int64) throws -> [StoredProviderToken]? {
        let due: SQL = dueBy.map { "deletion_due_at <= \($0)" } ?? "1 = 1"
        return try store.touchUser(id) { stamp in try store.database.transaction { db in
            // First, and guarded: of two nodes purging the same account, one erases it.
            guard try db.execute("""
                UPDATE users SET email = NULL, email_verified = \(false), first_name = NULL, last_name = NULL, photo_url = NULL, password_hash = NULL,
                                 ban_sanction_code = NULL, ban_reason = NULL, ban_suspended_until = NULL,
                                 locale = NULL, display_name = NULL, app_metadata = '{}', user_metadata = '{}', last_seen_at = NULL,
                                 deletion_requested_at = NULL, deletion_due_at = NULL, deleted_at = \(now),
                                 updated_at = \(now), \(stamp)
                WHERE app_id = \(store.appID) AND id = \(id) AND deleted_at IS NULL AND \(due)
                """) == 1
            else { return nil }
            try db.execute("DELETE FROM identities WHERE app_id = \(store.appID) AND user_id = \(id)")
            let tokens = try db.query("""
                DELETE FROM provider_tokens WHERE app_id = \(store.appID) AND user_id = \(id) RETURNING provider, client_id, refresh_token
                """).map(providerTokenRecord)
            try db.execute("DELETE FROM login_codes WHERE app_id = \(store.appID) AND user_id = \(id)")
            // What Apple's notifications kept of it: its relay addresses, an Apple identity waiting to be relinked.
            try db.execute("DELETE FROM apple_relay_forwarding WHERE app_id = \(store.appID) AND user_id = \(id)")
            try db.execute("DELETE FROM apple_revoked_identities WHERE app_id = \(store.appID) AND user_id = \(id)")
            // Its second factors and open second steps.
            try db.execute("DELETE FROM mfa_totp_factors WHERE app_id = \(store.appID) AND user_id = \(id)")
            try db.execute("DELETE FROM mfa_recovery_codes WHERE app_id = \(store.appID) AND user_id = \(id)")
            try db.execute("DELETE FROM mfa_challenges WHERE app_id = \(store.appID) AND user_id = \(id)")
            // Its passkeys, its WebAuthn user handle and the challenges issued to it (ADR 0028).
            try db.execute("DELETE FROM passkeys WHERE app_id = \(store.appID) AND user_id = \(id)")
            try db.execute("DELETE FROM webauthn_user_handles WHERE app_id = \(store.appID) AND user_id = \(id)")
            try db.execute("DELETE FROM webauthn_challenges WHERE app_id = \(store.appID) AND user_id = \(id)")
            // Its live codes die; the address's send windows stay (they limit the address, not the account).
            try db.execute("UPDATE email_codes SET user_id = NULL, code_hash = NULL WHERE app_id = \(store.appID) AND user_id = \(id)")
            // The ended sessions stay with the tombstone (every node's revocation poll reads them), without where they came from.
            try db.execute("UPDATE sessions SET ip = NULL, user_agent = NULL WHERE app_id = \(store.appID) AND user_id = \(id)")
            // Its audit events stay (the app's record of what happened), without where they came
            // from or the addresses they name: those recorded in this transaction too.
            try db.execute("""
                UPDATE events SET ip = NULL, user_agent = NULL
                WHERE app_id = \(store.appID) AND user_id = \(id) AND (ip IS NOT NULL OR user_agent IS NOT NULL)
                """)
            for row in try db.query("SELECT id, data FROM events WHERE app_id = \(store.appID) AND user_id = \(id)") {
                let text = try row.string("data")
                // Unreadable data cannot be sifted: it goes whole rather than keep what it may hold.
                let redacted = (try? JSON.parse(Array(text.utf8))).map(ErasedEventData.redacted) ?? [:]
                let kept = redacted.serializedString
                if kept != text { try db.execute("UPDATE events SET data = \(kept) WHERE app_id = \(store.appID) AND id = \(try row.string("id"))") }
            }
            return tokens
        } }
    }
}

extension SQLAppScopedStore {
    var deletion: any AccountDeletionStore { SQLAccountDeletion(store: self) }
}
