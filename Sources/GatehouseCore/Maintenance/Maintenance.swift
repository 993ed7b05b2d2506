import Foundation
import Synchronization

/// What one round deleted, by task, and the pages it gave back to the file system.
public struct MaintenanceReport: Sendable, Equatable {
    public var deleted: [MaintenanceTask: Int] = [:]
    public var pagesFreed = 0
    /// Statements run.
    public var batches = 0
    /// True when the round stopped at ``MaintenancePolicy/roundTimeLimit`` with work left.
    public var stoppedEarly = false

    public var rows: Int { deleted.values.reduce(0, +) }
}

/// The maintenance job: keeps storage bounded by deleting, in small batches, what no one needs
/// any more (see ``MaintenancePolicy``), one round at a time in the whole cluster.
public final class Maintenance: Sendable {
    public static let jobName = "maintenance"
    public let policy: MaintenancePolicy
    private let store: any MaintenanceStore
    private let log: any LogSink
    /// The task the next round starts with (this node's; 0 unless the last round ran out of time).
    private let resumeAt = Atomic<Int>(0)

    public init(store: any MaintenanceStore, policy: MaintenancePolicy, log: any LogSink = DiscardingLog()) {
        self.store = store
        self.policy = policy
        self.log = log
    }

    /// Runs one round at `now`; nil when another node's round is under way. A task that fails is
    /// logged and the round goes on with the next (one table's trouble does not let the others
    /// grow); the round throws the first failure once it is over.
    public func run(now: Int64) throws -> MaintenanceReport? {
        try store.exclusively { round in
            var report = MaintenanceReport()
            var firstFailure: (any Error)?
            let started = ContinuousClock.now
            let windows = policy.windows(now: now).filter { $0.1.from < $0.1.to }
            // Where the last round stopped at its time limit, if it did: the others' turn first.
            let first = resumeAt.load(ordering: .relaxed) % max(1, windows.count)
            var stoppedAt = 0
            tasks: for index in Array(first..<windows.count) + Array(0..<first) {
                let (task, window) = windows[index]
                do {
                    while true {
                        // A round that has worked its time stops at a batch's end (a shutdown waits
                        // for it); the next round goes on from this task.
                        if report.batches > 0, ContinuousClock.now - started > policy.roundTimeLimit {
                            report.stoppedEarly = true
                            stoppedAt = index
                            log.info("maintenance round stopped at its time limit", ["task": .string(task.rawValue)])
                            break tasks
                        }
                        let deleted = try round.delete(task, in: window, limit: policy.batchSize)
                        report.batches += 1
                        report.deleted[task, default: 0] += deleted
                        guard deleted == policy.batchSize else { break }
                        if policy.pauseBetweenBatches > .zero { Thread.sleep(forTimeInterval: policy.pauseBetweenBatches.seconds) }
                    }
                } catch let lost as MaintenanceTurnLost {
                    // Another node has the turn: its round does the rest.
                    log.warning("maintenance round stopped", ["task": .string(task.rawValue), "error": .string(lost.description)])
                    break tasks
                } catch {
                    log.warning("maintenance task failed", ["task": .string(task.rawValue), "error": .string(String(describing: error))])
                    firstFailure = firstFailure ?? error
                }
            }
            resumeAt.store(stoppedAt, ordering: .relaxed)
            report.pagesFreed = try round.compact(pagesPerStep: policy.vacuumPagesPerStep)
            if let firstFailure { throw firstFailure }
            let counts = report.deleted.filter { $0.value > 0 }
            if !counts.isEmpty || report.pagesFreed > 0 {
                var fields = Dictionary(uniqueKeysWithValues: counts.map { ($0.key.rawValue, JSON.int(Int64($0.value))) })
                fields["pages_freed"] = .int(Int64(report.pagesFreed))
                log.info("maintenance round done", fields)
            }
            return report
        }
    }

    /// The job for ``PeriodicJobs``: rows deleted (0 when another node had the turn).
    public var job: PeriodicJob {
        PeriodicJob(name: Self.jobName, everyMillis: policy.intervalMillis) { [self] now in try run(now: now)?.rows ?? 0 }
    }
}

extension Duration {
    fileprivate var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
