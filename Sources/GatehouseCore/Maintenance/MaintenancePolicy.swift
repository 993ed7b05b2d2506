/// How long each kind of row is kept past the point where nothing needs it, and how the job bites.
public struct MaintenancePolicy: Sendable {
    static let day: Int64 = 86_400_000

    /// How often a node tries a round (`GATEHOUSE_MAINTENANCE_INTERVAL_SECONDS`).
    public var intervalMillis: Int64
    /// Sessions that ended or expired are kept this long (every node's revocation poll, the
    /// audit trail's session ids), then deleted with whatever tokens they still have.
    public var sessionRetentionMillis: Int64 = 30 * day
    /// A session's refresh tokens are deleted this long after it ended or expired: nothing reads
    /// them then (a refresh of a session that is over answers `.invalid` whether or not its token
    /// is found), and the grace window plus a margin covers a refresh racing the end.
    public var endedSessionTokenDelayMillis: Int64
    /// How far back the early token sweep looks, so that each round walks only the sessions that
    /// ended lately; the tokens of a session it missed (the job did not run for that long) go
    /// with the session after ``sessionRetentionMillis``.
    public var endedSessionTokenLookBackMillis: Int64
    /// Delivered outbox items are kept this long (to see what was sent), then deleted.
    public var deliveredOutboxRetentionMillis: Int64 = 7 * day
    /// A dead outbox item keeps its sealed payload this long (to be retried by hand once its cause
    /// is fixed: `POST /v1/admin/outbox/{id}/retry`), then the payload is erased; the row stays.
    public var deadOutboxPayloadRetentionMillis: Int64 = deadOutboxPayloadRetention
    /// The default of ``deadOutboxPayloadRetentionMillis``: 30 days (API.md), what the admin's list says.
    public static let deadOutboxPayloadRetention: Int64 = 30 * day
    /// A destination's breaker row that no failure has touched for this long goes.
    public var outboxDestinationRetentionMillis: Int64 = 30 * day
    /// A handled Apple notification is remembered this long (a repeat within it changes nothing).
    public var appleNotificationRetentionMillis: Int64 = AppleNotifications.retentionMillis
    /// Audit events are kept this long (`GATEHOUSE_EVENT_RETENTION_DAYS`).
    public var eventRetentionMillis: Int64
    /// A rate-limit counter whose window started this long ago counts nothing any more.
    public var rateLimitRetentionMillis: Int64 = RateLimiter.longestWindowMillis + 60_000
    /// An emailed-code row whose code, send window and last send are older than this limits nothing.
    public var emailCodeRetentionMillis: Int64 = EmailCodes.windowMillis
    /// Rows one statement deletes at most: each batch is its own short transaction.
    public var batchSize = 2_000
    /// A pause between batches, so that on SQLite other writers take the write lock in between.
    public var pauseBetweenBatches: Duration = .milliseconds(2)
    /// How long a round deletes before it leaves the rest to the next: a first round on a large
    /// backlog does not hold a shutdown for minutes.
    public var roundTimeLimit: Duration = .seconds(60)
    /// SQLite pages one `incremental_vacuum` step frees at most (4 KiB each).
    public var vacuumPagesPerStep = 2_048

    public init(intervalSeconds: Int, refreshGraceSeconds: Int, eventRetentionDays: Int) {
        intervalMillis = Int64(intervalSeconds) * 1000
        endedSessionTokenDelayMillis = Int64(refreshGraceSeconds) * 1000 + 60_000
        endedSessionTokenLookBackMillis = max(Self.day, 3 * intervalMillis)
        eventRetentionMillis = Int64(eventRetentionDays) * Self.day
    }

    /// The windows of every task at `now`, in the order the job runs them.
    ///
    /// Refresh tokens of a live session are never in a window: reuse detection finds the
    /// session of a rotated token by its row, and a token stolen and used first by someone else
    /// is recognised only when its rightful holder presents it, which may be any time while the
    /// session lives (ADR 0015). So the tokens of a live session are bounded by the session's
    /// own lifetime (one row per refresh), and go soon after it ends.
    public func windows(now: Int64) -> [(MaintenanceTask, MaintenanceWindow)] {
        let recent = MaintenanceWindow(from: now - endedSessionTokenLookBackMillis, to: now - endedSessionTokenDelayMillis)
        let sessionsOver = MaintenanceWindow(to: now - sessionRetentionMillis)
        return [
            (.tokensOfEndedSessions, recent), (.tokensOfExpiredSessions, recent),
            (.tokensOfEndedSessions, sessionsOver), (.tokensOfExpiredSessions, sessionsOver),
            (.endedSessions, sessionsOver), (.expiredSessions, sessionsOver),
            (.webFlows, MaintenanceWindow(to: now)), (.loginCodes, MaintenanceWindow(to: now)),
            (.mfaChallenges, MaintenanceWindow(to: now)),
            (.emailCodes, MaintenanceWindow(to: now - emailCodeRetentionMillis)),
            (.providerNonces, MaintenanceWindow(to: now)),
            (.webauthnChallenges, MaintenanceWindow(to: now)),
            (.appleNotifications, MaintenanceWindow(to: now - appleNotificationRetentionMillis)),
            (.rateLimits, MaintenanceWindow(to: now - rateLimitRetentionMillis)),
            (.deliveredOutbox, MaintenanceWindow(to: now - deliveredOutboxRetentionMillis)),
            (.deadOutboxPayloads, MaintenanceWindow(to: now - deadOutboxPayloadRetentionMillis)),
            (.events, MaintenanceWindow(to: now - eventRetentionMillis)),
            (.outboxDestinations, MaintenanceWindow(to: now - outboxDestinationRetentionMillis)),
        ]
    }
}
