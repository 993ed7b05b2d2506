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

/// Why ``AppCatalog/insert(_:allowedOrigins:secretKey:signingKeys:)`` stored nothing.
public enum AppCatalogConflict: Error, Sendable, Equatable {
    /// Another app uses the app key.
    case appKeyTaken
}

public protocol AppCatalog: Sendable {
    /// Inserts the app with its first keys in one transaction. Throws ``AppCatalogConflict/appKeyTaken`` when the app key is in use.
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
    /// Runs `body` as one unit of work: everything it does through the store it is given (a
    /// change, its audit event, its outbox items) commits together, or nothing does when it throws.
    /// Store methods that open their own transaction join this one (no savepoint): never catch a
    /// store's error inside `body` and carry on — on PostgreSQL the transaction is aborted, on
    /// SQLite the failed method may have written half. Throw it, or return a value that says what
    /// to answer once the unit has committed. Keep slow work (hashing, network) outside: on
    /// SQLite the transaction holds the database's write lock.
    func transaction<T>(_ body: (any AppScopedStore) throws -> T) throws -> T
    /// The app's outbox items not yet claimed: in a ``transaction(_:)``, an item queued commits
    /// with the change that causes it.
    var outbox: any OutboxQueue { get }
    /// The app's emailed codes.
    var emailCodes: any EmailCodeStore { get }
    /// The app's audit log: events recorded (in a ``transaction(_:)``, with the change) and read.
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

    // MARK: The account features

    /// The app's users.
    var users: any UserStore { get }
    /// The app's ways to sign in: identities and, through them, password hashes (``passwords``).
    var identities: any IdentityStore { get }
    /// The app's sessions and refresh tokens.
    var sessions: any SessionStore { get }
    /// The app's rate-limit counters.
    var rateLimits: any RateLimitStore { get }
}

extension AppScopedStore {
    /// The password hashes: a password is the `password` identity's secret, kept by ``identities``.
    public var passwords: any PasswordStore { identities }
}
