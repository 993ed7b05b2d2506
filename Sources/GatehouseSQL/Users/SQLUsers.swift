import GatehouseCore

extension UserID: SQLBindable { public var sqlValue: SQLValue { .text(rawValue) } }

/// The app's users (`users`), every statement bound to `appID`.
extension SQLAppScopedStore: UserStore {
    var users: any UserStore { self }

    func insertUser(_ user: User, passwordHash: String?, identity: Identity?, event: Event) throws {
        try database.transaction { db in
            do {
                try db.execute("""
                    INSERT INTO users (id, app_id, email, email_verified, first_name, last_name, photo_url, locale, display_name, app_metadata, user_metadata,
                                       password_hash, created_at, updated_at, last_sign_in_at, is_anonymous, last_seen_at)
                    VALUES (\(user.id), \(appID), \(user.email), \(user.emailVerified), \(user.firstName), \(user.lastName), \(user.photoURL), \(user.locale),
                            \(user.displayName), \(user.appMetadata.storedText), \(user.userMetadata.storedText),
                            \(passwordHash), \(user.createdAt), \(user.updatedAt), \(user.lastSignInAt), \(user.isAnonymous),
                            \(user.isAnonymous ? user.createdAt : nil))
                    """)
                if let identity { try insertIdentity(db, app: appID, user: user.id, identity) }
            } catch let error as SQLError where error.kind == .uniqueViolation {
                // The identity exists: the same email or provider account signed up just before.
                throw UserConflict.identityTaken
            }
            try insertEvent(db, event)
        }
    }

    func user(_ id: UserID) throws -> User? {
        try database.query("SELECT * FROM users WHERE app_id = \(appID) AND id = \(id) AND deleted_at IS NULL").first.map(userRecord)
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
            throw UserConflict.emailTaken
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

    func updateProfile(_ id: UserID, firstName: String?, lastName: String?, photoURL: String?, now: Int64) throws -> User? {
        try touchUser(id) { stamp in
            try database.query("""
                UPDATE users SET first_name = \(firstName), last_name = \(lastName), photo_url = \(photoURL), updated_at = \(now), \(stamp)
                WHERE app_id = \(appID) AND id = \(id) AND deleted_at IS NULL RETURNING *
                """).first.map(userRecord)
        }
    }

    func setLocale(_ id: UserID, _ locale: String?, now: Int64) throws -> User? {
        try touchUser(id) { stamp in
            try database.query("""
                UPDATE users SET locale = \(locale), updated_at = \(now), \(stamp)
                WHERE app_id = \(appID) AND id = \(id) AND deleted_at IS NULL RETURNING *
                """).first.map(userRecord)
        }
    }

    func setCustomData(_ id: UserID, displayName: String?, appMetadata: UserMetadata, userMetadata: UserMetadata, now: Int64) throws -> User? {
        try touchUser(id) { stamp in
            try database.query("""
                UPDATE users SET display_name = \(displayName), app_metadata = \(appMetadata.storedText), user_metadata = \(userMetadata.storedText),
                                 updated_at = \(now), \(stamp)
                WHERE app_id = \(appID) AND id = \(id) AND deleted_at IS NULL RETURNING *
                """).first.map(userRecord)
        }
    }

    func fillNames(_ user: UserID, firstName: String?, lastName: String?, now: Int64) throws {
        guard firstName != nil || lastName != nil else { return }
        try touchUser(user) { stamp in
            try database.execute("""
                UPDATE users SET first_name = COALESCE(first_name, \(firstName)), last_name = COALESCE(last_name, \(lastName)), updated_at = \(now),
                                 \(stamp)
                WHERE app_id = \(appID) AND id = \(user) AND first_name IS NULL AND last_name IS NULL AND deleted_at IS NULL
                """)
        }
    }

    func users(matching query: String?, anonymous: Bool?, after: (createdAt: Int64, id: UserID)?, limit: Int) throws -> [(User, [Identity])] {
        var conditions: [SQL] = ["users.app_id = \(appID)", "users.deleted_at IS NULL"]
        if let anonymous { conditions.append("users.is_anonymous = \(anonymous)") }
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

    /// A case-insensitive substring of the email, first or last name or display name: LIKE with
    /// its wildcards escaped, so the query is a substring, not a pattern. Both databases answer it;
    /// PostgreSQL from its trigram indexes on the same `lower(…)` expressions (migrations 0013 and
    /// 0024).
    private static func containing(_ substring: String) -> SQL {
        let pattern = "%" + substring.replacingOccurrences(of: "\\", with: "\\\\")
            .replacingOccurrences(of: "%", with: "\\%").replacingOccurrences(of: "_", with: "\\_") + "%"
        return """
            (lower(users.email) LIKE \(pattern) ESCAPE '\\' OR lower(users.first_name) LIKE \(pattern) ESCAPE '\\' \
            OR lower(users.last_name) LIKE \(pattern) ESCAPE '\\' OR lower(users.display_name) LIKE \(pattern) ESCAPE '\\')
            """
    }

    /// The substring as one FTS5 phrase: the trigram tokenizer matches it anywhere in a column,
    /// folding case (a superset of the LIKE's matches, which SQLite folds for ASCII only).
    private static func phrase(_ substring: String) -> String {
        "\"" + substring.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// Candidates the SQLite trigram index may give before a newest-first walk is the better way.
    static let searchIndexCandidateLimit = 2_000

    /// The rows of SQLite's trigram index (`user_search`) whose email, names or display name contain `substring`
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

    func exportPage(after: UserID?, limit: Int, withPasswordHashes: Bool) throws -> [ExportedUser] {
        // One statement: the page of users (by the users_app_id index), a row per identity (or
        // one of NULLs for none), the user's columns on each. Anonymous users have nothing to
        // move (no address, no sign-in method) and are left out.
        let rows = try database.query("""
            SELECT page.*, identities.provider AS identity_provider, identities.subject AS identity_subject,
                   identities.email AS identity_email, identities.created_at AS identity_created_at
            FROM (SELECT * FROM users WHERE app_id = \(appID) AND id > \(after?.rawValue ?? "") AND deleted_at IS NULL AND is_anonymous = 0
                  ORDER BY id LIMIT \(Int64(limit))) AS page
            LEFT JOIN identities ON identities.app_id = page.app_id AND identities.user_id = page.id
            ORDER BY page.id, identities.created_at, identities.provider
            """)
        var page: [ExportedUser] = []
        for row in rows {
            let id = UserID(unchecked: try row.string("id"))
            if page.last?.user.id != id {
                page.append(ExportedUser(
                    user: try userRecord(row), identities: [], passwordHash: withPasswordHashes ? try row.optionalString("password_hash") : nil))
            }
            if try row.optionalString("identity_provider") != nil { page[page.count - 1].identities.append(try identityRecord(row, prefix: "identity_")) }
        }
        return page
    }

    func upgradeAnonymous(_ id: UserID, email: String?, emailVerified: Bool, now: Int64) throws -> User? {
        // The address only where the account has none (an anonymous one never has).
        let address: SQL = email.map { "email = \($0), email_verified = \(emailVerified)," } ?? ""
        return try touchUser(id) { stamp in
            try database.query("""
                UPDATE users SET is_anonymous = 0, last_seen_at = NULL, \(address) updated_at = \(now), \(stamp)
                WHERE app_id = \(appID) AND id = \(id) AND is_anonymous = 1 AND email IS NULL AND deleted_at IS NULL RETURNING *
                """).first.map(userRecord)
        }
    }

    func markAnonymousSeen(_ id: UserID, now: Int64, before: Int64) throws {
        // Not a change of the account (no stamp): nothing any cache or client shows moves.
        try database.execute("""
            UPDATE users SET last_seen_at = \(now)
            WHERE app_id = \(appID) AND id = \(id) AND is_anonymous = 1 AND last_seen_at < \(before) AND deleted_at IS NULL
            """)
    }

    func anonymousUsers(unseenBefore cutoff: Int64, limit: Int) throws -> [UserID] {
        // `is_anonymous = 1 AND deleted_at IS NULL` as the partial index says it (migration 0025).
        try database.query("""
            SELECT id FROM users WHERE app_id = \(appID) AND is_anonymous = 1 AND deleted_at IS NULL AND last_seen_at < \(cutoff)
            ORDER BY last_seen_at LIMIT \(Int64(limit))
            """).map { UserID(unchecked: try $0.string("id")) }
    }

    func anonymousLastSeen(_ id: UserID) throws -> Int64? {
        try database.query("""
            SELECT last_seen_at FROM users WHERE app_id = \(appID) AND id = \(id) AND is_anonymous = 1 AND deleted_at IS NULL
            """).first?.optionalInt64("last_seen_at")
    }

    func emailInUse(_ email: String, except: UserID?) throws -> Bool {
        try !database.query("""
            SELECT 1 AS found FROM users
            WHERE app_id = \(appID) AND email = \(email) AND id <> \(except?.rawValue ?? "") AND deleted_at IS NULL
              AND (email_verified = \(true) OR EXISTS (
                  SELECT 1 FROM identities WHERE identities.app_id = users.app_id AND identities.user_id = users.id AND identities.provider = 'password'))
            LIMIT 1
            """).isEmpty
    }
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
        },
        locale: try row.optionalString("locale"), displayName: try row.optionalString("display_name"),
        appMetadata: UserMetadata.stored(try row.string("app_metadata")), userMetadata: UserMetadata.stored(try row.string("user_metadata")),
        isAnonymous: try row.bool("is_anonymous"))
}
