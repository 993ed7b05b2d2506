import Synchronization

/// Sessions that have ended, known to this node. Checking a token against it costs a set lookup:
/// one query per second per node (not per request) brings in sessions ended by other nodes, and
/// this node's own ends are added at once. Entries are dropped once no access token of theirs can
/// still be valid (the longest access-token lifetime an app can set).
public final class RevocationList: Sendable {
    private let store: any Store
    private let clock: any Clock
    private let pollEveryMillis: Int64
    private let keepMillis: Int64 = (86400 + 60) * 1000
    static let overlapMillis: Int64 = 15_000
    private let state: Mutex<State>
    private let polling = Mutex(false)

    private struct State {
        var ended: [SessionID: Int64] = [:]
        var polledUpTo: Int64
        var lastPoll: Int64
    }

    public init(store: any Store, clock: any Clock, pollEveryMillis: Int64 = 1000) {
        self.store = store
        self.clock = clock
        self.pollEveryMillis = pollEveryMillis
        let now = clock.nowMillis()
        // Sessions that ended before this node started may still have live access tokens.
        state = Mutex(State(polledUpTo: now - keepMillis, lastPoll: 0))
    }

    /// Records sessions this node has just ended.
    public func add(_ ids: [SessionID]) {
        let now = clock.nowMillis()
        state.withLock { s in for id in ids { s.ended[id] = now } }
    }

    public func isEnded(_ id: SessionID) -> Bool {
        pollIfDue()
        return state.withLock { $0.ended[id] != nil }
    }

    /// Polls when due. Only one thread polls at a time; the others use what is known.
    private func pollIfDue() {
        let now = clock.nowMillis()
        let (due, since) = state.withLock { s in (now - s.lastPoll >= pollEveryMillis, s.polledUpTo) }
        guard due else { return }
        let mine = polling.withLock { busy -> Bool in
            if busy { return false }
            busy = true
            return true
        }
        guard mine else { return }
        defer { polling.withLock { $0 = false } }
        guard let ended = try? store.sessionsEnded(since: since) else { return }
        state.withLock { s in
            for (id, at) in ended { s.ended[id] = at }
            // Overlap generously: `ended_at` comes from the ending node's clock, before its commit, so a
            // late commit or a skewed clock must still be caught. Re-reading is harmless (a set).
            s.polledUpTo = max(since, now - Self.overlapMillis)
            s.lastPoll = now
            if s.ended.count > 10_000 { s.ended = s.ended.filter { now - $0.value < keepMillis } }
        }
    }
}
