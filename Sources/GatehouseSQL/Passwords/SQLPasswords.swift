import GatehouseCore

/// Password hashes (`users.password_hash`) and the `password` identity, bound to `appID`.
extension SQLAppScopedStore: PasswordStore {
    func passwordUser(email: String) throws -> (User, String)? {
        guard let row = try database.query("""
            SELECT users.* FROM identities JOIN users ON users.id = identities.user_id AND users.app_id = identities.app_id
            WHERE identities.app_id = \(appID) AND identities.provider = 'password' AND identities.subject = \(email) AND users.deleted_at IS NULL
            """).first, let hash = try row.optionalString("password_hash")
        else { return nil }
        return (try userRecord(row), hash)
    }

    func passwordHash(_ id: UserID) throws -> String? {
        try database.query("SELECT password_hash FROM users WHERE app_id = \(appID) AND id = \(id) AND deleted_at IS NULL").first?.optionalString("password_hash")
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
            throw PasswordConflict.emailTaken
        }
    }
}
