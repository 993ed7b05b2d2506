import Foundation
import Synchronization

/// One user as an export reads them: the row, its ways to sign in and, when asked for, the stored
/// password hash.
public struct ExportedUser: Sendable, Equatable {
    public var user: User
    public var identities: [Identity]
    /// The password column as stored (an argon2id PHC string, or an imported hash's
    /// ``ImportedPasswordHash/storedForm``); nil when not asked for or when the user has none.
    public var passwordHash: String?

    public init(user: User, identities: [Identity], passwordHash: String?) {
        self.user = user
        self.identities = identities
        self.passwordHash = passwordHash
    }
}

/// `GET /v1/admin/users/export`: the app's users as NDJSON, one import line a user (API.md,
/// "Moving users in and out"), read a page at a time in id order (keyset), so that memory holds
/// one page whatever the number of users. The caller hands each page's bytes to a sink (the HTTP
/// layer's spool file) and sends them once the whole export is written.
///
/// Fairness: one export per app at a time on this node (a second is 429 with `Retry-After`), so
/// a tenant holds at most one offload thread, one database connection and one spool file for its
/// exports, whatever it asks; the slot is held until the response has been sent (``Ticket/end()``).
public final class UserExport: Sendable {
    private let store: any Store
    private let units: UnitOfWork
    private let clock: any Clock
    /// Opens the signer key of an imported Firebase hash, to read the hash (the key stays out).
    private let sealer: SecretSealer
    /// Users read per statement and written per sink call (1,000; smaller in tests, through
    /// `Configuration.exportPageSize`, which no environment variable sets).
    public let pageSize: Int
    /// The node's imports and exports (one export per app, a bound across apps).
    private let jobs: BulkJobs

    public init(store: any Store, units: UnitOfWork, sealer: SecretSealer, jobs: BulkJobs, clock: any Clock, pageSize: Int = 1000) {
        self.store = store
        self.jobs = jobs
        self.sealer = sealer
        self.units = units
        self.clock = clock
        self.pageSize = max(1, pageSize)
    }

    /// An export under way: its app's slot, held until ``end()`` (or until it is released).
    public final class Ticket: Sendable {
        public let app: AppID
        public let includeHashes: Bool
        private let release: Mutex<(@Sendable () -> Void)?>

        fileprivate init(app: AppID, includeHashes: Bool, release: @escaping @Sendable () -> Void) {
            self.app = app
            self.includeHashes = includeHashes
            self.release = Mutex(release)
        }

        /// Frees the app's slot; later calls do nothing.
        public func end() {
            let release = self.release.withLock { $0.take() }
            release?()
        }

        deinit { end() }
    }

    /// Takes the app's export slot. `includeHashes` needs the app's `allow_hash_export` (403
    /// `admin/hash-export-disabled` otherwise); an export of the app already under way on this
    /// node, or as many imports and exports as the node takes (``BulkJobs``), is 429
    /// `auth/too-many-requests`.
    public func start(app: AppContext, includeHashes: Bool) throws -> Ticket {
        if includeHashes, !app.settings.allowHashExport {
            throw GatehouseError(
                .hashExportDisabled, "This app does not export password hashes: turn its allow_hash_export setting on first, or export without include_hashes.")
        }
        let slot = try jobs.start(.userExport, app: app.id)
        return Ticket(app: app.id, includeHashes: includeHashes) { slot.end() }
    }

    /// Writes every user of the ticket's app, a page (``pageSize`` users, one statement) per call
    /// of `sink`, each user one line of JSON ending in `\n`; then records `users.exported` (`by:
    /// admin`, `include_hashes`, `count`; audit only). Returns the number of users written.
    public func write(_ ticket: Ticket, origin: RequestOrigin, into sink: ([UInt8]) throws -> Void) throws -> Int {
        let data = store.app(ticket.app)
        let now = clock.nowMillis()
        var after: UserID?
        var count = 0
        while true {
            let page = try data.users.exportPage(after: after, limit: pageSize, withPasswordHashes: ticket.includeHashes)
            if page.isEmpty { break }
            var bytes: [UInt8] = []
            for row in page {
                bytes += Self.line(row, hashes: ticket.includeHashes ? (sealer, ticket.app) : nil, now: now).serialized()
                bytes.append(0x0A)
            }
            try sink(bytes)
            count += page.count
            after = page.last?.user.id
            if page.count < pageSize { break }
        }
        try units.run(data) { tx in
            try tx.auditLog.record(Event(
                type: .usersExported, userID: nil, sessionID: nil, ip: origin.ip, userAgent: origin.userAgent,
                data: ["by": "admin", "include_hashes": .bool(ticket.includeHashes), "count": .int(Int64(count))], createdAt: clock.nowMillis()))
        }
        return count
    }

    /// One user's line: the import line's fields (`email`, `email_verified`, `first_name`,
    /// `last_name`, `created_at`, `identities: [{provider, subject}]`, `app_metadata`, and with
    /// hashes `password_hash`), plus what an import may carry over or ignore: `id`,
    /// `display_name`, `locale`, `user_metadata`, `last_sign_in_at`, an identity's `email`, and
    /// `ban` while one holds. Absent values are left out, never `null`. The `password` identity is
    /// not listed: the address and the password hash say it. `hashes`: with the password hash,
    /// read with the app's sealer.
    public static func line(_ row: ExportedUser, hashes: (sealer: SecretSealer, app: AppID)?, now: Int64) -> JSON {
        let user = row.user
        var fields: [String: JSON] = [
            "id": .string(user.id.rawValue), "email_verified": .bool(user.emailVerified), "created_at": .string(rfc3339(millis: user.createdAt)),
            "identities": .array(row.identities.filter { $0.provider != .password }.map { identity in
                var fields: [String: JSON] = ["provider": .string(identity.provider.rawValue), "subject": .string(identity.subject)]
                if let email = identity.email { fields["email"] = .string(email) }
                return .object(fields)
            }),
        ]
        if let email = user.email { fields["email"] = .string(email) }
        if let first = user.firstName { fields["first_name"] = .string(first) }
        if let last = user.lastName { fields["last_name"] = .string(last) }
        if let shown = user.displayName { fields["display_name"] = .string(shown) }
        if let locale = user.locale { fields["locale"] = .string(locale) }
        if let signedIn = user.lastSignInAt { fields["last_sign_in_at"] = .string(rfc3339(millis: signedIn)) }
        if user.appMetadata != .empty { fields["app_metadata"] = user.appMetadata.json }
        if user.userMetadata != .empty { fields["user_metadata"] = user.userMetadata.json }
        if let ban = user.ban, ban.holds(at: now) {
            var banFields: [String: JSON] = ["sanction_code": .string(ban.sanctionCode)]
            if let reason = ban.reason { banFields["reason"] = .string(reason) }
            if let until = ban.suspendedUntil { banFields["suspended_until"] = .string(rfc3339(millis: until)) }
            fields["ban"] = .object(banFields)
        }
        if let hashes, let stored = row.passwordHash, let hash = exportedHash(stored, sealer: hashes.sealer, app: hashes.app) { fields["password_hash"] = hash }
        return .object(fields)
    }

    /// A stored password hash as an import line's `password_hash`: Gatehouse's own as
    /// `{algorithm: argon2id, hash: "$argon2id$…"}`, an imported one as it was imported (for
    /// `firebase_scrypt` only `hash` and `salt`: the project's signer key is never exported).
    /// Nil for anything unreadable.
    static func exportedHash(_ stored: String, sealer: SecretSealer, app: AppID) -> JSON? {
        if stored.hasPrefix("$argon2id$") { return ["algorithm": "argon2id", "hash": .string(stored)] }
        return ImportedPasswordHash(storedForm: stored, sealer: sealer, app: app)?.exportForm
    }
}

extension ImportedPasswordHash {
    /// The `password_hash` object an import takes back (``decode(_:firebase:path:)``), but for
    /// `firebase_scrypt`, whose project parameters (the signer key above all) stay out: an import
    /// of it needs the app's `firebase.hash_config`.
    public var exportForm: JSON {
        func b64(_ bytes: [UInt8]) -> JSON { .string(Data(bytes).base64EncodedString()) }
        switch self {
        case .bcrypt(let hash):
            return ["algorithm": .string(algorithm), "hash": .string(hash)]
        case .argon2(let hash, _):
            return ["algorithm": .string(algorithm), "hash": .string(hash)]
        case .scrypt(let hash, let salt, let n, let r, let p):
            return ["algorithm": .string(algorithm), "hash": b64(hash), "salt": b64(salt), "n": .int(Int64(n)), "r": .int(Int64(r)), "p": .int(Int64(p))]
        case .pbkdf2(let hash, let salt, let iterations, _):
            return ["algorithm": .string(algorithm), "hash": b64(hash), "salt": b64(salt), "iterations": .int(Int64(iterations))]
        case .firebaseScrypt(let hash, let salt, _):
            return ["algorithm": .string(algorithm), "hash": b64(hash), "salt": b64(salt)]
        }
    }
}
