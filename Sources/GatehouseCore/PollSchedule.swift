import Synchronization

/// A periodic poll run from the request path by whichever thread finds it due: when it is not due
/// the check is one atomic load, and only one thread at a time runs it while the others go on with
/// what is known. A poll that fails is tried again after the interval, not on the next request.
final class PollSchedule: Sendable {
    private let everyMillis: Int64
    private let lastStart = Atomic<Int64>(Int64.min / 2)
    private let running = Atomic<Bool>(false)

    init(everyMillis: Int64) {
        self.everyMillis = everyMillis
    }

    func runIfDue(now: Int64, _ poll: () -> Void) {
        guard now - lastStart.load(ordering: .relaxed) >= everyMillis,
            running.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged
        else { return }
        defer { running.store(false, ordering: .releasing) }
        lastStart.store(now, ordering: .relaxed)
        poll()
    }
}
