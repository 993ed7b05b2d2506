import Dispatch
import Foundation
import GatehouseCrypto
import Synchronization

/// Delivers the outbox: claims due items under a lease, hands each to its kind's handler, and
/// records the outcome: delivered, retried with back-off (``OutboxRetryPolicy``), or dead-lettered
/// (an `outbox.dead_lettered` audit event of the item's app, and a metric), never dropped. It knows
/// no kind: a new kind is a new ``OutboxHandler``.
///
/// One per node, on a thread of its own (``start()``/``stop()``). Several nodes on one database
/// share the work: a claim is exclusive, and a node that dies holding items loses them to the
/// others when their lease runs out.
public final class OutboxWorker: Sendable {
    /// How long a claim holds an item. An item whose lease ran out mid-delivery could be
    /// retaken by another node and delivered twice, so no delivery starts unless it can end
    /// within the lease (``deliveryBudgetMillis``).
    public static let leaseMillis: Int64 = 60_000
    /// The longest one delivery may take: a handler must end within it (the mailer gives up
    /// after 30 s, and waits 3 s more at most for the server's goodbye).
    public static let deliveryBudgetMillis: Int64 = 35_000

    public let node: String
    private let outbox: any OutboxStore
    private let handlers: [OutboxKind: any OutboxHandler]
    private let policy: OutboxRetryPolicy
    private let clock: any Clock
    private let pollInterval: Double
    /// Deliveries of one batch under way at once: most of a delivery is waiting on the other side.
    private let lanes: Int
    private let log: any LogSink

    /// Deliveries since start, for `/metrics`.
    public let delivered = Atomic<Int>(0)
    public let retried = Atomic<Int>(0)
    public let deadLettered = Atomic<Int>(0)

    private let wakeUp = DispatchSemaphore(value: 0)
    private let running = Atomic<Bool>(false)
    /// True while the thread runs (``runOnce()`` called directly, as tests do, releases nothing).
    private let threaded = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    /// - Parameters:
    ///   - pollInterval: seconds between looks at the table when nothing woke the worker (items
    ///     queued by other nodes, retries coming due).
    ///   - log: what the worker cannot tell a caller (a delivery that failed, a dead letter).
    public init(
        outbox: any OutboxStore, handlers: [any OutboxHandler], policy: OutboxRetryPolicy, clock: any Clock,
        pollInterval: Double = 1, lanes: Int = 8, node: String = "node_" + Digest.hex(SecureRandom.bytes(6)),
        log: any LogSink = DiscardingLog()
    ) {
        self.outbox = outbox
        self.handlers = Dictionary(handlers.map { ($0.kind, $0) }, uniquingKeysWith: { first, _ in first })
        self.policy = policy
        self.clock = clock
        self.pollInterval = pollInterval
        self.lanes = max(1, lanes)
        self.node = node
        self.log = log
    }

    /// Items claimed at once: two per lane, so a claim's cost is shared by more deliveries.
    private var batchSize: Int { 2 * lanes }

    /// Claims one batch of due items and delivers it; returns how many items it handled. The
    /// worker's thread calls this in a loop; tests call it directly to step the outbox.
    @discardableResult
    public func runOnce() throws -> Int {
        let claimedAt = clock.nowMillis()
        let claimed = try outbox.claim(kinds: Array(handlers.keys), limit: batchSize, leaseMillis: Self.leaseMillis, node: node, now: claimedAt)
        let laneCount = min(lanes, claimed.count)
        guard laneCount > 0 else { return 0 }
        // Each lane takes the next item until none is left. An item is given back (due at once,
        // for any node) rather than started when its lease could end before its delivery — a slow
        // first delivery on a lane — or when the worker is stopping; deliveries under way finish.
        let next = Atomic(0)
        let handled = Atomic(0)
        let failure = Mutex<(any Error)?>(nil)
        let done = DispatchSemaphore(value: 0)
        for lane in 0..<laneCount {
            let thread = Thread { [self] in
                while case let index = next.add(1, ordering: .relaxed).oldValue, index < claimed.count {
                    do {
                        let stopping = threaded.load(ordering: .relaxed) && !running.load(ordering: .relaxed)
                        if stopping || clock.nowMillis() + Self.deliveryBudgetMillis > claimedAt + Self.leaseMillis {
                            try outbox.release([claimed[index].id], node: node)
                        } else {
                            try deliver(claimed[index])
                            handled.add(1, ordering: .relaxed)
                        }
                    } catch {
                        failure.withLock { $0 = $0 ?? error }
                    }
                }
                done.signal()
            }
            thread.name = "gatehouse-outbox-\(lane)"
            thread.start()
        }
        for _ in 0..<laneCount { done.wait() }
        if let error = failure.withLock({ $0 }) { throw error }
        return handled.load(ordering: .relaxed)
    }

    private func deliver(_ item: OutboxItem) throws {
        // Claimed by kind, so a handler is there.
        let outcome = handlers[item.kind].map { $0.deliver(item) } ?? .retry(reason: "no handler for \(item.kind) on this node")
        let now = clock.nowMillis()
        let attempt = item.attempts + 1
        switch outcome {
        case .delivered:
            try outbox.markDelivered(item.id, node: node, now: now)
            delivered.add(1, ordering: .relaxed)
            log.debug("outbox item delivered", ["id": .string(item.id), "kind": .string(item.kind.rawValue), "attempt": .int(Int64(attempt))])
        case .retry(let reason, let notBefore):
            let next = max(policy.nextAttempt(afterFailure: attempt, now: now), notBefore ?? 0)
            if policy.hasGivenUp(createdAt: item.createdAt, nextAttemptAt: next, after: handlers[item.kind]?.giveUpAfterMillis) {
                try deadLetter(item, reason: "gave up after \(attempt) attempts: \(reason)", now: now)
            } else {
                try outbox.markRetry(item.id, node: node, nextAttemptAt: next, error: reason, now: now)
                retried.add(1, ordering: .relaxed)
                log.warning("outbox delivery failed", ["id": .string(item.id), "kind": .string(item.kind.rawValue), "attempt": .int(Int64(attempt)), "reason": .string(reason)])
            }
        case .dead(let reason):
            try deadLetter(item, reason: reason, now: now)
        }
    }

    private func deadLetter(_ item: OutboxItem, reason: String, now: Int64) throws {
        let event = item.appID.map { app in
            (app: app, event: Event(
                type: .outboxDeadLettered, userID: nil, sessionID: nil, ip: nil, userAgent: nil,
                data: ["item_id": .string(item.id), "kind": .string(item.kind.rawValue), "reason": .string(reason)], createdAt: now))
        }
        guard try outbox.markDead(item.id, node: node, error: reason, now: now, event: event) else { return }
        deadLettered.add(1, ordering: .relaxed)
        log.error("outbox item dead-lettered", ["id": .string(item.id), "kind": .string(item.kind.rawValue), "reason": .string(reason)])
    }

    /// Delivers soon, without waiting for the next poll (the node that queued an item calls this).
    public func wake() { wakeUp.signal() }

    /// Starts the worker's thread.
    public func start() {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let worker = Thread { [self] in
            while running.load(ordering: .acquiring) {
                var handled = 0
                do { handled = try runOnce() } catch {
                    log.warning("outbox worker failed", ["error": .string(String(describing: error))])
                }
                // A full batch: more may be due at once. Else wait to be woken or for the next poll.
                if handled < batchSize { _ = wakeUp.wait(timeout: .now() + pollInterval) }
            }
            finished.signal()
        }
        worker.name = "gatehouse-outbox"
        threaded.store(true, ordering: .releasing)
        worker.start()
    }

    /// Stops the thread and waits for it: the delivery under way finishes, and items claimed
    /// and not yet tried go back to the table.
    public func stop() {
        guard running.exchange(false, ordering: .acquiringAndReleasing) else { return }
        wakeUp.signal()
        finished.wait()
        threaded.store(false, ordering: .releasing)
    }
}
