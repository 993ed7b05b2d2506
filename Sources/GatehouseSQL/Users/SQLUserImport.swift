import GatehouseCore

/// The import's statements (``UserImport``): a batch is checked and written with a few statements,
/// not a few per user, every one bound to `appID`.
extension SQLAppScopedStore {
    func existingEmails(_ emails: [String]) throws -> Set<String> {
        guard !emails.isEmpty else { return [] }
        let rows = try customPlanned("""
            SELECT DISTINCT email FROM users WHERE app_id = \(appID) AND email IN (\(list: emails)) AND deleted_at IS NULL
            """)
        return Set(try rows.map { try $0.string("email") })
    }

    func existingSubjects(_ subjects: [String], of provider: IdentityProvider) throws -> Set<String> {
        guard !subjects.isEmpty else { return [] }
        let rows = try customPlanned("""
            SELECT subject FROM identities WHERE app_id = \(appID) AND provider = \(provider) AND subject IN (\(list: subjects))
            """)
        return Set(try rows.map { try $0.string("subject") })
    }

    /// Runs a lookup of an import's batch planned for its values. An import grows the tables it
    /// looks in by thousands of rows a second: PostgreSQL's generic plan of a prepared statement,
    /// made while the app's rows were few, is a sequential scan, kept until the next `ANALYZE`,
    /// which made each batch slower than the last (measured: 70 ms a batch became 900). A custom
    /// plan, for the rows there are now, takes the index. Only for this transaction (`SET LOCAL`).
    private func customPlanned(_ sql: SQL) throws -> [SQLRow] {
        try database.transaction { db in
            if database.dialect == .postgres { try db.execute("SET LOCAL plan_cache_mode = force_custom_plan") }
            return try db.query(sql)
        }
    }

    func insertImported(_ accounts: [ImportedAccount]) throws {
        guard !accounts.isEmpty else { return }
        try database.transaction { db in
            // At most 500 rows of 15 values a statement: far below either database's bind limit.
            for chunk in stride(from: 0, to: accounts.count, by: 500).map({ accounts[$0..<min(accounts.count, $0 + 500)] }) {
                let users: [SQL] = chunk.map { account in
                    let user = account.user
                    return """
                        (\(user.id), \(appID), \(user.email), \(user.emailVerified), \(user.firstName), \(user.lastName), \(user.photoURL), \(user.locale),
                         \(user.displayName), \(user.appMetadata.storedText), \(user.userMetadata.storedText), \(account.passwordHash),
                         \(user.createdAt), \(user.updatedAt), \(user.lastSignInAt))
                        """
                }
                try db.execute("""
                    INSERT INTO users (id, app_id, email, email_verified, first_name, last_name, photo_url, locale, display_name, app_metadata, user_metadata,
                                       password_hash, created_at, updated_at, last_sign_in_at)
                    VALUES \(users.joined(separator: ", "))
                    """)
                let identities: [SQL] = chunk.flatMap { account in
                    account.identities.map { identity -> SQL in
                        "(\(appID), \(identity.provider), \(identity.subject), \(account.user.id), \(identity.email), \(identity.createdAt))"
                    }
                }
                guard !identities.isEmpty else { continue }
                do {
                    try db.execute("""
                        INSERT INTO identities (app_id, provider, subject, user_id, email, created_at) VALUES \(identities.joined(separator: ", "))
                        """)
                } catch let error as SQLError where error.kind == .uniqueViolation {
                    throw UserConflict.identityTaken
                }
            }
        }
    }
}
