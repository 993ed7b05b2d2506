import Foundation

/// What an outbox item is for; each kind has one handler (``OutboxHandler``). A string only at
/// the SQL edge.
public struct OutboxKind: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// An email to send (the emailed-code flows).
    public static let mail = OutboxKind(rawValue: "mail")
    /// A webhook delivery (``WebhookOutboxHandler``).
    public static let webhook = OutboxKind(rawValue: "webhook")
}

/// A side effect to deliver, as a producer queues it.
public struct NewOutboxItem: Sendable, Equatable {
    public var appID: AppID?
    public var kind: OutboxKind
    /// Queuing the same key twice queues one item (a retried producer sends one mail).
    public var idempotencyKey: String
    /// JSON for the kind's handler; sealed (``SecretSealer``) when it carries a secret.
    public var payload: String
    /// The payload is sealed: it is erased once the item is delivered, or 30 days after it died
    /// (``MaintenancePolicy/deadOutboxPayloadRetentionMillis``; until then it can be retried).
    public var sealed: Bool
    /// When the first attempt is due (milliseconds since the epoch); nil: at once.
    public var dueAt: Int64?
    /// Where it goes (``OutboxDestination``), when the producer knows: its items are then not
    /// claimed while that destination is paused, even before a first attempt.
    public var destination: String?
    /// What the admin's list of deliveries shows once the payload is erased (webhooks): the event
    /// type and the endpoint's URL, never a secret.
    public var eventType: String?
    public var targetURL: String?

    public init(
        appID: AppID?, kind: OutboxKind, idempotencyKey: String, payload: String, sealed: Bool, dueAt: Int64? = nil, destination: String? = nil,
        eventType: String? = nil, targetURL: String? = nil
    ) {
        self.eventType = eventType
        self.targetURL = targetURL
        self.appID = appID
        self.kind = kind
        self.idempotencyKey = idempotencyKey
        self.payload = payload
        self.sealed = sealed
        self.dueAt = dueAt
        self.destination = destination
    }
}

/// An item a worker has claimed (leased) for delivery.
public struct OutboxItem: Sendable, Equatable {
    public var id: String
    public var appID: AppID?
    public var kind: OutboxKind
    public var idempotencyKey: String
    public var payload: String
    public var sealed: Bool
    /// Deliveries tried before this one.
    public var attempts: Int
    public var createdAt: Int64
    /// Where it goes, as last known (queued with it, or resolved by an earlier attempt).
    public var destination: String?
    /// When it was last queued again by hand after it died (``DeadLetters``); nil: never.
    public var retriedAt: Int64?

    /// Where its give-up window starts: its last retry by hand, else its creation.
    public var giveUpWindowStart: Int64 { retriedAt ?? createdAt }

    public init(
        id: String, appID: AppID?, kind: OutboxKind, idempotencyKey: String, payload: String, sealed: Bool, attempts: Int, createdAt: Int64,
        destination: String? = nil, retriedAt: Int64? = nil
    ) {
        self.retriedAt = retriedAt
        self.id = id
        self.appID = appID
        self.kind = kind
        self.idempotencyKey = idempotencyKey
        self.payload = payload
        self.sealed = sealed
        self.attempts = attempts
        self.createdAt = createdAt
        self.destination = destination
    }
}

/// What a handler made of one delivery.
public enum OutboxDelivery: Sendable, Equatable {
    case delivered
    /// Try again later (the worker's back-off), or not before `notBefore` (ms) when the other side said when.
    case retry(reason: String, notBefore: Int64? = nil)
    /// The destination failed or did not answer in time: tried again like ``retry(reason:notBefore:)``,
    /// and counted by the destination's circuit breaker (``OutboxBreakerPolicy``). Only for a fault
    /// of the other side, never for one of ours or of the app's settings.
    case unreachable(reason: String)
    /// Never deliverable (a refused address, a payload that cannot be opened): dead-lettered now.
    case dead(reason: String)
}

/// One attempt as the worker records it: what the handler made of it, and the HTTP status the
/// destination answered, when it is an HTTP endpoint that answered (webhooks).
public struct OutboxAttempt: Sendable, Equatable {
    public var outcome: OutboxDelivery
    public var status: Int?

    public init(_ outcome: OutboxDelivery, status: Int? = nil) {
        self.outcome = outcome
        self.status = status
    }
}

/// Delivers the items of one kind. Knows nothing of leases, back-off or metrics: the worker does.
/// A reason must never hold a secret (it is stored and logged).
public protocol OutboxHandler: Sendable {
    var kind: OutboxKind { get }
    /// How long after its creation an item of this kind is retried before it is dead; nil: the
    /// worker's policy (72 hours).
    var giveUpAfterMillis: Int64? { get }
    /// Where `item` goes now (``OutboxDestination``): the key of its circuit breaker. Cheap (no
    /// network); nil when it cannot be told, and then no breaker guards it.
    func destination(of item: OutboxItem) -> String?
    func deliver(_ item: OutboxItem) -> OutboxDelivery
    /// ``deliver(_:)`` with the destination's HTTP status, for a handler that has one to tell.
    func attempt(_ item: OutboxItem) -> OutboxAttempt
}

extension OutboxHandler {
    public var giveUpAfterMillis: Int64? { nil }
    public func attempt(_ item: OutboxItem) -> OutboxAttempt { OutboxAttempt(deliver(item)) }
    public func destination(of item: OutboxItem) -> String? { item.destination }
}

/// A destination as the outbox names it: `host:port`, lowercased, the port the scheme's default
/// when the URL has none.
public enum OutboxDestination {
    public static func of(url: String) -> String? {
        guard let parts = URLComponents(string: url), let host = parts.host, !host.isEmpty else { return nil }
        let defaults = ["http": 80, "https": 443, "smtp": 25, "smtps": 465]
        guard let port = parts.port ?? parts.scheme.flatMap({ defaults[$0.lowercased()] }) else { return nil }
        return "\(host.lowercased()):\(port)"
    }
}

/// The circuit breaker of a destination: after `threshold` failed or timed-out deliveries in a
/// row (``OutboxDelivery/unreachable(reason:)``) it is paused, first for `firstPauseMillis`, each
/// further failure doubling the pause up to `maxPauseMillis`; meanwhile its items are not claimed.
/// A success closes it. Kept per app and destination, in the database, so that every node sees it.
public struct OutboxBreakerPolicy: Sendable, Equatable {
    public var threshold = 5
    public var firstPauseMillis: Int64 = 30_000
    public var maxPauseMillis: Int64

    public init(maxPauseSeconds: Int) { maxPauseMillis = Int64(maxPauseSeconds) * 1000 }

    /// How long to pause after `failures` in a row; nil below the threshold.
    public func pauseMillis(afterFailures failures: Int) -> Int64? {
        guard failures >= threshold else { return nil }
        var pause = firstPauseMillis
        for _ in 0..<(failures - threshold) where pause < maxPauseMillis { pause *= 2 }
        return min(pause, maxPauseMillis)
    }
}

/// The outbox's counts, for `/metrics`.
public struct OutboxStatistics: Sendable, Equatable {
    /// Neither delivered nor dead.
    public var queued: Int
    /// Queued and leased by a worker now.
    public var inFlight: Int
    /// Dead letters kept.
    public var dead: Int
    /// How long the oldest due item has waited past its next attempt (ms); 0 when none is due.
    public var oldestDueAgeMillis: Int64

    public init(queued: Int, inFlight: Int, dead: Int, oldestDueAgeMillis: Int64) {
        self.queued = queued
        self.inFlight = inFlight
        self.dead = dead
        self.oldestDueAgeMillis = oldestDueAgeMillis
    }
}

/// The outbox by kind and state, with what holds items back, for `/metrics`.
public struct OutboxBreakdown: Sendable, Equatable {
    /// Items of a kind in a state.
    public struct Count: Sendable, Equatable, Hashable {
        public var kind: OutboxKind
        /// `queued` (waiting, due or not), `in_flight` (leased now), `paused` (queued for a paused
        /// destination) or `dead`.
        public var state: String
        public var count: Int

        public init(kind: OutboxKind, state: String, count: Int) {
            self.kind = kind
            self.state = state
            self.count = count
        }
    }

    /// A destination whose breaker is open now.
    public struct PausedDestination: Sendable, Equatable {
        public var appID: AppID?
        public var destination: String
        public var failures: Int
        public var pausedUntil: Int64

        public init(appID: AppID?, destination: String, failures: Int, pausedUntil: Int64) {
            self.appID = appID
            self.destination = destination
            self.failures = failures
            self.pausedUntil = pausedUntil
        }
    }

    /// An app's items waiting (neither delivered nor dead), per kind.
    public struct AppBacklog: Sendable, Equatable {
        public var appID: AppID
        public var kind: OutboxKind
        public var queued: Int

        public init(appID: AppID, kind: OutboxKind, queued: Int) {
            self.appID = appID
            self.kind = kind
            self.queued = queued
        }
    }

    public var counts: [Count]
    /// Open breakers, the most failing first (at most ``listLimit``).
    public var paused: [PausedDestination]
    /// Open breakers in all.
    public var pausedCount: Int
    /// The apps with the most items waiting (at most ``listLimit``): the noisy tenants.
    public var largestBacklogs: [AppBacklog]

    /// How many paused destinations and backlogs `/metrics` names, so that its size stays bounded.
    public static let listLimit = 20

    public init(counts: [Count], paused: [PausedDestination], pausedCount: Int, largestBacklogs: [AppBacklog]) {
        self.counts = counts
        self.paused = paused
        self.pausedCount = pausedCount
        self.largestBacklogs = largestBacklogs
    }
}

/// The outbox table, shared by every node: the one store not scoped to an app, since a worker
/// delivers every app's items. Every method that changes an item names the node holding its
/// lease: a node whose lease ran out (and whose item another node took) changes nothing.
public protocol OutboxStore: Sendable {
    /// Queues an item, due at once; false when one with its idempotency key exists already.
    func enqueue(_ item: NewOutboxItem, now: Int64) throws -> Bool
    /// Leases to `node` until `now + leaseMillis` the next due item of `kind` (not delivered, not
    /// dead, next attempt reached, lease free or run out) in round-robin order of apps: the
    /// oldest due item of the first app after `after` that has one (wrapping around), skipping the
    /// apps in `excluding` (at their in-flight cap on this node), disabled apps (their items wait
    /// until the app is enabled again), and items whose destination is paused. Each item is this node's alone. nil when there is none.
    func claimNext(kind: OutboxKind, after: AppID?, excluding: Set<AppID>, leaseMillis: Int64, node: String, now: Int64) throws -> OutboxItem?
    /// Records the delivery; a success also closes the breaker of the item's app and `destination`.
    /// `status`: the HTTP status the destination answered, when it is an HTTP one (webhooks).
    func markDelivered(_ id: String, node: String, now: Int64, destination: String?, status: Int?) throws
    /// Counts the attempt and schedules the next at `nextAttemptAt`. With `breaker`, the failure
    /// also counts against the app's `destination`; returns until when it is paused, if it now is.
    @discardableResult
    func markRetry(
        _ id: String, node: String, nextAttemptAt: Int64, error: String, now: Int64, destination: String?, breaker: OutboxBreakerPolicy?,
        status: Int?
    ) throws -> Int64?
    /// Gives a claimed item back without an attempt, due when its paused `destination` resumes.
    func postpone(_ id: String, node: String, destination: String, until: Int64) throws
    /// Until when `app`'s `destination` is paused; nil when it is not.
    func pausedUntil(app: AppID?, destination: String, now: Int64) throws -> Int64?
    /// Counts the attempt and dead-letters the item, its payload kept (sealed) to be retried; false
    /// when the lease was no longer this node's. With `event`, the app's audit event of the dead
    /// letter is recorded in the same transaction.
    func markDead(_ id: String, node: String, error: String, now: Int64, event: (app: AppID, event: Event)?, status: Int?) throws -> Bool
    /// Gives back items leased and not attempted (at shutdown), due at once for any node.
    func release(_ ids: [String], node: String) throws
    func statistics(now: Int64) throws -> OutboxStatistics
    func breakdown(now: Int64) throws -> OutboxBreakdown
    /// Every app's dead items, newest first (by death, then id), after `after`, at most `limit`
    /// (the platform operator's list; an app's own is ``OutboxQueue/deadItems(after:limit:)``).
    func deadItems(after: DeadLetterPosition?, limit: Int) throws -> [OutboxItemRecord]
    /// Any app's item, as the platform operator sees it; nil when there is none.
    func item(_ id: String) throws -> OutboxItemRecord?
}

/// An outbox item as an admin sees it: never its payload.
public struct OutboxItemRecord: Sendable, Equatable {
    public var id: String
    public var appID: AppID?
    public var kind: OutboxKind
    public var attempts: Int
    /// Why the last attempt failed (never a secret: handlers' reasons hold none).
    public var lastError: String?
    public var createdAt: Int64
    public var deliveredAt: Int64?
    public var deadAt: Int64?
    /// When it was last queued again by hand.
    public var retriedAt: Int64?
    public var destination: String?
    public var sealed: Bool
    /// Its payload is still there: a dead item can be queued again. False for a sealed payload
    /// erased (delivered, or dead for more than 30 days).
    public var payloadKept: Bool
    /// When the next attempt is due (queued items).
    public var nextAttemptAt: Int64?
    /// A webhook delivery's event type and endpoint URL (``NewOutboxItem/eventType``).
    public var eventType: String?
    public var targetURL: String?
    /// The HTTP status of the last attempt that got an answer (webhooks).
    public var lastStatus: Int?

    public init(
        id: String, appID: AppID?, kind: OutboxKind, attempts: Int, lastError: String?, createdAt: Int64, deliveredAt: Int64?, deadAt: Int64?,
        retriedAt: Int64?, destination: String?, sealed: Bool, payloadKept: Bool, nextAttemptAt: Int64? = nil, eventType: String? = nil,
        targetURL: String? = nil, lastStatus: Int? = nil
    ) {
        self.nextAttemptAt = nextAttemptAt
        self.eventType = eventType
        self.targetURL = targetURL
        self.lastStatus = lastStatus
        self.id = id
        self.appID = appID
        self.kind = kind
        self.attempts = attempts
        self.lastError = lastError
        self.createdAt = createdAt
        self.deliveredAt = deliveredAt
        self.deadAt = deadAt
        self.retriedAt = retriedAt
        self.destination = destination
        self.sealed = sealed
        self.payloadKept = payloadKept
    }

    /// Where it is in a list of dead items (its death, then its id).
    public var deadPosition: DeadLetterPosition? { deadAt.map { DeadLetterPosition(createdAt: $0, id: id) } }
}

/// A place in a newest-first list of dead items: the time the item died and its id.
public typealias DeadLetterPosition = KeysetPosition<String>

extension OutboxStore {
    /// Leases up to `limit` due items of `kinds`, kind after kind, each in round-robin order of
    /// apps (``claimNext(kind:after:excluding:leaseMillis:node:now:)``): a step of the outbox by hand.
    public func claim(kinds: [OutboxKind], limit: Int, leaseMillis: Int64, node: String, now: Int64) throws -> [OutboxItem] {
        var claimed: [OutboxItem] = []
        for kind in kinds {
            var last: AppID?
            while claimed.count < limit, let item = try claimNext(kind: kind, after: last, excluding: [], leaseMillis: leaseMillis, node: node, now: now) {
                claimed.append(item)
                last = item.appID
            }
        }
        return claimed
    }

    public func markDelivered(_ id: String, node: String, now: Int64) throws {
        try markDelivered(id, node: node, now: now, destination: nil, status: nil)
    }

    public func markDelivered(_ id: String, node: String, now: Int64, destination: String?) throws {
        try markDelivered(id, node: node, now: now, destination: destination, status: nil)
    }

    public func markRetry(_ id: String, node: String, nextAttemptAt: Int64, error: String, now: Int64) throws {
        try markRetry(id, node: node, nextAttemptAt: nextAttemptAt, error: error, now: now, destination: nil, breaker: nil, status: nil)
    }

    @discardableResult
    public func markRetry(
        _ id: String, node: String, nextAttemptAt: Int64, error: String, now: Int64, destination: String?, breaker: OutboxBreakerPolicy?
    ) throws -> Int64? {
        try markRetry(id, node: node, nextAttemptAt: nextAttemptAt, error: error, now: now, destination: destination, breaker: breaker, status: nil)
    }

    public func markDead(_ id: String, node: String, error: String, now: Int64, event: (app: AppID, event: Event)?) throws -> Bool {
        try markDead(id, node: node, error: error, now: now, event: event, status: nil)
    }
}

/// When to try again: from 5 s, doubling, at most `maxBackoffMillis` apart, for 72 hours from
/// the item's creation; then it is dead (API.md "Numbers").
public struct OutboxRetryPolicy: Sendable, Equatable {
    public var firstBackoffMillis: Int64 = 5_000
    public var maxBackoffMillis: Int64
    public var giveUpAfterMillis: Int64 = 72 * 3600 * 1000

    public init(maxBackoffSeconds: Int) { maxBackoffMillis = Int64(maxBackoffSeconds) * 1000 }

    /// The next attempt after the `attempt`-th (1-based) failed: 5 s, 10 s, 20 s, … capped.
    public func nextAttempt(afterFailure attempt: Int, now: Int64) -> Int64 {
        var backoff = firstBackoffMillis
        for _ in 1..<max(1, attempt) where backoff < maxBackoffMillis { backoff *= 2 }
        return now + min(backoff, maxBackoffMillis)
    }

    /// Whether an item created at `createdAt` has run out of time (no retry may be scheduled past it).
    public func hasGivenUp(createdAt: Int64, nextAttemptAt: Int64, after: Int64? = nil) -> Bool {
        nextAttemptAt > createdAt + (after ?? giveUpAfterMillis)
    }
}
