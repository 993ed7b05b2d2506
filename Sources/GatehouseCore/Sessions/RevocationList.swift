import Synchronization

/// Sessions that have ended, known to this node. Checking a token against it costs a set lookup:
/// one query per second per node (not per request), run by the node's cache thread
/// (``pollIfDue()``), brings in sessions ended by other nodes, and this node's own ends are added
/// at once. Entries are dropped once no access token of theirs can still be valid (the longest
/// access-token lifetime an app can set).
public final class RevocationList: Sendable {
    private let store: any Store
    private let clock: any Clock
    private let keepMillis: Int64 = (86400 + 60) * 1000
    static let overlapMillis: Int64 = 15_000

    /// Every authenticated request looks here, from every worker thread: the set is split into
    /// shards by session id so that lookups rarely meet on one lock, and "is a poll due" is an atomic.
    private let shards: [Shard] = (0..<16).map { _ in Shard() }
    private let schedule: PollSchedule
    /// Where the next poll starts, by the database's clock; nil before the first.
    private let polledUpTo = Mutex<Int64?>(nil)

    private final class Shard: Sendable {
        let ended = ReadWriteLock<[SessionID: Int64]>([:])
    }

    private let pollFailures: RepeatedFailureLog

    public init(store: any Store, clock: any Clock, pollEveryMillis: Int64 = 1000, log: any LogSink = DiscardingLog()) {
        self.pollFailures = RepeatedFailureLog(log, "the ended-sessions poll failed; sessions ended on other nodes are not seen until it succeeds")
        self.store = store
        self.clock = clock
        schedule = PollSchedule(everyMillis: pollEveryMillis, clock: clock)
    }

    /// Reads the sessions ended within the last day, before the node serves: until the first poll,
    /// a token of a session that ended before this node started would otherwise pass.
    public func load() throws {
        try poll(now: clock.nowMillis())
    }

    /// Records sessions this node has just ended.
    public func add(_ ids: [SessionID]) {
        let now = clock.nowMillis()
        for id in ids { shard(id).ended.write { $0[id] = now } }
    }

    public func isEnded(_ id: SessionID) -> Bool {
        let now = clock.nowMillis()
        schedule.runIfOverdue(now: now) { pollLogged(now: now) }
        return shard(id).ended.read { $0[id] != nil }
    }

    /// The cache thread's turn: polls when a second has passed since the last poll.
    public func pollIfDue() {
        let now = clock.nowMillis()
        schedule.runIfDue(now: now) { pollLogged(now: now) }
    }

    private func shard(_ id: SessionID) -> Shard {
        shards[id.shardNumber % shards.count]
    }

    private func pollLogged(now: Int64) {
        do { try poll(now: now) } catch { pollFailures.failed(error, now: now) }
    }

    private func poll(now: Int64) throws {
        let since = polledUpTo.withLock { $0 }
        // The first poll looks back as far as an access token lives: sessions that ended before
        // this node started may still have live tokens.
        let (ended, databaseNow) = try store.sessionsEnded(since: since, lookBack: keepMillis)
        // Kept by this node's clock (for dropping them a day later): as long ago as the database says.
        // Each session comes back in the polls of its overlap: only a new one takes a shard's
        // write lock, which every authenticated request's lookup in that shard waits behind.
        for (id, endedAt) in ended where !shard(id).ended.read({ $0[id] != nil }) {
            shard(id).ended.write { $0[id] = now - max(0, databaseNow - endedAt) }
        }
        // Overlap: a session's end is stamped by its statement, before its commit, so a commit that
        // lands late must still be caught. Re-reading is harmless (a set). From the database's
        // reading, not the furthest one: if its clock steps back (a failover), so does the poll.
        polledUpTo.withLock { $0 = databaseNow - Self.overlapMillis }
        for shard in shards where shard.ended.read({ $0.count > 1_000 }) {
            shard.ended.write { entries in entries = entries.filter { now - $0.value < keepMillis } }
        }
    }
}
