import GatehouseCore

/// Identities, provider tokens, web flows and login codes, bound to `appID`.
extension SQLAppScopedStore: IdentityStore {
    var identities: any IdentityStore { self }

    func all(of id: UserID) throws -> [Identity] {
        try database.query("""
            SELECT provider, subject, email, created_at FROM identities WHERE app_id = \(appID) AND user_id = \(id) ORDER BY created_at, provider
            """).map { try identityRecord($0, prefix: "") }
    }

    /// An identity from its columns, named `<prefix>provider` and so on.
    func identityRecord(_ row: SQLRow, prefix: String) throws -> Identity {
        Identity(
            provider: IdentityProvider(rawValue: try row.string(prefix + "provider")), subject: try row.string(prefix + "subject"), email: try row.optionalString(prefix + "email"),
            createdAt: try row.int64(prefix + "created_at"))
    }

    func user(provider: IdentityProvider, subject: String) throws -> User? {
        try database.query("""
            SELECT users.* FROM identities JOIN users ON users.id = identities.user_id AND users.app_id = identities.app_id
            WHERE identities.app_id = \(appID) AND identities.provider = \(provider) AND identities.subject = \(subject) AND users.deleted_at IS NULL
            """).first.map(userRecord)
    }

    func hasIdentities(of provider: IdentityProvider) throws -> Bool {
        try !database.query("""
            SELECT 1 AS found FROM identities WHERE app_id = \(appID) AND provider = \(provider) LIMIT 1
            """).isEmpty
    }

    func addIdentity(_ user: UserID, _ identity: Identity) throws {
        do {
            try touchUser(user) { stamp in try database.transaction { db in
                guard try db.execute("""
                    UPDATE users SET \(stamp) WHERE app_id = \(appID) AND id = \(user) AND deleted_at IS NULL
                    """) == 1
                else { throw IdentityConflict.accountGone }
                try insertIdentity(db, app: appID, user: user, identity)
            } }
        } catch let error as SQLError where error.kind == .uniqueViolation {
            throw IdentityConflict.alreadyLinked
        }
    }

    func removeIdentity(_ user: UserID, provider: IdentityProvider, now: Int64) throws -> Bool {
        try touchUser(user) { stamp in try database.transaction { db in
            // The user's row first: its lock serialises concurrent unlinks of one user, so that
            // the count below sees the other one's removal and never lets both go.
            try db.execute("UPDATE users SET \(stamp) WHERE app_id = \(appID) AND id = \(user)")
            let removed = try db.execute("""
                DELETE FROM identities WHERE app_id = \(appID) AND user_id = \(user) AND provider = \(provider)
                  AND (SELECT count(*) FROM identities WHERE app_id = \(appID) AND user_id = \(user)) > 1
                """)
            if removed > 0, provider == .password {
                try db.execute("UPDATE users SET password_hash = NULL, updated_at = \(now) WHERE app_id = \(appID) AND id = \(user)")
            }
            return removed > 0
        } }
    }

    func forgetSignInMethods(_ id: UserID, now: Int64) throws -> ForgottenSignInMethods {
        try touchUser(id) { stamp in try database.transaction { db in
            try db.execute("""
                UPDATE users SET password_hash = NULL, updated_at = \(now), \(stamp) WHERE app_id = \(appID) AND id = \(id)
                """)
            let removed = try db.query("""
                DELETE FROM identities WHERE app_id = \(appID) AND user_id = \(id) RETURNING provider
                """).map { IdentityProvider(rawValue: try $0.string("provider")) }
            // Returned, not only dropped: the caller queues their revocation in the same unit.
            let tokens = try db.query("""
                DELETE FROM provider_tokens WHERE app_id = \(appID) AND user_id = \(id) RETURNING provider, client_id, refresh_token
                """).map(providerTokenRecord).sorted { ($0.provider.rawValue, $0.clientID) < ($1.provider.rawValue, $1.clientID) }
            // A web flow's login code would still open a session (the live ones, by the expiry index).
            try db.execute("DELETE FROM login_codes WHERE app_id = \(appID) AND expires_at > \(now) AND user_id = \(id)")
            return ForgottenSignInMethods(providers: removed, tokens: tokens)
        } }
    }

    func takeProviderTokens(_ user: UserID, provider: IdentityProvider) throws -> [StoredProviderToken] {
        try database.query("""
            DELETE FROM provider_tokens WHERE app_id = \(appID) AND user_id = \(user) AND provider = \(provider)
            RETURNING provider, client_id, refresh_token
            """).map(providerTokenRecord).sorted { $0.clientID < $1.clientID }
    }

    func saveProviderToken(_ user: UserID, provider: IdentityProvider, clientID: String, sealedToken: String, now: Int64) throws -> Bool {
        try touchUser(user) { stamp in try database.transaction { db in
            // The user's row first, as a deletion takes it: a token kept while the account is
            // being deleted is either seen (and revoked) by the deletion, or not kept at all.
            guard try db.execute("""
                UPDATE users SET \(stamp) WHERE app_id = \(appID) AND id = \(user) AND deleted_at IS NULL
                """) == 1
            else { return false }
            try db.execute("""
                INSERT INTO provider_tokens (app_id, user_id, provider, client_id, refresh_token, created_at)
                VALUES (\(appID), \(user), \(provider), \(clientID), \(sealedToken), \(now))
                ON CONFLICT (app_id, user_id, provider, client_id) DO UPDATE SET refresh_token = excluded.refresh_token, created_at = excluded.created_at
                """)
            return true
        } }
    }

    func providerTokens(_ user: UserID) throws -> [StoredProviderToken] {
        try database.query("""
            SELECT provider, client_id, refresh_token FROM provider_tokens WHERE app_id = \(appID) AND user_id = \(user) ORDER BY provider, client_id
            """).map(providerTokenRecord)
    }

    func insertWebFlow(_ flow: WebFlow) throws {
        // Expired flows are dead weight: each insert drops a bounded batch of this app's, so
        // the table holds about the flows of the last 10 minutes whatever the traffic. One
        // transaction: one commit for both.
        try database.transaction { db in
            try db.execute("""
                DELETE FROM web_flows WHERE id IN (
                    SELECT id FROM web_flows WHERE app_id = \(appID) AND expires_at <= \(flow.createdAt) LIMIT 16)
                """)
            try db.execute("""
                INSERT INTO web_flows (id, app_id, provider, binding_hash, nonce, redirect_uri, client_state, code_challenge, provider_verifier, created_at, expires_at)
                VALUES (\(flow.id), \(appID), \(flow.provider), \(flow.bindingHash), \(flow.nonce), \(flow.redirectURI), \(flow.clientState), \(flow.codeChallenge), \(flow.providerVerifier),
                        \(flow.createdAt), \(flow.expiresAt))
                """)
        }
    }

    func insertLoginCode(_ code: LoginCode) throws {
        try database.transaction { db in
            try db.execute("""
                DELETE FROM login_codes WHERE code_hash IN (
                    SELECT code_hash FROM login_codes WHERE app_id = \(appID) AND expires_at <= \(code.createdAt) LIMIT 16)
                """)
            try db.execute("""
                INSERT INTO login_codes (code_hash, app_id, user_id, method, provider, is_new_user, code_challenge, created_at, expires_at)
                VALUES (\(code.codeHash), \(appID), \(code.userID), \(code.method.rawValue), \(code.provider), \(code.isNewUser), \(code.codeChallenge), \(code.createdAt), \(code.expiresAt))
                """)
        }
    }

    func takeLoginCode(hash: String, now: Int64) throws -> LoginCode? {
        guard let row = try database.query("""
            UPDATE login_codes SET used_at = \(now)
            WHERE code_hash = \(hash) AND app_id = \(appID) AND used_at IS NULL AND expires_at > \(now)
            RETURNING *
            """).first, let method = SignInMethod(rawValue: try row.string("method"))
        else { return nil }
        return LoginCode(
            codeHash: try row.string("code_hash"), userID: UserID(unchecked: try row.string("user_id")), method: method,
            provider: try row.string("provider"), isNewUser: try row.bool("is_new_user"), codeChallenge: try row.optionalString("code_challenge"), createdAt: try row.int64("created_at"),
            expiresAt: try row.int64("expires_at"))
    }
}

extension IdentityProvider: SQLBindable {
    public var sqlValue: SQLValue { .text(rawValue) }
}

func insertIdentity(_ db: any SQLConnection, app: AppID, user: UserID, _ identity: Identity) throws {
    try db.execute("""
        INSERT INTO identities (app_id, provider, subject, user_id, email, created_at)
        VALUES (\(app), \(identity.provider), \(identity.subject), \(user), \(identity.email), \(identity.createdAt))
        """)
}

extension SQLStore {
    public func useProviderNonce(key: String, expiresAt: Int64, now: Int64) throws -> Bool {
        // One transaction, one commit: this runs on every provider sign-in.
        try database.transaction { db in
            try db.execute("""
                DELETE FROM provider_nonces WHERE nonce_key IN (SELECT nonce_key FROM provider_nonces WHERE expires_at <= \(now) LIMIT 16)
                """)
            // A row left by an expired token is taken over: only an unexpired one makes this a replay.
            return try db.execute("""
                INSERT INTO provider_nonces (nonce_key, expires_at) VALUES (\(key), \(expiresAt))
                ON CONFLICT (nonce_key) DO UPDATE SET expires_at = excluded.expires_at WHERE provider_nonces.expires_at <= \(now)
                """) == 1
        }
    }

    public func releaseProviderNonce(key: String) throws {
        try database.execute("DELETE FROM provider_nonces WHERE nonce_key = \(key)")
    }

    public func webFlowApp(id: String, provider: String, now: Int64) throws -> AppID? {
        try database.query("SELECT app_id FROM web_flows WHERE id = \(id) AND provider = \(provider) AND used_at IS NULL AND expires_at > \(now)").first
            .map { AppID(unchecked: try $0.string("app_id")) }
    }

    public func takeWebFlow(id: String, provider: String, bindingHash: String, now: Int64) throws -> WebFlow? {
        guard let row = try database.query("""
            UPDATE web_flows SET used_at = \(now)
            WHERE id = \(id) AND provider = \(provider) AND binding_hash = \(bindingHash) AND used_at IS NULL AND expires_at > \(now) RETURNING *
            """).first
        else { return nil }
        return WebFlow(
            id: try row.string("id"), appID: AppID(unchecked: try row.string("app_id")), provider: try row.string("provider"), bindingHash: try row.string("binding_hash"),
            nonce: try row.string("nonce"), redirectURI: try row.string("redirect_uri"), clientState: try row.optionalString("client_state"),
            codeChallenge: try row.optionalString("code_challenge"), providerVerifier: try row.optionalString("provider_verifier"),
            createdAt: try row.int64("created_at"), expiresAt: try row.int64("expires_at"))
    }
}

func providerTokenRecord(_ row: SQLRow) throws -> StoredProviderToken {
    StoredProviderToken(provider: IdentityProvider(rawValue: try row.string("provider")), clientID: try row.string("client_id"), sealedToken: try row.string("refresh_token"))
}
