import GatehouseCore

extension FactorID: SQLBindable { public var sqlValue: SQLValue { .text(rawValue) } }

/// TOTP factors, recovery codes and open second steps (migration 0021), bound to `appID`.
extension SQLAppScopedStore: MFAStore {
    var mfa: any MFAStore { self }

    func insertTOTPFactor(_ factor: TOTPFactor) throws {
        try database.execute("""
            INSERT INTO mfa_totp_factors (id, app_id, user_id, name, secret, confirmed_at, last_used_step, last_used_at, created_at)
            VALUES (\(factor.id), \(appID), \(factor.userID), \(factor.name), \(factor.sealedSecret), \(factor.confirmedAt), \(factor.lastUsedStep),
                    \(factor.lastUsedAt), \(factor.createdAt))
            """)
    }

    func deleteUnconfirmedTOTPFactors(of user: UserID) throws {
        try database.execute("DELETE FROM mfa_totp_factors WHERE app_id = \(appID) AND user_id = \(user) AND confirmed_at IS NULL")
    }

    func totpFactor(_ id: FactorID, user: UserID) throws -> TOTPFactor? {
        try database.query("SELECT * FROM mfa_totp_factors WHERE app_id = \(appID) AND id = \(id) AND user_id = \(user)").first.map(totpFactorRecord)
    }

    func confirmedTOTPFactors(of user: UserID) throws -> [TOTPFactor] {
        try database.query("""
            SELECT * FROM mfa_totp_factors WHERE app_id = \(appID) AND user_id = \(user) AND confirmed_at IS NOT NULL ORDER BY created_at, id
            """).map(totpFactorRecord)
    }

    func confirmedTOTPFactors(of users: [UserID]) throws -> [UserID: [TOTPFactor]] {
        guard !users.isEmpty else { return [:] }
        var factors: [UserID: [TOTPFactor]] = [:]
        for row in try database.query("""
            SELECT * FROM mfa_totp_factors
            WHERE app_id = \(appID) AND user_id IN (\(list: users.map(\.rawValue))) AND confirmed_at IS NOT NULL ORDER BY created_at, id
            """) {
            let factor = try totpFactorRecord(row)
            factors[factor.userID, default: []].append(factor)
        }
        return factors
    }

    func confirmTOTPFactor(_ id: FactorID, user: UserID, step: Int64, now: Int64) throws -> Bool {
        try database.execute("""
            UPDATE mfa_totp_factors SET confirmed_at = \(now), last_used_step = \(step), last_used_at = \(now)
            WHERE app_id = \(appID) AND id = \(id) AND user_id = \(user) AND confirmed_at IS NULL
            """) == 1
    }

    func useTOTPStep(_ id: FactorID, user: UserID, step: Int64, now: Int64) throws -> Bool {
        // One statement: of two requests with the same code, one moves the step on, the other finds it moved.
        try database.execute("""
            UPDATE mfa_totp_factors SET last_used_step = \(step), last_used_at = \(now)
            WHERE app_id = \(appID) AND id = \(id) AND user_id = \(user) AND confirmed_at IS NOT NULL
              AND (last_used_step IS NULL OR last_used_step < \(step))
            """) == 1
    }

    func deleteTOTPFactor(_ id: FactorID, user: UserID) throws -> Bool {
        try database.execute("DELETE FROM mfa_totp_factors WHERE app_id = \(appID) AND id = \(id) AND user_id = \(user)") == 1
    }

    func replaceRecoveryCodes(of user: UserID, hashes: [String], now: Int64) throws {
        try database.transaction { db in
            try db.execute("DELETE FROM mfa_recovery_codes WHERE app_id = \(appID) AND user_id = \(user)")
            for hash in hashes {
                try db.execute("""
                    INSERT INTO mfa_recovery_codes (app_id, user_id, code_hash, created_at) VALUES (\(appID), \(user), \(hash), \(now))
                    ON CONFLICT (app_id, user_id, code_hash) DO NOTHING
                    """)
            }
        }
    }

    func useRecoveryCode(of user: UserID, hash: String, now: Int64) throws -> Bool {
        try database.execute("""
            UPDATE mfa_recovery_codes SET used_at = \(now)
            WHERE app_id = \(appID) AND user_id = \(user) AND code_hash = \(hash) AND used_at IS NULL
            """) == 1
    }

    func deleteRecoveryCodes(of user: UserID) throws {
        try database.execute("DELETE FROM mfa_recovery_codes WHERE app_id = \(appID) AND user_id = \(user)")
    }

    func secondFactors(of user: UserID) throws -> SecondFactors {
        let row = try database.query("""
            SELECT (SELECT COUNT(*) FROM mfa_totp_factors WHERE app_id = \(appID) AND user_id = \(user) AND confirmed_at IS NOT NULL) AS totp,
                   (SELECT COUNT(*) FROM mfa_recovery_codes WHERE app_id = \(appID) AND user_id = \(user) AND used_at IS NULL) AS recovery,
                   (SELECT COUNT(*) FROM passkeys WHERE app_id = \(appID) AND user_id = \(user)) AS passkeys
            """).first
        return SecondFactors(
            totp: Int(try row?.int64("totp") ?? 0), recoveryCodesLeft: Int(try row?.int64("recovery") ?? 0), passkeys: Int(try row?.int64("passkeys") ?? 0))
    }

    func insertChallenge(_ challenge: MFAChallenge) throws {
        try database.execute("""
            INSERT INTO mfa_challenges (token_hash, app_id, user_id, method, provider, is_new_user, enroll, satisfied_by, created_at, expires_at)
            VALUES (\(challenge.tokenHash), \(appID), \(challenge.userID), \(challenge.method.rawValue), \(challenge.provider), \(challenge.isNewUser),
                    \(challenge.enroll),
                    \(challenge.satisfiedBy), \(challenge.createdAt), \(challenge.expiresAt))
            """)
    }

    func challenge(tokenHash: String, now: Int64) throws -> MFAChallenge? {
        guard let row = try database.query("""
            SELECT * FROM mfa_challenges WHERE token_hash = \(tokenHash) AND app_id = \(appID) AND used_at IS NULL AND expires_at > \(now)
            """).first, let method = SignInMethod(rawValue: try row.string("method"))
        else { return nil }
        return MFAChallenge(
            tokenHash: try row.string("token_hash"), userID: UserID(unchecked: try row.string("user_id")), method: method,
            provider: try row.optionalString("provider"), isNewUser: try row.bool("is_new_user"), enroll: try row.bool("enroll"), satisfiedBy: try row.optionalString("satisfied_by"),
            createdAt: try row.int64("created_at"), expiresAt: try row.int64("expires_at"))
    }

    func satisfyChallenge(tokenHash: String, by amr: String, now: Int64) throws -> Bool {
        try database.execute("""
            UPDATE mfa_challenges SET satisfied_by = \(amr)
            WHERE token_hash = \(tokenHash) AND app_id = \(appID) AND enroll = \(true) AND used_at IS NULL AND expires_at > \(now)
            """) == 1
    }

    func useChallenge(tokenHash: String, now: Int64) throws -> Bool {
        try database.execute("""
            UPDATE mfa_challenges SET used_at = \(now) WHERE token_hash = \(tokenHash) AND app_id = \(appID) AND used_at IS NULL AND expires_at > \(now)
            """) == 1
    }

    func forgetFactors(of user: UserID) throws -> [FactorID] {
        try database.execute("DELETE FROM mfa_recovery_codes WHERE app_id = \(appID) AND user_id = \(user)")
        try abandonChallenges(of: user)
        return try database.query("DELETE FROM mfa_totp_factors WHERE app_id = \(appID) AND user_id = \(user) RETURNING id, confirmed_at")
            .filter { try $0.optionalInt64("confirmed_at") != nil }.map { FactorID(unchecked: try $0.string("id")) }
    }

    func abandonChallenges(of user: UserID) throws {
        try database.execute("DELETE FROM mfa_challenges WHERE app_id = \(appID) AND user_id = \(user)")
    }
}

private func totpFactorRecord(_ row: SQLRow) throws -> TOTPFactor {
    TOTPFactor(
        id: FactorID(unchecked: try row.string("id")), userID: UserID(unchecked: try row.string("user_id")), name: try row.optionalString("name"),
        sealedSecret: try row.string("secret"), confirmedAt: try row.optionalInt64("confirmed_at"), lastUsedStep: try row.optionalInt64("last_used_step"),
        lastUsedAt: try row.optionalInt64("last_used_at"), createdAt: try row.int64("created_at"))
}
