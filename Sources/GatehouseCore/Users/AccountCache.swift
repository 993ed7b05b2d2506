import Synchronization

/// Told by the store, after the commit, that a user's account (profile, sign-in time, password,
/// identities) changed.
public protocol UserChangeObserver: Sendable {
    func userChanged(app: AppID, user: UserID)
}

/// Accounts (a user and their identities) recently read on this node, so that `GET /v1/me` and
/// refresh do not read them from the database on every request.
///
/// How fresh an entry is:
/// - this node's own changes drop the entry as soon as they commit (the store calls
///   ``userChanged(app:user:)``);
/// - changes made by other nodes are seen by polling `users.changed_at` once a second (one query
///   per node, not per request, run by the node's cache thread: ``pollIfDue(store:)``),
///   re-reading an overlap for late commits: they show here within about a second;
/// - an entry is read again after `maxAgeMillis`: by one request, while the others go on with it
///   for at most `stalePollMillis` more (so an entry is used for at most 65 s); and not at all
///   while the poll has been failing (its last run ended in an error, not merely slow) for more
///   than `stalePollMillis` since its last success (then every read goes to the
///   database).
///
/// A read that races a change never stores what it read: every shard counts the invalidations it
/// has seen, and a load stores its result only if none happened in its shard since it began.
public final class AccountCache: UserChangeObserver, Sendable {
    /// Hashed by the user alone (a user id is random, and unique across apps): equal keys still
    /// hash alike, and a lookup hashes one string instead of two.
    private struct Key: Hashable {
        let app: AppID
        let user: UserID

        func hash(into hasher: inout Hasher) { hasher.combine(user) }
    }

    private struct ShardState {
        var entries: [Key: Account] = [:]
        var generation: UInt64 = 0
        /// Entries past `maxAgeMillis` that one request is reading again.
        var reloading: Set<Key> = []
    }

    private final class Shard: Sendable {
        let state = ReadWriteLock(ShardState())
    }

    private let clock: any Clock
    private let maxAgeMillis: Int64
    private let shardCapacity: Int
    static let stalePollMillis: Int64 = 5_000
    static let overlapMillis: Int64 = 5_000

    private let shards: [Shard] = (0..<16).map { _ in Shard() }
    private let schedule: PollSchedule
    private let lastPollSuccess = Atomic<Int64>(Int64.min / 2)
    /// Whether the last poll to end failed. A poll still under way (a database slow to answer)
    /// does not count as failing: the entries are as current as the database can tell.
    private let lastPollFailed = Atomic<Bool>(false)
    /// Where the next poll starts, by the database's clock; nil before the first.
    private let polledUpTo = Mutex<Int64?>(nil)

    private let pollFailures: RepeatedFailureLog

    /// - Parameters:
    ///   - capacity: at most this many accounts are kept (about half a KiB each, 1 KiB with a rendered body).
    public init(
        clock: any Clock, maxAgeSeconds: Int64 = 60, capacity: Int = 16_384, pollEveryMillis: Int64 = 1000, log: any LogSink = DiscardingLog()
    ) {
        self.pollFailures = RepeatedFailureLog(log, "the changed-accounts poll failed; accounts are read from the database until it succeeds")
        self.clock = clock
        self.maxAgeMillis = maxAgeSeconds * 1000
        self.shardCapacity = max(1, capacity / 16)
        schedule = PollSchedule(everyMillis: pollEveryMillis, clock: clock)
    }

    /// The user and their identities, from this cache or else from `store` (and then kept);
    /// `nil` when the user does not exist.
    public func account(app: AppID, user: UserID, store: any Store) throws -> Account? {
        let now = clock.nowMillis()
        schedule.runIfOverdue(now: now) { poll(store, now: now) }
        let key = Key(app: app, user: user)
        let shard = self.shard(key)
        // Only while the poll is current (or under way, not failing) can an entry be trusted to
        // reflect other nodes' changes.
        let lastSuccess = lastPollSuccess.load(ordering: .acquiring)
        let usable = now - lastSuccess <= Self.stalePollMillis || (lastSuccess > Int64.min / 2 && !lastPollFailed.load(ordering: .relaxed))
        var generation: UInt64 = 0
        var reloading = false
        if usable {
            let found = shard.state.read { state -> Account? in
                generation = state.generation
                return state.entries[key]
            }
            if let found {
                let age = now - found.loadedAt
                if age < maxAgeMillis { return found }
                // Past its age (nothing changed it, or it would be gone): one request reads it
                // again while the others go on with it, for a few seconds at most, instead of
                // all reading it at once.
                reloading = shard.state.write { $0.reloading.insert(key).inserted }
                if !reloading, age < maxAgeMillis + Self.stalePollMillis { return found }
            }
        }
        defer { if reloading { shard.state.write { _ = $0.reloading.remove(key) } } }
        guard let (loaded, identities) = try store.app(app).users.userWithIdentities(user) else { return nil }
        let entry = Account(user: loaded, identities: identities, loadedAt: now)
        if usable {
            shard.state.write { state in
                guard state.generation == generation else { return }
                if state.entries.count >= shardCapacity, state.entries[key] == nil {
                    state.entries.makeRoom(capacity: shardCapacity) { now - $0.loadedAt >= maxAgeMillis }
                }
                state.entries[key] = entry
            }
        }
        return entry
    }

    /// The cache thread's turn: polls when a second has passed since the last poll.
    public func pollIfDue(store: any Store) {
        let now = clock.nowMillis()
        schedule.runIfDue(now: now) { poll(store, now: now) }
    }

    public func userChanged(app: AppID, user: UserID) {
        invalidate(Key(app: app, user: user))
    }

    private func invalidate(_ key: Key) {
        shard(key).state.write { state in
            state.generation &+= 1
            state.entries[key] = nil
        }
    }

    private func shard(_ key: Key) -> Shard {
        shards[key.user.shardNumber % shards.count]
    }

    /// Drops the accounts other nodes changed since the last poll (and an overlap).
    private func poll(_ store: any Store, now: Int64) {
        let since = polledUpTo.withLock { $0 }
        let changed: [(AppID, UserID)]
        let databaseNow: Int64
        do {
            (changed, databaseNow) = try store.usersChanged(since: since, lookBack: Self.overlapMillis)
        } catch {
            lastPollFailed.store(true, ordering: .relaxed)
            pollFailures.failed(error, now: now)
            return
        }
        for (app, user) in changed { invalidate(Key(app: app, user: user)) }
        // `changed_at` is stamped by its statement, before the commit: overlap so that a late
        // commit is still seen. Invalidating twice is harmless. From the database's reading, not
        // the furthest one: if its clock steps back (a failover), so does the poll.
        polledUpTo.withLock { $0 = databaseNow - Self.overlapMillis }
        lastPollSuccess.store(now, ordering: .releasing)
        lastPollFailed.store(false, ordering: .relaxed)
    }
}

/// A user and their identities as ``AccountCache`` read them at one moment. Never changed: a
/// change to the account makes the cache drop it and read a new one, so what is made from it
/// (``meBody(_:)``) is as current as it is.
public final class Account: Sendable {
    public let user: User
    public let identities: [Identity]
    let loadedAt: Int64
    /// Set once, never replaced; released with the account. (`AtomicLazyReference.load` is not
    /// inlined, and looked up generic metadata on every call: 640 instructions.)
    private let kept = Atomic<Unmanaged<Rendered>?>(nil)

    private final class Rendered: Sendable {
        let bytes: [UInt8]
        init(_ bytes: [UInt8]) { self.bytes = bytes }
    }

    init(user: User, identities: [Identity], loadedAt: Int64) {
        self.user = user
        self.identities = identities
        self.loadedAt = loadedAt
    }

    deinit { kept.load(ordering: .acquiring)?.release() }

    /// `GET /v1/me`'s body for this account: `render()`'s bytes, made once and then kept with it
    /// (a client asks for the same account again and again, and rendering it was an eighth of
    /// that request). For that body only: whatever a later caller's `render` would make, it gets
    /// the first one's. Two threads may both render the first time; one result is kept and both
    /// return it.
    public func meBody(_ render: () -> [UInt8]) -> [UInt8] {
        if let kept = kept.load(ordering: .acquiring) { return kept.takeUnretainedValue().bytes }
        let made = Unmanaged.passRetained(Rendered(render()))
        let (stored, first) = kept.compareExchange(expected: nil, desired: made, ordering: .acquiringAndReleasing)
        if stored { return made.takeUnretainedValue().bytes }
        made.release()
        return first!.takeUnretainedValue().bytes
    }
}

extension Dictionary {
    /// Makes room in a full bounded cache: drops the `stale` entries, and if that frees less than
    /// an eighth, arbitrary ones (dictionary order is hash order) down to seven eighths of
    /// `capacity`, so that the next inserts do not each scan the whole cache again.
    mutating func makeRoom(capacity: Int, stale: (Value) -> Bool) {
        self = filter { !stale($0.value) }
        let target = capacity - Swift.max(1, capacity / 8)
        while count > target { remove(at: startIndex) }
    }
}
