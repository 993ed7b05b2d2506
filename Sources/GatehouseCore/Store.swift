import GatehouseCrypto

/// An app as stored. Settings are kept as JSON with every secret sealed under the master key.
public struct AppRecord: Sendable, Equatable {
    public var id: AppID
    /// The public key clients send in `X-App-Key`.
    public var appKey: String
    public var settingsJSON: String
    /// Bumped by every change to the app, its settings or its signing keys; per-node caches compare it.
    public var version: Int64
    /// `api` or `tenants` (created from a file under `Tenants/`).
    public var source: String
    /// For `tenants` apps: checksum of the file content last applied, so re-applying an unchanged file does nothing.
    public var sourceChecksum: String?
    /// The unkeyed checksum an earlier version stored (migration 0006), until the next apply of a
    /// Tenants folder replaces it.
    public var legacySourceChecksum: String?
    public var createdAt: Int64
    public var updatedAt: Int64
    /// When the platform operator switched the app off (ms), or nil while it is enabled: then no
    /// request of the app is served and its outbox items wait. Not a setting: no settings change
    /// or `Tenants/` file touches it.
    public var disabledAt: Int64?

    public init(
        id: AppID, appKey: String, settingsJSON: String, version: Int64 = 1, source: String, sourceChecksum: String? = nil,
        legacySourceChecksum: String? = nil, createdAt: Int64, updatedAt: Int64, disabledAt: Int64? = nil
    ) {
        self.disabledAt = disabledAt
        self.legacySourceChecksum = legacySourceChecksum
        self.id = id
        self.appKey = appKey
        self.settingsJSON = settingsJSON
        self.version = version
        self.source = source
        self.sourceChecksum = sourceChecksum
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}

/// A signing key's place in its rotation: published before use (`next`), signing (`current`),
/// published until its last tokens have expired (`retired`).
public enum SigningKeyState: String, Sendable {
    case next, current, retired
}

/// One rotation of an app's signing keys, as ``AppScopedStore/rotateSigningKeys(_:now:)`` does it.
public struct SigningKeyRotation: Sendable {
    public var newNext: SigningKeyRecord
    public var retiredExpiresAt: Int64
    public var revokePrevious: Bool
    public var minimumIntervalMillis: Int64
    public var maxRetired: Int

    public init(newNext: SigningKeyRecord, retiredExpiresAt: Int64, revokePrevious: Bool, minimumIntervalMillis: Int64, maxRetired: Int) {
        self.newNext = newNext
        self.retiredExpiresAt = retiredExpiresAt
        self.revokePrevious = revokePrevious
        self.minimumIntervalMillis = minimumIntervalMillis
        self.maxRetired = maxRetired
    }

    public enum Outcome: Sendable {
        /// The new signing key.
        case rotated(SigningKeyRecord)
        case noNextKey
    }

    /// The last rotation was less than the minimum interval ago.
    public struct TooSoon: Error {
        public let retryAfterMillis: Int64
        public init(retryAfterMillis: Int64) { self.retryAfterMillis = retryAfterMillis }
    }
}

public struct SigningKeyRecord: Sendable, Equatable {
    public var kid: String
    public var algorithm: SignatureAlgorithm
    /// The PKCS#8 PEM, sealed under the master key.
    public var sealedPrivateKey: String
    /// The public JWK as JSON text.
    public var publicJWK: String
    public var state: SigningKeyState
    public var createdAt: Int64
    /// For retired keys: when it leaves the JWKS.
    public var expiresAt: Int64?

    public init(
        kid: String, algorithm: SignatureAlgorithm, sealedPrivateKey: String, publicJWK: String, state: SigningKeyState,
        createdAt: Int64, expiresAt: Int64? = nil
    ) {
        self.kid = kid
        self.algorithm = algorithm
        self.sealedPrivateKey = sealedPrivateKey
        self.publicJWK = publicJWK
        self.state = state
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

/// An app's admin secret key, stored only as a hash.
public struct SecretKeyRecord: Sendable, Equatable {
    public var id: String
    /// Hex SHA-256 of the whole key (the key has 256 random bits, so a plain hash is enough).
    public var keyHash: String
    /// The first characters, to tell keys apart in logs and listings.
    public var hint: String
    public var createdAt: Int64
    public var expiresAt: Int64?

    public init(id: String, keyHash: String, hint: String, createdAt: Int64, expiresAt: Int64? = nil) {
        self.id = id
        self.keyHash = keyHash
        self.hint = hint
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

/// An error of a store's database. When `isUnavailable` (unreachable, or every connection busy),
/// the request is answered 503 `server/unavailable` with `Retry-After`; any other is a 500.
public protocol StoreFailure: Error, CustomStringConvertible {
    var isUnavailable: Bool { get }
    /// A value the database cannot hold (text with U+0000), refused before it was sent: the
    /// request's fault, answered 400 `request/validation-failed`.
    var isInvalidValue: Bool { get }
}

/// The persistence the domain needs. Written once in `GatehouseSQL` for SQLite and PostgreSQL.
public protocol Store: Sendable {
    /// Platform-level lookups: the only queries not scoped to one app.
    var apps: any AppCatalog { get }
    /// The outbox every node's worker delivers (not scoped to an app: a worker serves them all).
    var outbox: any OutboxStore { get }
    /// Everything that belongs to one app; every query binds `app_id`.
    func app(_ id: AppID) -> any AppScopedStore
    /// True when the database answers.
    func ping() -> Bool
    /// The connection pool's gauges, for `/metrics`.
    var connections: (open: Int, inUse: Int, waiting: Int) { get }
    /// A server-wide value (not of any app), such as the master-key check.
    func serverValue(_ name: String) throws -> String?
    /// Stores a server-wide value unless one is already there.
    func setServerValueIfAbsent(_ name: String, _ value: String) throws
    /// Sessions of any app that ended at or after `since`, by the database's clock (ms), or within
    /// `lookBack` ms before its present time when `since` is nil; with that present time, for the
    /// next call. Every node's revocation list polls this: one clock for all nodes, so a node whose
    /// own clock lags cannot end a session the others miss.
    /// Each session comes with when it ended, by the same clock.
    func sessionsEnded(since: Int64?, lookBack: Int64) throws -> (ended: [(SessionID, Int64)], databaseNow: Int64)
    /// Users of any app whose account changed at or after `since` by the database's clock (ms,
    /// `users.changed_at`), or within `lookBack` ms before its present time when `since` is nil;
    /// with that present time, for the next call. Every node's `AccountCache` polls this.
    func usersChanged(since: Int64?, lookBack: Int64) throws -> (changed: [(AppID, UserID)], databaseNow: Int64)
    /// Takes (marks used) an unexpired, unused web flow by the hash of its state. The flow names
    /// its app: the callback from Apple carries no app key.
    /// Only with the browser's binding (`bindingHash`): a callback without it uses nothing up, so
    /// whoever saw the state in Apple's URL cannot spoil the user's sign-in.
    func takeWebFlow(id: String, bindingHash: String, now: Int64) throws -> WebFlow?
    /// Records the use of a provider token's nonce under `key` (a digest of issuer, subject and
    /// nonce) until `expiresAt` (ms); false when it was used already and has not expired. Not
    /// scoped to an app: a token replayed to another app that trusts the same client id is a
    /// replay too.
    func useProviderNonce(key: String, expiresAt: Int64, now: Int64) throws -> Bool
    /// Forgets a use recorded by ``useProviderNonce(key:expiresAt:now:)``: the sign-in it was for
    /// could not finish for a reason that was not the token's (the provider was unreachable).
    func releaseProviderNonce(key: String) throws
    /// Accounts of any app whose deletion grace period has ended (``PendingDeletion/purgeAt`` at
    /// or before `now`), oldest due first, at most `limit`: the purge job's work.
    func accountsDueForPurge(now: Int64, limit: Int) throws -> [(AppID, UserID)]
    /// Deletes, with their ended sessions, the tombstones of accounts of any app erased before
    /// `before` (ms), at most `limit` (see ``AccountDeletionStore/erase(_:dueBy:now:)``); returns how many went.
    func purgeErasedAccounts(before: Int64, limit: Int) throws -> Int
    /// The app of an unexpired, unused web flow, read without using it up: the callback's limiter
    /// is the app's, and a callback refused by it must leave the flow for a retry.
    func webFlowApp(id: String, now: Int64) throws -> AppID?
}

public protocol AppCatalog: Sendable {
    /// Inserts the app with its first keys in one transaction. Throws `admin/app-key-taken` when the app key is in use.
    /// `allowedOrigins` feeds the index that answers CORS preflights (which carry no app key).
    func insert(_ app: AppRecord, allowedOrigins: [String], secretKey: SecretKeyRecord?, signingKeys: [SigningKeyRecord]) throws
    func find(appKey: String) throws -> AppRecord?
    func find(id: AppID) throws -> AppRecord?
    /// Every app, oldest first (for the operator's `gatehouse apps list`).
    func all() throws -> [AppRecord]
    /// The app owning an unexpired secret key with this hash.
    func find(secretKeyHash: String, now: Int64) throws -> AppRecord?
    /// The current version of an app, for cache revalidation; nil when it no longer exists.
    func version(of id: AppID) throws -> Int64?
    /// True when some app lists this origin in `allowed_origins`.
    func isOriginAllowedByAnyApp(_ origin: String) throws -> Bool
    /// Drops every app's unkeyed checksum of an earlier version.
    func forgetLegacySourceChecksums() throws
}

public protocol AppScopedStore: Sendable {
    var appID: AppID { get }
    /// Runs `body` in one transaction: everything it does through the store it is given (a
    /// change, its audit event, its outbox items) commits together, or nothing does when it throws.
    /// That store reports to `ledger` every event it records, session it ends and outbox item it
    /// queues. The primitive of ``UnitOfWork``, through which services run their units of work.
    /// Store methods that open their own transaction join this one (no savepoint): never catch a
    /// store's error inside `body` and carry on — on PostgreSQL the transaction is aborted, on
    /// SQLite the failed method may have written half. Throw it, or return a value that says what
    /// to answer once the unit has committed. Keep slow work (hashing, network) outside: on
    /// SQLite the transaction holds the database's write lock.
    func transaction<T>(reporting ledger: TransactionLedger, _ body: (any AppScopedStore) throws -> T) throws -> T
    /// The ledger this store reports to: its unit of work's, or its autocommit scope's
    /// (``reporting(to:)``); nil for a plain store.
    var ledger: TransactionLedger? { get }
    /// True when bound to an open transaction (a unit of work's).
    var inTransaction: Bool { get }
    /// This store outside any transaction, its writes reporting to `ledger`: each of its methods
    /// that opens a transaction of its own reports in it (its events fanned out before it commits).
    func reporting(to ledger: TransactionLedger) -> any AppScopedStore
    /// Queues an outbox item (false when its idempotency key is queued already); in a
    /// unit of work, it commits with the change that causes it.
    func enqueue(_ item: NewOutboxItem, now: Int64) throws -> Bool
    /// Removes a queued item not yet attempted nor held by a worker (false when there is none):
    /// a unit of work that makes an item queued ahead of it unneeded (``BlobDeletion``'s reservation).
    func withdraw(idempotencyKey: String) throws -> Bool
    /// The app's emailed codes.
    var emailCodes: any EmailCodeStore { get }
    /// The app's audit log.
    var auditLog: any AuditLogStore { get }
    /// Pending deletions and erasing the app's accounts.
    var deletion: any AccountDeletionStore { get }
    /// The app's users' files (their rows; the bytes are in a ``BlobStore``).
    var files: any FileStore { get }
    /// Replaces the settings and bumps the version, if the version is still `expectedVersion`
    /// (nil: whatever it is). Returns the updated record, or nil when another change came first.
    func updateSettings(json: String, allowedOrigins: [String], sourceChecksum: String?, expectedVersion: Int64?, now: Int64) throws -> AppRecord?
    /// Switches the app off (`disabledAt`) or on again (nil) and bumps the version, so that every
    /// node's cache sees it; the record, or nil when the app does not exist or is in that state
    /// already (two switches at once: one changes it).
    func setDisabled(at disabledAt: Int64?, now: Int64) throws -> AppRecord?
    /// Stores the checksum of the `Tenants/` file the settings came from (and drops the legacy
    /// one), changing nothing else: the settings are already the file's.
    func keepSourceChecksum(_ checksum: String) throws
    /// Keys not yet expired, any state.
    func signingKeys(now: Int64) throws -> [SigningKeyRecord]
    /// In one transaction (see ``SigningKeyRotation``): `next` becomes `current`, `current` becomes
    /// `retired` until `retiredExpiresAt` (or is deleted with every retired key when
    /// `revokePrevious`), retired keys beyond the newest `maxRetired` and expired keys are deleted,
    /// `newNext` is added as `next`, and the app's version is bumped. Throws
    /// ``SigningKeyRotation/TooSoon`` when the newest key is younger than the minimum interval.
    func rotateSigningKeys(_ rotation: SigningKeyRotation, now: Int64) throws -> SigningKeyRotation.Outcome
    /// Adds a secret key; every other unexpired key is set to expire at `othersExpireAt` (or earlier if already sooner).
    func addSecretKey(_ key: SecretKeyRecord, othersExpireAt: Int64) throws

    // MARK: Users and identities

    /// Inserts a user with one identity and records `event` (its sign-up), in one transaction.
    /// Throws `auth/email-already-in-use` when the identity exists.
    /// The identity is nil for an account made by an emailed code: it signs in by its address.
    func insertUser(_ user: User, passwordHash: String?, identity: Identity?, event: Event) throws
    func user(_ id: UserID) throws -> User?
    /// The account an emailed code for this address reaches (several share an address only under
    /// `email_collision: separate`): one whose address is verified, the one with a password at it
    /// first, else the oldest; else an unverified account with a password at the address (which
    /// the code then takes from whoever made it). Never an account whose provider vouched for
    /// nothing: an address typed into a provider proves nothing.
    func user(email: String) throws -> User?
    /// Marks the address verified, if the user's address is still `email`; the user, or nil.
    func markEmailVerified(_ id: UserID, email: String, now: Int64) throws -> User?
    /// Sets a new, verified address (and the password identity's subject) if the address is still
    /// `old`; nil when it changed meanwhile. Throws `auth/email-already-in-use` when another
    /// account signs in with a password at the new address.
    func changeEmail(_ id: UserID, from old: String?, to new: String, now: Int64) throws -> User?
    /// Sets or lifts (nil) the user's ban; the user, or nil when there is none.
    func setBan(_ id: UserID, _ ban: Ban?, now: Int64) throws -> User?
    /// Drops every way to sign in to the account (password, identities, kept provider tokens,
    /// web-flow login codes not yet exchanged); returns the providers of the identities removed.
    func forgetSignInMethods(_ id: UserID, now: Int64) throws -> [String]
    /// The user with this password identity and their password hash.
    func passwordUser(email: String) throws -> (User, String)?
    func passwordHash(_ id: UserID) throws -> String?
    func updateProfile(_ id: UserID, firstName: String?, lastName: String?, photoURL: String?, now: Int64) throws -> User?
    /// Sets the password hash if the stored one is still `replacing` (nil: the user has none), and
    /// adds the password identity when `addIdentity` is given; false, writing nothing, when the
    /// stored hash changed meanwhile (a concurrent change won).
    func setPasswordHash(_ id: UserID, hash: String, replacing: String?, addIdentity: Identity?, now: Int64) throws -> Bool
    func identities(_ id: UserID) throws -> [Identity]
    /// The app's users, newest first (ties by id), each with their identities: after `after` (the
    /// previous page's last user), at most `limit`. `query` matches an exact user id, or a
    /// case-insensitive substring of the email, first or last name (trigram-indexed on both databases, migration 0013).
    func users(matching query: String?, after: (createdAt: Int64, id: UserID)?, limit: Int) throws -> [(User, [Identity])]
    /// The user and their identities, read together (one statement).
    func userWithIdentities(_ id: UserID) throws -> (User, [Identity])?
    /// The user with this provider identity.
    func user(provider: String, subject: String) throws -> User?
    /// True when some user of the app has this email (any sign-in method), other than `except`.
    func emailInUse(_ email: String, except: UserID?) throws -> Bool
    /// Links an identity. Throws `auth/credential-already-in-use` when it is linked already.
    func addIdentity(_ user: UserID, _ identity: Identity) throws
    /// Unlinks, unless it is the user's only way to sign in (checked atomically); for `password`
    /// also forgets the hash. False when nothing was removed.
    func removeIdentity(_ user: UserID, provider: String, now: Int64) throws -> Bool
    /// Sets names only where the user has none (Apple sends the name once).
    func fillNames(_ user: UserID, firstName: String?, lastName: String?, now: Int64) throws
    /// Locks the user's row for the rest of the transaction and reads it (nil: no such live
    /// user). A deletion starts here; whatever else must not interleave with one (a new session,
    /// a kept provider token) takes the row too.
    func lockUser(_ id: UserID) throws -> User?
    /// The provider refresh tokens kept for the user (sealed), to revoke before erasing them.
    func providerTokens(_ user: UserID) throws -> [StoredProviderToken]
    /// Keeps a provider refresh token (sealed) for revocation at account deletion; false (nothing
    /// kept) when the account is gone.
    @discardableResult
    func saveProviderToken(_ user: UserID, provider: String, clientID: String, sealedToken: String, now: Int64) throws -> Bool
    func insertWebFlow(_ flow: WebFlow) throws
    func insertLoginCode(_ code: LoginCode) throws
    /// Takes (marks used) an unexpired, unused login code.
    func takeLoginCode(hash: String, now: Int64) throws -> LoginCode?

    // MARK: Sessions

    /// Starts a session, in one transaction: the session with its first refresh token, the
    /// user's last sign-in set to the session's start, and `event` (its sign-in) recorded.
    ///
    /// Only for an account that, once the transaction holds its row, is neither deleted nor
    /// pending deletion, is not banned at `session.createdAt`, and still has the password hash
    /// `passwordHash` (a password sign-in passes the hash it checked; other sign-ins nil). Else
    /// it throws ``SessionRefusal`` and stores nothing. A deletion, a ban and a password change
    /// take the user's row before they end the sessions, so a sign-in that raced one has either
    /// committed first, and had its session ended, or is refused here.
    func insertSession(_ session: Session, refreshTokenHash: String, event: Event, passwordHash: String?) throws
    func session(_ id: SessionID) throws -> Session?
    /// Sessions of the user that have not ended, not expired and were last used at or after
    /// `usedSince` (the app's idle timeout; 0 when it has none), newest first.
    func activeSessions(_ user: UserID, now: Int64, usedSince: Int64) throws -> [Session]
    /// Ends one session of the user; false when it was not theirs or had already ended.
    func endSession(_ id: SessionID, user: UserID, reason: SessionEndReason, now: Int64) throws -> Bool
    /// Ends the user's sessions except `keeping`; returns the ids ended.
    func endSessions(of user: UserID, keeping: SessionID?, reason: SessionEndReason, now: Int64) throws -> [SessionID]
    /// Refresh-token rotation in one transaction (see `RefreshOutcome`). A session last used
    /// before `usedSince` (idle) is not live: its token rotates to nothing (`.invalid`).
    /// A reuse that ends the session now records `reuseEvents(session)` in the same transaction;
    /// the common case stays one statement on PostgreSQL (no unit of work around it: run it
    /// through ``UnitOfWork/autocommit(_:_:)``, so that a reuse's effects follow).
    func rotateRefreshToken(
        presentedHash: String, successorHash: String, graceMillis: Int64, usedSince: Int64, origin: RequestOrigin, now: Int64,
        reuseEvents: (Session) -> [Event]
    ) throws -> RefreshOutcome
    func setAuthTime(_ id: SessionID, now: Int64) throws

    // MARK: Events and limits

    func record(_ event: Event) throws
    /// Counts a hit in the fixed window starting at `windowStart`; returns the hits in that window so far.
    func hitRateLimit(bucket: String, windowStart: Int64) throws -> Int64
    /// The hits counted in `bucket` in the window starting at `windowStart` (0 for another window).
    func rateLimitHits(bucket: String, windowStart: Int64) throws -> Int64
    /// Deletes this app's counter of `bucket`.
    func resetRateLimit(bucket: String) throws
    /// Deletes this app's counters of windows that started before `before`.
    func purgeRateLimits(before: Int64) throws
}
