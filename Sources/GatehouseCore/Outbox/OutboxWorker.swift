import Dispatch
import Foundation
import GatehouseCrypto
import Synchronization

/// Delivers the outbox: claims due items under a lease, hands each to its kind's handler, and
/// records the outcome: delivered, retried with back-off (``OutboxRetryPolicy``), or dead-lettered
/// (an `outbox.dead_lettered` audit event of the item's app, and a metric), never dropped. It knows
/// no kind: a new kind is a new ``OutboxHandler``.
///
/// Fair to every app (API.md, "Tenants share one server safely"):
/// - each kind has lanes of its own (`lanes` threads), so stalled webhooks never hold a mail;
/// - a lane claims one item, delivers it and claims the next: nothing waits for a slower item;
/// - claims go round the apps (round robin), and at most ``perAppInFlight`` items of one app and
///   kind are in flight on this node, so one app's slow destinations occupy that many lanes at most;
/// - a destination that failed or timed out ``OutboxBreakerPolicy/threshold`` times in a row is
///   paused with back-off (per app, in the database, so every node sees it) and its items wait.
///
/// One per node (``start()``/``stop()``). Several nodes on one database share the work: a claim
/// is exclusive, and a node that dies holding items loses them to the others when their lease runs out.
public final class OutboxWorker: Sendable {
    /// How long a claim holds an item. A delivery starts as soon as its item is claimed, and a
    /// handler must end within 35 s (the mailer gives up after 30 s and waits 3 s at most for the
    /// server's goodbye; a webhook after 10 s), well inside the lease, so no other node retakes
    /// an item while it is being delivered.
    public static let leaseMillis: Int64 = 60_000

    public let node: String
    private let outbox: any OutboxStore
    private let lanes: [KindLanes]
    private let policy: OutboxRetryPolicy
    private let breaker: OutboxBreakerPolicy
    private let clock: any Clock
    private let pollInterval: Double
    /// Items of one app and kind in flight at once on this node (`GATEHOUSE_OUTBOX_PER_APP_IN_FLIGHT`).
    public let perAppInFlight: Int
    private let log: any LogSink

    /// Deliveries since start, for `/metrics`.
    public let delivered = Atomic<Int>(0)
    public let retried = Atomic<Int>(0)
    public let deadLettered = Atomic<Int>(0)
    /// Items given back unattempted because their destination was paused.
    public let postponed = Atomic<Int>(0)
    /// Times a destination's breaker opened (or stayed open after a failed trial).
    public let breakerOpened = Atomic<Int>(0)

    private let running = Atomic<Bool>(false)
    /// True while ``stop()`` waits for the lanes: claimed items not started go back to the table.
    private let stopping = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    private let threads = Atomic<Int>(0)

    /// - Parameters:
    ///   - pollInterval: seconds between looks at the table when nothing woke the worker (items
    ///     queued by other nodes, retries coming due).
    ///   - lanes: deliveries of each kind under way at once.
    ///   - perAppInFlight: items of one app and kind in flight at once on this node.
    ///   - log: what the worker cannot tell a caller (a delivery that failed, a dead letter).
    public init(
        outbox: any OutboxStore, handlers: [any OutboxHandler], policy: OutboxRetryPolicy, breaker: OutboxBreakerPolicy? = nil,
        clock: any Clock, pollInterval: Double = 1, lanes: Int = 4, perAppInFlight: Int = 2,
        node: String = "node_" + Digest.hex(SecureRandom.bytes(6)), log: any LogSink = DiscardingLog()
    ) {
        self.outbox = outbox
        var seen = Set<OutboxKind>()
        self.lanes = handlers.filter { seen.insert($0.kind).inserted }.map { KindLanes(handler: $0, lanes: max(1, lanes)) }
        self.policy = policy
        self.breaker = breaker ?? OutboxBreakerPolicy(maxPauseSeconds: Int(policy.maxBackoffMillis / 1000))
        self.clock = clock
        self.pollInterval = pollInterval
        self.perAppInFlight = max(1, perAppInFlight)
        self.node = node
        self.log = log
    }

    /// One step by hand (tests): for each kind, claims as many items as it has lanes (fairly,
    /// within the per-app cap) and delivers them at once; returns how many it handled.
    @discardableResult
    public func runOnce() throws -> Int {
        var claimed: [(KindLanes, OutboxItem)] = []
        do {
            for kind in lanes {
                for _ in 0..<kind.laneCount {
                    guard let item = try claim(kind) else { break }
                    claimed.append((kind, item))
                }
            }
        } catch {
            // What was claimed before the failure goes back, and frees its place under the cap.
            for (kind, item) in claimed {
                try? outbox.release([item.id], node: node)
                settle(item, of: kind)
            }
            throw error
        }
        guard !claimed.isEmpty else { return 0 }
        let handled = Atomic(0)
        let failure = Mutex<(any Error)?>(nil)
        let done = DispatchSemaphore(value: 0)
        for (kind, item) in claimed {
            let thread = Thread { [self] in
                do {
                    if try finish(item, of: kind) { handled.add(1, ordering: .relaxed) }
                } catch {
                    failure.withLock { $0 = $0 ?? error }
                }
                done.signal()
            }
            thread.name = "gatehouse-outbox-step"
            thread.start()
        }
        for _ in claimed { done.wait() }
        if let error = failure.withLock({ $0 }) { throw error }
        return handled.load(ordering: .relaxed)
    }

    /// Leases the next item of `kind` for this node: round robin over the apps, none of an app
    /// already at its cap here. Claims of one kind are made one at a time on a node, so that the
    /// cap holds.
    private func claim(_ kind: KindLanes) throws -> OutboxItem? {
        try claimNoting(kind)?.item
    }

    /// ``claim(_:)``, and whether the item's app may have more in flight here after it: if not,
    /// another lane would most likely find only that app's items, which it may not take.
    private func claimNoting(_ kind: KindLanes) throws -> (item: OutboxItem, appHasRoom: Bool)? {
        try kind.claims.withLock { state in
            let capped = Set(state.inFlight.filter { $0.value >= perAppInFlight }.keys.compactMap { $0.isEmpty ? nil : AppID(unchecked: $0) })
            guard let item = try outbox.claimNext(
                kind: kind.handler.kind, after: state.lastApp, excluding: capped, leaseMillis: Self.leaseMillis, node: node, now: clock.nowMillis())
            else { return nil }
            state.lastApp = item.appID
            let count = state.inFlight[item.appID?.rawValue ?? "", default: 0] + 1
            state.inFlight[item.appID?.rawValue ?? ""] = count
            return (item, count < perAppInFlight)
        }
    }

    /// Delivers a claimed item (or postpones it when its destination is paused) and frees its
    /// place under the app's cap; whether it was attempted.
    private func finish(_ item: OutboxItem, of kind: KindLanes) throws -> Bool {
        defer { settle(item, of: kind) }
        if stopping.load(ordering: .acquiring) {
            try outbox.release([item.id], node: node)  // stopping: another node or the next start takes it
            return false
        }
        let destination = kind.handler.destination(of: item)
        // Claims skip items whose known destination is paused; one learnt only now is checked here.
        if let destination, destination != item.destination,
            let until = try outbox.pausedUntil(app: item.appID, destination: destination, now: clock.nowMillis())
        {
            try outbox.postpone(item.id, node: node, destination: destination, until: until)
            postponed.add(1, ordering: .relaxed)
            return false
        }
        try deliver(item, handler: kind.handler, destination: destination)
        return true
    }

    /// Frees a claimed item's place under its app's cap.
    private func settle(_ item: OutboxItem, of kind: KindLanes) {
        kind.claims.withLock { state in
            let app = item.appID?.rawValue ?? ""
            state.inFlight[app, default: 1] -= 1
            if state.inFlight[app] == 0 { state.inFlight[app] = nil }
        }
    }

    private func deliver(_ item: OutboxItem, handler: any OutboxHandler, destination: String?) throws {
        let result = handler.attempt(item)
        let status = result.status
        let now = clock.nowMillis()
        let attempt = item.attempts + 1
        switch result.outcome {
        case .delivered:
            try outbox.markDelivered(item.id, node: node, now: now, destination: destination, status: status)
            delivered.add(1, ordering: .relaxed)
            log.debug("outbox item delivered", ["id": .string(item.id), "kind": .string(item.kind.rawValue), "attempt": .int(Int64(attempt))])
        case .retry(let reason, let notBefore):
            try retry(
                item, reason: reason, notBefore: notBefore, destination: destination, countsAgainstDestination: false, handler: handler, now: now,
                status: status)
        case .unreachable(let reason):
            try retry(
                item, reason: reason, notBefore: nil, destination: destination, countsAgainstDestination: true, handler: handler, now: now, status: status)
        case .dead(let reason):
            try deadLetter(item, reason: reason, now: now, status: status)
        }
    }

    private func retry(
        _ item: OutboxItem, reason: String, notBefore: Int64?, destination: String?, countsAgainstDestination: Bool, handler: any OutboxHandler,
        now: Int64, status: Int?
    ) throws {
        let attempt = item.attempts + 1
        let next = max(policy.nextAttempt(afterFailure: attempt, now: now), notBefore ?? 0)
        // From its last retry by hand, if any: a dead item queued again gets a whole window anew.
        if policy.hasGivenUp(createdAt: item.giveUpWindowStart, nextAttemptAt: next, after: handler.giveUpAfterMillis) {
            try deadLetter(item, reason: "gave up after \(attempt) attempts: \(reason)", now: now, status: status)
            return
        }
        let pausedUntil = try outbox.markRetry(
            item.id, node: node, nextAttemptAt: next, error: reason, now: now, destination: destination,
            breaker: countsAgainstDestination ? breaker : nil, status: status)
        retried.add(1, ordering: .relaxed)
        log.warning("outbox delivery failed", ["id": .string(item.id), "kind": .string(item.kind.rawValue), "attempt": .int(Int64(attempt)), "reason": .string(reason)])
        if let pausedUntil, let destination {
            breakerOpened.add(1, ordering: .relaxed)
            log.warning(
                "outbox destination paused",
                [
                    "app_id": item.appID.map { .string($0.rawValue) } ?? .null, "destination": .string(destination),
                    "seconds": .int((pausedUntil - now) / 1000),
                ])
        }
    }

    private func deadLetter(_ item: OutboxItem, reason: String, now: Int64, status: Int? = nil) throws {
        let event = item.appID.map { app in
            (app: app, event: Event(
                type: .outboxDeadLettered, userID: nil, sessionID: nil, ip: nil, userAgent: nil,
                data: ["item_id": .string(item.id), "kind": .string(item.kind.rawValue), "reason": .string(reason)], createdAt: now))
        }
        guard try outbox.markDead(item.id, node: node, error: reason, now: now, event: event, status: status) else { return }
        deadLettered.add(1, ordering: .relaxed)
        log.error("outbox item dead-lettered", ["id": .string(item.id), "kind": .string(item.kind.rawValue), "reason": .string(reason)])
    }

    /// Delivers soon, without waiting for the next poll (the node that queued an item calls this).
    public func wake() {
        for kind in lanes { kind.wakeAll() }
    }

    /// Starts the lanes' threads.
    public func start() {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        stopping.store(false, ordering: .releasing)
        for kind in lanes {
            for lane in 0..<kind.laneCount {
                threads.add(1, ordering: .relaxed)
                let thread = Thread { [self] in
                    run(kind, lane: lane)
                    finished.signal()
                }
                thread.name = "gatehouse-outbox-\(kind.handler.kind.rawValue)-\(lane)"
                thread.start()
            }
        }
    }

    /// A lane: claims and delivers until nothing is due, then waits to be woken or for the next
    /// poll (a second). Every idle lane polls: lanes held by a stalled destination must not leave
    /// items queued by another node, or retries coming due, waiting for them.
    private func run(_ kind: KindLanes, lane: Int) {
        let signal = kind.signals[lane]
        while running.load(ordering: .acquiring) {
            signal.pending.store(false, ordering: .releasing)
            var claimed = false
            do {
                if let (item, appHasRoom) = try claimNoting(kind) {
                    claimed = true
                    // More may be due: another lane looks too, unless this app just reached its
                    // cap (its other items must wait; other apps' are found by the next poll or
                    // wake, or by this lane's next claim, which goes on round the apps).
                    if appHasRoom { kind.wakeOne(besides: lane) }
                    _ = try finish(item, of: kind)
                }
            } catch {
                log.warning("outbox worker failed", ["kind": .string(kind.handler.kind.rawValue), "error": .string(String(describing: error))])
            }
            if !claimed {
                _ = signal.semaphore.wait(timeout: .now() + pollInterval)
            }
        }
    }

    /// Stops the threads and waits for them: deliveries under way finish, and nothing new starts.
    public func stop() {
        guard running.exchange(false, ordering: .acquiringAndReleasing) else { return }
        stopping.store(true, ordering: .releasing)
        wake()
        let count = threads.exchange(0, ordering: .acquiringAndReleasing)
        for _ in 0..<count { finished.wait() }
        stopping.store(false, ordering: .releasing)  // stepping by hand (runOnce) delivers again
    }
}

/// The lanes of one kind on one node: its handler, what is in flight per app, where the round
/// robin stands, and how each lane is woken.
private final class KindLanes: Sendable {
    struct ClaimState {
        /// Items in flight here per app id ('' for none).
        var inFlight: [String: Int] = [:]
        /// The app served last: the next claim starts after it.
        var lastApp: AppID?
    }

    /// Wakes one lane: a semaphore signalled at most once until the lane looks again.
    final class Signal: Sendable {
        let semaphore = DispatchSemaphore(value: 0)
        let pending = Atomic<Bool>(false)

        func wake() {
            if !pending.exchange(true, ordering: .acquiringAndReleasing) { semaphore.signal() }
        }
    }

    let handler: any OutboxHandler
    let claims = Mutex(ClaimState())
    let signals: [Signal]
    var laneCount: Int { signals.count }

    init(handler: any OutboxHandler, lanes: Int) {
        self.handler = handler
        signals = (0..<lanes).map { _ in Signal() }
    }

    func wakeAll() {
        for signal in signals { signal.wake() }
    }

    /// Passes a wake on to another lane, idle or not (a busy lane looks again when it is done).
    func wakeOne(besides lane: Int) {
        guard signals.count > 1 else { return }
        signals[(lane + 1) % signals.count].wake()
    }
}
