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
    /// The payload is sealed: it is erased once the item is delivered or dead.
    public var sealed: Bool
    /// When the first attempt is due (milliseconds since the epoch); nil: at once.
    public var dueAt: Int64?

    public init(appID: AppID?, kind: OutboxKind, idempotencyKey: String, payload: String, sealed: Bool, dueAt: Int64? = nil) {
        self.appID = appID
        self.kind = kind
        self.idempotencyKey = idempotencyKey
        self.payload = payload
        self.sealed = sealed
        self.dueAt = dueAt
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

    public init(id: String, appID: AppID?, kind: OutboxKind, idempotencyKey: String, payload: String, sealed: Bool, attempts: Int, createdAt: Int64) {
        self.id = id
        self.appID = appID
        self.kind = kind
        self.idempotencyKey = idempotencyKey
        self.payload = payload
        self.sealed = sealed
        self.attempts = attempts
        self.createdAt = createdAt
    }
}

/// What a handler made of one delivery.
public enum OutboxDelivery: Sendable, Equatable {
    case delivered
    /// Try again later (the worker's back-off), or not before `notBefore` (ms) when the other side said when.
    case retry(reason: String, notBefore: Int64? = nil)
    /// Never deliverable (a refused address, a payload that cannot be opened): dead-lettered now.
    case dead(reason: String)
}

/// Delivers the items of one kind. Knows nothing of leases, back-off or metrics: the worker does.
/// A reason must never hold a secret (it is stored and logged).
public protocol OutboxHandler: Sendable {
    var kind: OutboxKind { get }
    /// How long after its creation an item of this kind is retried before it is dead; nil: the
    /// worker's policy (72 hours).
    var giveUpAfterMillis: Int64? { get }
    func deliver(_ item: OutboxItem) -> OutboxDelivery
}

extension OutboxHandler {
    public var giveUpAfterMillis: Int64? { nil }
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

/// The outbox table, shared by every node: the one store not scoped to an app, since a worker
/// delivers every app's items. Every method that changes an item names the node holding its
/// lease: a node whose lease ran out (and whose item another node took) changes nothing.
public protocol OutboxStore: Sendable {
    /// Queues an item, due at once; false when one with its idempotency key exists already.
    func enqueue(_ item: NewOutboxItem, now: Int64) throws -> Bool
    /// Leases up to `limit` due items of `kinds` (not delivered, not dead, next attempt reached,
    /// lease free or run out) to `node` until `now + leaseMillis`, oldest due first; each is this
    /// node's alone. Only kinds the node can deliver: a node of an older version leaves a newer
    /// kind to the nodes that know it.
    func claim(kinds: [OutboxKind], limit: Int, leaseMillis: Int64, node: String, now: Int64) throws -> [OutboxItem]
    func markDelivered(_ id: String, node: String, now: Int64) throws
    /// Counts the attempt and schedules the next at `nextAttemptAt`.
    func markRetry(_ id: String, node: String, nextAttemptAt: Int64, error: String, now: Int64) throws
    /// Counts the attempt and dead-letters the item; false when the lease was no longer this node's.
    /// With `event`, the app's audit event of the dead letter is recorded in the same transaction.
    func markDead(_ id: String, node: String, error: String, now: Int64, event: (app: AppID, event: Event)?) throws -> Bool
    /// Gives back items leased and not attempted (at shutdown), due at once for any node.
    func release(_ ids: [String], node: String) throws
    func statistics(now: Int64) throws -> OutboxStatistics
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
