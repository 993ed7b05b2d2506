import Synchronization

/// A periodic poll of the database for a cache on the request path (ended sessions, changed
/// accounts). The node's cache thread runs it every `everyMillis` (``runIfDue(now:_:)``), so no
/// request waits for it. A request runs it itself only when that thread has fallen behind by
/// `overdueMillis` (``runIfOverdue(now:_:)``): then one request at a time pays for the freshness
/// the thread could not keep. Only one thread at a time runs the poll; the others go on with what
/// is known. A poll that fails is tried again after the interval, not on the next request.
final class PollSchedule: Sendable {
    private let everyMillis: Int64
    private let overdueMillis: Int64
    private let lastStart = Atomic<Int64>(Int64.min / 2)
    private let running = Atomic<Bool>(false)

    init(everyMillis: Int64) {
        self.everyMillis = everyMillis
        self.overdueMillis = everyMillis * 3 / 2
    }

    /// From the cache thread: runs `poll` if `everyMillis` have passed since the last one began.
    func runIfDue(now: Int64, _ poll: () -> Void) {
        run(now: now, after: everyMillis, poll)
    }

    /// From a request: runs `poll` only if the cache thread is `overdueMillis` late.
    func runIfOverdue(now: Int64, _ poll: () -> Void) {
        run(now: now, after: overdueMillis, poll)
    }

    private func run(now: Int64, after millis: Int64, _ poll: () -> Void) {
        guard now - lastStart.load(ordering: .relaxed) >= millis,
            running.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged
        else { return }
        defer { running.store(false, ordering: .releasing) }
        lastStart.store(now, ordering: .relaxed)
        poll()
    }
}
