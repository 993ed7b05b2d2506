import Dispatch
import Foundation
import Synchronization

/// Upkeep that runs now and then on every node: purges whose work is safe to repeat and to run on
/// several nodes at once (each deletes what is due; two nodes deleting the same rows is harmless).
public struct PeriodicJob: Sendable {
    public let name: String
    public let everyMillis: Int64
    /// Does one round; returns how many rows it handled, for the log.
    public let run: @Sendable (_ now: Int64) throws -> Int

    public init(name: String, everyMillis: Int64, run: @escaping @Sendable (_ now: Int64) throws -> Int) {
        self.name = name
        self.everyMillis = everyMillis
        self.run = run
    }
}

/// The home of the periodic jobs: one thread per node, started and joined by the composition
/// root with the outbox worker. A failing job is logged and tried at its next turn.
public final class PeriodicJobs: Sendable {
    private let jobs: [PeriodicJob]
    private let clock: any Clock
    private let log: any LogSink
    private let lastRun: Mutex<[String: Int64]>
    private let running = Atomic<Bool>(false)
    private let wakeUp = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    /// How often the thread looks for due jobs: at most the shortest interval.
    private let tickMillis: Int
    private let threadName: String

    public init(_ jobs: [PeriodicJob], clock: any Clock, log: any LogSink = DiscardingLog(), threadName: String = "gatehouse-jobs") {
        self.jobs = jobs
        self.threadName = threadName
        self.tickMillis = Int(min(60_000, jobs.map(\.everyMillis).min() ?? 60_000))
        self.clock = clock
        self.log = log
        // A node that starts runs each job a turn later, not at once: restarts do not pile up purges.
        let now = clock.nowMillis()
        self.lastRun = Mutex(Dictionary(uniqueKeysWithValues: jobs.map { ($0.name, now) }))
    }

    /// Runs the jobs whose turn has come (`force`: every job); returns rows handled by name.
    @discardableResult
    public func runDue(force: Bool = false) -> [String: Int] {
        var handled: [String: Int] = [:]
        for job in jobs {
            let now = clock.nowMillis()
            guard force || lastRun.withLock({ now - ($0[job.name] ?? 0) >= job.everyMillis }) else { continue }
            lastRun.withLock { $0[job.name] = now }
            do {
                handled[job.name] = try job.run(now)
                if handled[job.name] ?? 0 > 0 { log.info("periodic job done", ["job": .string(job.name), "rows": .int(Int64(handled[job.name] ?? 0))]) }
            } catch {
                log.warning("periodic job failed", ["job": .string(job.name), "error": .string(String(describing: error))])
            }
        }
        return handled
    }

    public func start() {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let thread = Thread { [self] in
            while running.load(ordering: .acquiring) {
                runDue()
                _ = wakeUp.wait(timeout: .now() + .milliseconds(tickMillis))
            }
            finished.signal()
        }
        thread.name = threadName
        thread.start()
    }

    /// Stops the thread and waits for it (a job under way finishes).
    public func stop() {
        guard running.exchange(false, ordering: .acquiringAndReleasing) else { return }
        wakeUp.signal()
        finished.wait()
    }
}
