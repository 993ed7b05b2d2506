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
    /// Runs `body` as one unit of work: everything it does through the store it is given (a
    /// change, its audit event, its outbox items) commits together, or nothing does when it throws.
    /// Store methods that open their own transaction join this one (no savepoint): never catch a
    /// store's error inside `body` and carry on — on PostgreSQL the transaction is aborted, on
    /// SQLite the failed method may have written half. Throw it, or return a value that says what
    /// to answer once the unit has committed. Keep slow work (hashing, network) outside: on
    /// SQLite the transaction holds the database's write lock.
    func transaction<T>(_ body: (any AppScopedStore) throws -> T) throws -> T
    /// Queues an outbox item (false when its idempotency key is queued already); in a
    /// ``transaction(_:)``, it commits with the change that causes it.
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
    /// The app's settings, its switch, its signing keys and its secret keys.
    var settings: any AppSettingsStore { get }

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
    /// the common case stays one statement on PostgreSQL (no unit of work around it).
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
