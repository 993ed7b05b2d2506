import GatehouseCrypto

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
    /// Takes (marks used) an unexpired, unused web flow of `provider` (`apple` or a tenant
    /// provider's id: the callback it came back to) by the hash of its state. The flow names
    /// its app: the provider's callback carries no app key.
    /// Only with the browser's binding (`bindingHash`): a callback without it uses nothing up, so
    /// whoever saw the state in Apple's URL cannot spoil the user's sign-in.
    func takeWebFlow(id: String, provider: String, bindingHash: String, now: Int64) throws -> WebFlow?
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
    /// The apps that have anonymous users (live ones), each once: where the expiry of anonymous
    /// accounts has something to look at (``AccountDeletion/eraseUnseenAnonymousUsers(now:perApp:limit:)``).
    func appsWithAnonymousUsers() throws -> [AppID]
    /// Deletes, with their ended sessions, the tombstones of accounts of any app erased before
    /// `before` (ms), at most `limit` (see ``AccountDeletionStore/erase(_:dueBy:now:)``); returns how many went.
    func purgeErasedAccounts(before: Int64, limit: Int) throws -> Int
    /// The app of an unexpired, unused web flow, read without using it up: the callback's limiter
    /// is the app's, and a callback refused by it must leave the flow for a retry.
    func webFlowApp(id: String, provider: String, now: Int64) throws -> AppID?
}

public protocol AppCatalog: Sendable {
    /// Inserts the app with its first keys in one transaction. Throws ``AppConflict/appKeyTaken`` when the app key is in use.
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
    /// Runs `body` with a store whose writes report to `ledger` (every event recorded, session
    /// ended and outbox item queued): the primitive of ``UnitOfWork``, through which services run
    /// their units of work. A store already in a unit of work runs `body` in it, reporting to its
    /// ledger. `.transaction`: everything `body` does through the store it is given (a change, its
    /// audit event, its outbox items) commits together, or nothing does when it throws. Store
    /// methods that open their own transaction join it (no savepoint): never catch a store's
    /// error inside `body` and carry on — on PostgreSQL the transaction is aborted, on SQLite the
    /// failed method may have written half. Throw it, or return a value that says what to answer
    /// once the unit has committed. Keep slow work (hashing, network) outside: on SQLite the
    /// transaction holds the database's write lock. `.statements`: no transaction around `body`;
    /// each store method is atomic on its own (a refresh stays one statement on PostgreSQL).
    func unit<T>(_ scope: UnitScope, reporting ledger: TransactionLedger, _ body: (any AppScopedStore) throws -> T) throws -> T
    /// The app's outbox items not yet claimed: in a unit of work, an item queued commits
    /// with the change that causes it.
    var outbox: any OutboxQueue { get }
    /// The app's emailed codes.
    var emailCodes: any EmailCodeStore { get }
    /// The app's audit log: events recorded (in a unit of work, with the change) and read.
    var auditLog: any AuditLogStore { get }
    /// Pending deletions and erasing the app's accounts.
    var deletion: any AccountDeletionStore { get }
    /// The app's users' files (their rows; the bytes are in a ``BlobStore``).
    var files: any FileStore { get }
    /// The app's settings, its switch, its signing keys and its secret keys.
    var settings: any AppSettingsStore { get }

    // MARK: The account features

    /// The app's users.
    var users: any UserStore { get }
    /// The app's ways to sign in: identities and, through them, password hashes (``passwords``).
    var identities: any IdentityStore { get }
    /// The app's sessions and refresh tokens.
    var sessions: any SessionStore { get }
    /// The app's rate-limit counters.
    var rateLimits: any RateLimitStore { get }
    /// The app's TOTP factors, recovery codes and open second steps.
    var mfa: any MFAStore { get }
    /// The app's passkeys, WebAuthn user handles and challenges.
    var passkeys: any PasskeyStore { get }
}

extension AppScopedStore {
    /// The password hashes: a password is the `password` identity's secret, kept by ``identities``.
    public var passwords: any PasswordStore { identities }
}
