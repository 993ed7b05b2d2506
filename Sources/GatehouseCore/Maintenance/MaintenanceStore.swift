/// One kind of row the maintenance job deletes. Each is one batched statement of the store; the
/// job runs them in this order (a session's tokens before the session, so deleting a session
/// never cascades to a large number of rows).
public enum MaintenanceTask: String, CaseIterable, Sendable {
    /// Refresh tokens of sessions that ended in the window `[from, to)` (``MaintenanceWindow``).
    case tokensOfEndedSessions = "ended_session_tokens"
    /// Refresh tokens of sessions whose absolute lifetime ran out in the window.
    case tokensOfExpiredSessions = "expired_session_tokens"
    /// Sessions that ended before the cutoff (their tokens are gone by then).
    case endedSessions = "ended_sessions"
    /// Sessions that expired before the cutoff.
    case expiredSessions = "expired_sessions"
    /// Web (Apple redirect) flows past their expiry.
    case webFlows = "web_flows"
    /// One-time login codes past their expiry.
    case loginCodes = "login_codes"
    /// Second steps (`mfa_token`s) past their expiry.
    case mfaChallenges = "mfa_challenges"
    /// Emailed-code rows whose code, send window and last send are all older than the cutoff.
    case emailCodes = "email_codes"
    /// Provider token nonces past their token's expiry.
    case providerNonces = "provider_nonces"
    /// WebAuthn challenges past their expiry (passkeys, ADR 0028).
    case webauthnChallenges = "webauthn_challenges"
    /// Apple's notifications handled before the cutoff (their idempotency records).
    case appleNotifications = "apple_notifications"
    /// Rate-limit counters of windows that started before the cutoff.
    case rateLimits = "rate_limits"
    /// Outbox items delivered before the cutoff.
    case deliveredOutbox = "delivered_outbox"
    /// The sealed payloads of outbox items dead before the cutoff: erased (the item stays, listed
    /// as no longer retryable). Not a row deleted: a payload.
    case deadOutboxPayloads = "dead_outbox_payloads"
    /// Audit events recorded before the cutoff.
    case events
    /// Circuit-breaker rows of destinations that have not failed since the cutoff (their items
    /// were delivered, dead or removed long ago).
    case outboxDestinations = "outbox_destinations"
}

/// The rows of one task that a batch may delete: the task's time column in `[from, to)`
/// (milliseconds; `from` is `Int64.min` for "everything before `to`").
public struct MaintenanceWindow: Sendable, Equatable {
    public var from: Int64
    public var to: Int64

    public init(from: Int64 = .min, to: Int64) {
        self.from = from
        self.to = to
    }
}

/// The persistence of the maintenance job, not scoped to an app (it tidies every app's rows).
public protocol MaintenanceStore: Sendable {
    /// Runs `round` as the cluster's only maintenance round (PostgreSQL: a lease row, taken for
    /// the round and renewed before each batch, ADR 0034; SQLite: one process owns the file), or
    /// returns nil without running it when another node's round holds the turn.
    func exclusively<T>(_ round: (any MaintenanceRound) throws -> T) throws -> T?
}

/// What a maintenance round may do while it holds the lock.
public protocol MaintenanceRound {
    /// Deletes at most `limit` rows of `task` (erases their payloads, for
    /// ``MaintenanceTask/deadOutboxPayloads``) whose time falls in `window`, in one short
    /// transaction of its own, using an index; returns how many went.
    func delete(_ task: MaintenanceTask, in window: MaintenanceWindow, limit: Int) throws -> Int
    /// Gives free space back to the file system where the database can (SQLite with
    /// `auto_vacuum=INCREMENTAL`: `PRAGMA incremental_vacuum`, at most `pages` a step); returns
    /// the pages freed. Nothing on PostgreSQL (its autovacuum reuses the space).
    func compact(pagesPerStep: Int) throws -> Int
}

/// A round's turn ended under it: on PostgreSQL its lease ran out (a batch or a pause outlasted
/// it) and another node took the turn. The round stops at once; the other node's round goes on.
public struct MaintenanceTurnLost: Error, CustomStringConvertible {
    public init() {}
    public var description: String { "the maintenance round's lease ran out and another node took its turn" }
}
