import Synchronization

/// A periodic poll of the database for a cache on the request path (ended sessions, changed
/// accounts). The node's cache thread runs it every `everyMillis` (``runIfDue(now:_:)``), so no
/// request waits for it. A request runs it itself only when that thread has fallen behind: no
/// poll under way, and none finished in the last `overdueMillis` (``runIfOverdue(now:_:)``); then
/// one request at a time pays for the freshness the thread could not keep. Counted from the last
/// poll's end, not its start: when the database is slow to answer, the thread's poll has just
/// waited as long as a request's would, and a request starting another at once would only wait
/// again (ADR 0022). Only one thread at a time runs the poll; the others go on with what is known.
/// A poll that fails is tried again after the interval, not on the next request.
final class PollSchedule: Sendable {
    private let everyMillis: Int64
    private let overdueMillis: Int64
    private let clock: any Clock
    private let lastStart = Atomic<Int64>(Int64.min / 2)
    private let lastEnd = Atomic<Int64>(Int64.min / 2)
    private let running = Atomic<Bool>(false)

    init(everyMillis: Int64, clock: any Clock) {
        self.everyMillis = everyMillis
        self.overdueMillis = everyMillis * 3 / 2
        self.clock = clock
    }

    /// From the cache thread: runs `poll` if `everyMillis` have passed since the last one began.
    func runIfDue(now: Int64, _ poll: () -> Void) {
        run(now: now, when: { now - lastStart.load(ordering: .relaxed) >= everyMillis }, poll)
    }

    /// From a request: runs `poll` only if none has ended in the last `overdueMillis`.
    func runIfOverdue(now: Int64, _ poll: () -> Void) {
        run(now: now, when: { now - lastEnd.load(ordering: .relaxed) >= overdueMillis }, poll)
    }

    /// `due` is asked before taking the turn (cheap, and most calls stop there) and again once
    /// taken: a poll that ended in between must not be followed at once by another.
    private func run(now: Int64, when due: () -> Bool, _ poll: () -> Void) {
        guard due(), running.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else { return }
        defer { running.store(false, ordering: .releasing) }
        guard due() else { return }
        lastStart.store(now, ordering: .relaxed)
        poll()
        lastEnd.store(clock.nowMillis(), ordering: .relaxed)
    }
}
