import GatehouseCore

/// The `passkeys`, `webauthn_user_handles` and `webauthn_challenges` tables of one app
/// (migration 0022). Every query binds `app_id`.
struct SQLPasskeys: PasskeyStore {
    let database: any SQLDatabase
    let appID: AppID

    func userHandle(of user: UserID, proposing handle: String, now: Int64) throws -> String {
        try database.execute("""
            INSERT INTO webauthn_user_handles (app_id, user_id, handle, created_at) VALUES (\(appID), \(user), \(handle), \(now))
            ON CONFLICT (app_id, user_id) DO NOTHING
            """)
        guard let stored = try existingUserHandle(of: user) else { throw SQLError(kind: .other, message: "the user handle was not stored") }
        return stored
    }

    func existingUserHandle(of user: UserID) throws -> String? {
        try database.query("SELECT handle FROM webauthn_user_handles WHERE app_id = \(appID) AND user_id = \(user)").first?.string("handle")
    }

    func insertChallenge(hash: String, purpose: PasskeyPurpose, user: UserID?, expiresAt: Int64) throws {
        try database.execute("""
            INSERT INTO webauthn_challenges (app_id, hash, purpose, user_id, expires_at)
            VALUES (\(appID), \(hash), \(purpose.rawValue), \(user?.rawValue), \(expiresAt))
            """)
    }

    func takeChallenge(hash: String, purpose: PasskeyPurpose, now: Int64) throws -> TakenPasskeyChallenge? {
        // One statement: of two requests presenting the same challenge, one deletes the row.
        try database.query("""
            DELETE FROM webauthn_challenges WHERE app_id = \(appID) AND hash = \(hash) AND purpose = \(purpose.rawValue) AND expires_at > \(now)
            RETURNING user_id
            """).first.map { TakenPasskeyChallenge(purpose: purpose, userID: try $0.optionalString("user_id").map(UserID.init(unchecked:))) }
    }

    func insert(_ passkey: Passkey) throws {
        do {
            try database.execute("""
                INSERT INTO passkeys (app_id, id, user_id, credential_id, public_key, alg, sign_count, aaguid, backup_eligible, backed_up,
                                      transports, name, created_at, last_used_at)
                VALUES (\(appID), \(passkey.id.rawValue), \(passkey.userID), \(passkey.credentialID), \(passkey.publicKey), \(passkey.algorithm),
                        \(passkey.signCount), \(passkey.aaguid), \(passkey.backupEligible), \(passkey.backedUp),
                        \(passkey.transports.joined(separator: ",")), \(passkey.name), \(passkey.createdAt), \(passkey.lastUsedAt))
                """)
        } catch let error as SQLError where error.kind == .uniqueViolation {
            throw PasskeyConflict.credentialTaken
        }
    }

    func passkeys(of user: UserID) throws -> [Passkey] {
        try database.query("SELECT * FROM passkeys WHERE app_id = \(appID) AND user_id = \(user) ORDER BY created_at, id").map(Self.record)
    }

    func passkeys(of users: [UserID]) throws -> [UserID: [Passkey]] {
        guard !users.isEmpty else { return [:] }
        var passkeys: [UserID: [Passkey]] = [:]
        for row in try database.query("""
            SELECT * FROM passkeys WHERE app_id = \(appID) AND user_id IN (\(list: users.map(\.rawValue))) ORDER BY created_at, id
            """) {
            let passkey = try Self.record(row)
            passkeys[passkey.userID, default: []].append(passkey)
        }
        return passkeys
    }

    func passkey(_ id: PasskeyID, of user: UserID) throws -> Passkey? {
        try database.query("SELECT * FROM passkeys WHERE app_id = \(appID) AND id = \(id.rawValue) AND user_id = \(user)").first.map(Self.record)
    }

    func passkey(credentialID: String) throws -> Passkey? {
        try database.query("SELECT * FROM passkeys WHERE app_id = \(appID) AND credential_id = \(credentialID)").first.map(Self.record)
    }

    func rename(_ id: PasskeyID, of user: UserID, to name: String) throws -> Passkey? {
        try database.query("""
            UPDATE passkeys SET name = \(name) WHERE app_id = \(appID) AND id = \(id.rawValue) AND user_id = \(user) RETURNING *
            """).first.map(Self.record)
    }

    func delete(_ id: PasskeyID, of user: UserID) throws -> Passkey? {
        try database.query("DELETE FROM passkeys WHERE app_id = \(appID) AND id = \(id.rawValue) AND user_id = \(user) RETURNING *").first.map(Self.record)
    }

    func forgetPasskeys(of user: UserID) throws -> [Passkey] {
        try database.execute("DELETE FROM webauthn_user_handles WHERE app_id = \(appID) AND user_id = \(user)")
        try database.execute("DELETE FROM webauthn_challenges WHERE app_id = \(appID) AND user_id = \(user)")
        return try database.query("DELETE FROM passkeys WHERE app_id = \(appID) AND user_id = \(user) RETURNING *").map(Self.record)
    }

    func recordUse(_ id: PasskeyID, expectedCount: Int64, signCount: Int64, backedUp: Bool, now: Int64) throws -> Bool {
        try database.execute("""
            UPDATE passkeys SET sign_count = \(signCount), backed_up = \(backedUp), last_used_at = \(now)
            WHERE app_id = \(appID) AND id = \(id.rawValue) AND sign_count = \(expectedCount)
            """) == 1
    }

    private static func record(_ row: SQLRow) throws -> Passkey {
        let transports = try row.string("transports")
        return Passkey(
            id: PasskeyID(unchecked: try row.string("id")), userID: UserID(unchecked: try row.string("user_id")), credentialID: try row.string("credential_id"),
            publicKey: try row.string("public_key"), algorithm: try row.int64("alg"), signCount: try row.int64("sign_count"), aaguid: try row.string("aaguid"),
            backupEligible: try row.bool("backup_eligible"), backedUp: try row.bool("backed_up"),
            transports: transports.isEmpty ? [] : transports.split(separator: ",").map(String.init), name: try row.string("name"),
            createdAt: try row.int64("created_at"), lastUsedAt: try row.optionalInt64("last_used_at"))
    }
}

extension SQLAppScopedStore {
    var passkeys: any PasskeyStore { SQLPasskeys(database: database, appID: appID) }
}
