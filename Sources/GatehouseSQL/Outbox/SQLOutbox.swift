import GatehouseCore
import GatehouseCrypto

/// The outbox table (migration 0007), shared by every node's worker.
struct SQLOutbox: OutboxStore {
    let database: any SQLDatabase

    func enqueue(_ item: NewOutboxItem, now: Int64) throws -> Bool {
        try database.withConnection { db in try insertOutboxItem(db, item, now: now) }
    }

    /// Apps a claim looks at, at most, before it gives up for this time: a bound on one claim's
    /// cost when many apps have items waiting and none due (ADR 0026).
    static let appsPerClaim = 256

    func claimNext(kind: OutboxKind, after: AppID?, excluding: Set<AppID>, leaseMillis: Int64, node: String, now: Int64) throws -> OutboxItem? {
        let free: SQL = """
            delivered_at IS NULL AND dead_at IS NULL AND next_attempt_at <= \(now) AND (lease_until IS NULL OR lease_until <= \(now))
              AND kind = \(kind.rawValue)
            """
        // Cheap and shared first: most polls find nothing due.
        guard try !database.query("SELECT id FROM outbox WHERE \(free) LIMIT 1").isEmpty else { return nil }
        // One transaction, as the claims of the outbox's first version: on SQLite it commits with
        // the other writers of its group (ADR 0019) instead of on its own.
        return try database.transaction { db in
            // Round robin: app after app, in app id order, from the one after the last served, round
            // to it. Each step and each attempt is a range of the index (kind, app_id,
            // next_attempt_at), so the backlog of an app at its cap (`excluding`) or disabled is
            // never walked, whatever its size. A step also says whether its app is disabled.
            var cursor = after
            var wrapped = after == nil
            for _ in 0..<Self.appsPerClaim {
                let bound: SQL = cursor.map { " AND o.app_id > \($0.rawValue)" } ?? " AND o.app_id IS NOT NULL"
                guard let step = try db.query("""
                    SELECT o.app_id AS app_id, a.disabled_at AS disabled_at FROM outbox o LEFT JOIN apps a ON a.id = o.app_id
                    WHERE o.kind = \(kind.rawValue) AND o.delivered_at IS NULL AND o.dead_at IS NULL\(bound) ORDER BY o.app_id LIMIT 1
                    """).first
                else {
                    if wrapped { break }
                    (wrapped, cursor) = (true, nil)
                    continue
                }
                let next = AppID(unchecked: try step.string("app_id"))
                if wrapped, let after, next.rawValue > after.rawValue { break }  // all the way round
                cursor = next
                let disabled = try step.optionalInt64("disabled_at") != nil
                if disabled || excluding.contains(next) { continue }
                if let item = try claim(db, "\(free) AND app_id = \(next.rawValue)", leaseMillis: leaseMillis, node: node, now: now) { return item }
            }
            // Items of no app (none is queued today) come last.
            return try claim(db, "\(free) AND app_id IS NULL", leaseMillis: leaseMillis, node: node, now: now)
        }
    }

    /// Leases the oldest item matching `condition` whose destination is not paused. On PostgreSQL
    /// rows another node is claiming are skipped, not waited for.
    private func claim(_ db: any SQLConnection, _ condition: SQL, leaseMillis: Int64, node: String, now: Int64) throws -> OutboxItem? {
        let skipLocked: SQL = db.dialect == .postgres ? " FOR UPDATE SKIP LOCKED" : ""
        return try db.query("""
            UPDATE outbox SET lease_until = \(now + leaseMillis), leased_by = \(node)
            WHERE id IN (
              SELECT id FROM outbox
              WHERE \(condition)
                AND (destination IS NULL OR NOT EXISTS (
                  SELECT 1 FROM outbox_destinations d
                  WHERE d.app_id = COALESCE(outbox.app_id, '') AND d.destination = outbox.destination AND d.paused_until > \(now)))
              ORDER BY next_attempt_at LIMIT 1\(skipLocked))
            RETURNING *
            """).first.map(outboxItem)
    }

    func markDelivered(_ id: String, node: String, now: Int64, destination: String?, status: Int?) throws {
        try database.transaction { db in
            guard try db.execute("""
                UPDATE outbox SET delivered_at = \(now), attempts = attempts + 1, last_error = NULL, lease_until = NULL, leased_by = NULL,
                                  last_status = COALESCE(\(status.map(Int64.init)), last_status),
                                  payload = CASE WHEN sealed = 1 THEN '' ELSE payload END, destination = COALESCE(\(destination), destination)
                WHERE id = \(id) AND leased_by = \(node)
                """) == 1, let destination
            else { return }
            // The destination answered: its breaker closes.
            try db.execute("""
                DELETE FROM outbox_destinations
                WHERE destination = \(destination) AND app_id = (SELECT COALESCE(app_id, '') FROM outbox WHERE id = \(id))
                """)
        }
    }

    func markRetry(
        _ id: String, node: String, nextAttemptAt: Int64, error: String, now: Int64, destination: String?, breaker: OutboxBreakerPolicy?,
        status: Int?
    ) throws -> Int64? {
        try database.transaction { db in
            // A node whose lease ran out changes nothing, the breaker included: the item's new
            // holder reports its own attempt.
            guard try db.execute("""
                UPDATE outbox SET attempts = attempts + 1, next_attempt_at = \(nextAttemptAt), last_error = \(String(error.prefix(1000))),
                                  lease_until = NULL, leased_by = NULL, destination = COALESCE(\(destination), destination),
                                  last_status = COALESCE(\(status.map(Int64.init)), last_status)
                WHERE id = \(id) AND leased_by = \(node)
                """) == 1, let breaker, let destination
            else { return nil }
            let app = try db.query("SELECT COALESCE(app_id, '') AS app FROM outbox WHERE id = \(id)").first?.string("app") ?? ""
            let failures = try db.query("""
                INSERT INTO outbox_destinations (app_id, destination, failures, paused_until, updated_at) VALUES (\(app), \(destination), 1, NULL, \(now))
                ON CONFLICT (app_id, destination) DO UPDATE SET failures = outbox_destinations.failures + 1, updated_at = \(now)
                RETURNING failures
                """).first?.int64("failures") ?? 1
            guard let pause = breaker.pauseMillis(afterFailures: Int(failures)) else { return nil }
            let until = now + pause
            try db.execute("""
                UPDATE outbox_destinations SET paused_until = \(until) WHERE app_id = \(app) AND destination = \(destination)
                """)
            // The app's waiting items for it are due when the pause ends, not before: claims then
            // never walk them meanwhile (an app's due range holds what may go now).
            try db.execute("""
                UPDATE outbox SET next_attempt_at = \(until)
                WHERE kind = (SELECT kind FROM outbox WHERE id = \(id)) AND \(app.isEmpty ? "app_id IS NULL" : "app_id = \(app)" as SQL)
                  AND destination = \(destination) AND delivered_at IS NULL AND dead_at IS NULL
                  AND next_attempt_at < \(until) AND (lease_until IS NULL OR lease_until <= \(now))
                """)
            return until
        }
    }

    func postpone(_ id: String, node: String, destination: String, until: Int64) throws {
        try database.execute("""
            UPDATE outbox SET destination = \(destination), next_attempt_at = \(until), lease_until = NULL, leased_by = NULL
            WHERE id = \(id) AND leased_by = \(node)
            """)
    }

    func pausedUntil(app: AppID?, destination: String, now: Int64) throws -> Int64? {
        try database.query("""
            SELECT paused_until FROM outbox_destinations
            WHERE app_id = \(app?.rawValue ?? "") AND destination = \(destination) AND paused_until > \(now)
            """).first?.int64("paused_until")
    }

    /// The payload stays, sealed, to be retried by hand: the maintenance job erases it 30 days on.
    func markDead(_ id: String, node: String, error: String, now: Int64, event: (app: AppID, event: Event)?, status: Int?) throws -> Bool {
        try database.transaction { db in
            guard try db.execute("""
                UPDATE outbox SET attempts = attempts + 1, dead_at = \(now), last_error = \(String(error.prefix(1000))), lease_until = NULL,
                                  leased_by = NULL, last_status = COALESCE(\(status.map(Int64.init)), last_status)
                WHERE id = \(id) AND leased_by = \(node) AND dead_at IS NULL
                """) == 1
            else { return false }
            if let event {
                try SQLAppScopedStore(database: TransactionBoundDatabase(db), appID: event.app, userChanges: nil).record(event.event)
            }
            return true
        }
    }

    func release(_ ids: [String], node: String) throws {
        for id in ids {
            try database.execute("UPDATE outbox SET lease_until = NULL, leased_by = NULL WHERE id = \(id) AND leased_by = \(node)")
        }
    }

    func statistics(now: Int64) throws -> OutboxStatistics {
        let row = try database.query("""
            SELECT
              (SELECT count(*) FROM outbox WHERE delivered_at IS NULL AND dead_at IS NULL) AS queued,
              (SELECT count(*) FROM outbox WHERE delivered_at IS NULL AND dead_at IS NULL AND lease_until > \(now)) AS in_flight,
              (SELECT count(*) FROM outbox WHERE dead_at IS NOT NULL) AS dead,
              (SELECT min(next_attempt_at) FROM outbox WHERE delivered_at IS NULL AND dead_at IS NULL AND next_attempt_at <= \(now)
                 AND (lease_until IS NULL OR lease_until <= \(now))) AS oldest_due
            """)[0]
        let oldestDue = try row.optionalInt64("oldest_due")
        return OutboxStatistics(
            queued: Int(try row.int64("queued")), inFlight: Int(try row.int64("in_flight")), dead: Int(try row.int64("dead")),
            oldestDueAgeMillis: oldestDue.map { max(0, now - $0) } ?? 0)
    }
}

extension SQLOutbox {
    func deadItems(after: DeadLetterPosition?, limit: Int) throws -> [OutboxItemRecord] {
        try database.withConnection { db in try selectDeadOutboxItems(db, app: nil, after: after, limit: limit) }
    }

    func item(_ id: String) throws -> OutboxItemRecord? {
        try database.query("SELECT \(outboxRecordColumns) FROM outbox WHERE id = \(id)").first.map(outboxItemRecord)
    }

    func breakdown(now: Int64) throws -> OutboxBreakdown {
        var counts: [OutboxBreakdown.Count] = []
        for row in try database.query("""
            SELECT kind,
              SUM(CASE WHEN dead_at IS NULL THEN 1 ELSE 0 END) AS queued,
              SUM(CASE WHEN dead_at IS NULL AND lease_until > \(now) THEN 1 ELSE 0 END) AS in_flight,
              SUM(CASE WHEN dead_at IS NOT NULL THEN 1 ELSE 0 END) AS dead
            FROM outbox WHERE delivered_at IS NULL GROUP BY kind ORDER BY kind
            """) {
            let kind = OutboxKind(rawValue: try row.string("kind"))
            for state in ["queued", "in_flight", "dead"] {
                counts.append(.init(kind: kind, state: state, count: Int(try row.int64(state))))
            }
        }
        for row in try database.query("""
            SELECT o.kind AS kind, count(*) AS paused FROM outbox o
              JOIN outbox_destinations d ON d.app_id = COALESCE(o.app_id, '') AND d.destination = o.destination
            WHERE o.delivered_at IS NULL AND o.dead_at IS NULL AND d.paused_until > \(now)
            GROUP BY o.kind ORDER BY o.kind
            """) {
            counts.append(.init(kind: OutboxKind(rawValue: try row.string("kind")), state: "paused", count: Int(try row.int64("paused"))))
        }
        let paused = try database.query("""
            SELECT app_id, destination, failures, paused_until FROM outbox_destinations WHERE paused_until > \(now)
            ORDER BY failures DESC, app_id, destination LIMIT \(Int64(OutboxBreakdown.listLimit))
            """).map { row in
            let app = try row.string("app_id")
            return OutboxBreakdown.PausedDestination(
                appID: app.isEmpty ? nil : AppID(unchecked: app), destination: try row.string("destination"), failures: Int(try row.int64("failures")),
                pausedUntil: try row.int64("paused_until"))
        }
        let pausedCount = Int(try database.query("SELECT count(*) AS n FROM outbox_destinations WHERE paused_until > \(now)")[0].int64("n"))
        let backlogs = try database.query("""
            SELECT app_id, kind, count(*) AS queued FROM outbox
            WHERE delivered_at IS NULL AND dead_at IS NULL AND app_id IS NOT NULL
            GROUP BY app_id, kind ORDER BY queued DESC, app_id, kind LIMIT \(Int64(OutboxBreakdown.listLimit))
            """).map { row in
            OutboxBreakdown.AppBacklog(
                appID: AppID(unchecked: try row.string("app_id")), kind: OutboxKind(rawValue: try row.string("kind")), queued: Int(try row.int64("queued")))
        }
        return OutboxBreakdown(counts: counts, paused: paused, pausedCount: pausedCount, largestBacklogs: backlogs)
    }
}

/// Queues an outbox item on `db`: inside a store method's transaction, so the item commits with
/// the change that causes it, or not at all. False when its idempotency key is queued already.
func insertOutboxItem(_ db: any SQLConnection, _ item: NewOutboxItem, now: Int64) throws -> Bool {
    try db.execute("""
        INSERT INTO outbox (id, app_id, kind, idempotency_key, payload, sealed, attempts, next_attempt_at, created_at, destination, event_type, target_url)
        VALUES (\("obx_" + Digest.hex(SecureRandom.bytes(15))), \(item.appID), \(item.kind.rawValue), \(item.idempotencyKey), \(item.payload),
                \(item.sealed), 0, \(item.dueAt ?? now), \(now), \(item.destination), \(item.eventType), \(item.targetURL))
        ON CONFLICT (idempotency_key) DO NOTHING
        """) == 1
}

/// `app`'s item queued under `idempotencyKey`, if any (the id of what was just queued).
func outboxItemID(_ db: any SQLConnection, app: AppID, idempotencyKey: String) throws -> String? {
    try db.query("SELECT id FROM outbox WHERE app_id = \(app) AND idempotency_key = \(idempotencyKey)").first?.string("id")
}

/// `app`'s webhook deliveries, newest first (creation, then id), after `after`, at most `limit`;
/// only those in `state` (`queued`, `delivered`, `dead`) and of `eventType` when given.
func selectWebhookDeliveries(
    _ db: any SQLConnection, app: AppID, state: WebhookDeliveryState?, eventType: String?, after: DeadLetterPosition?, limit: Int
) throws -> [OutboxItemRecord] {
    let stateFilter: SQL = switch state {
    case nil: ""
    case .queued: " AND delivered_at IS NULL AND dead_at IS NULL"
    case .delivered: " AND delivered_at IS NOT NULL"
    case .dead: " AND dead_at IS NOT NULL"
    }
    let typeFilter: SQL = eventType.map { " AND event_type = \($0)" } ?? ""
    let page: SQL = after.map { " AND (created_at < \($0.createdAt) OR (created_at = \($0.createdAt) AND id < \($0.id)))" } ?? ""
    return try db.query("""
        SELECT \(outboxRecordColumns) FROM outbox WHERE app_id = \(app) AND kind = \(OutboxKind.webhook.rawValue)\(stateFilter)\(typeFilter)\(page)
        ORDER BY created_at DESC, id DESC LIMIT \(Int64(limit))
        """).map(outboxItemRecord)
}

/// Removes an item no worker has attempted or holds; whether there was one.
func withdrawOutboxItem(_ db: any SQLConnection, app: AppID, idempotencyKey: String) throws -> Bool {
    try db.execute("""
        DELETE FROM outbox WHERE app_id = \(app) AND idempotency_key = \(idempotencyKey) AND attempts = 0 AND delivered_at IS NULL AND dead_at IS NULL AND lease_until IS NULL
        """) == 1
}

/// What an admin may see of an item: never the payload, only whether it is still there.
let outboxRecordColumns: SQL = """
    id, app_id, kind, attempts, last_error, created_at, delivered_at, dead_at, retried_at, destination, sealed, next_attempt_at, event_type,
    target_url, last_status, CASE WHEN sealed = 1 AND payload = '' THEN 0 ELSE 1 END AS payload_kept
    """

/// Dead items, newest first (death, then id), of `app` or of every app when nil.
func selectDeadOutboxItems(_ db: any SQLConnection, app: AppID?, after: DeadLetterPosition?, limit: Int) throws -> [OutboxItemRecord] {
    let scope: SQL = app.map { " AND app_id = \($0)" } ?? ""
    let page: SQL = after.map { " AND (dead_at < \($0.createdAt) OR (dead_at = \($0.createdAt) AND id < \($0.id)))" } ?? ""
    return try db.query("""
        SELECT \(outboxRecordColumns) FROM outbox WHERE dead_at IS NOT NULL\(scope)\(page) ORDER BY dead_at DESC, id DESC LIMIT \(Int64(limit))
        """).map(outboxItemRecord)
}

/// Queues `app`'s dead item again, due at `now`, attempts from 0, its give-up window from `now`;
/// only while it is dead and its payload kept. Whether it was.
func requeueDeadOutboxItem(_ db: any SQLConnection, app: AppID, id: String, now: Int64) throws -> Bool {
    try db.execute("""
        UPDATE outbox SET dead_at = NULL, attempts = 0, next_attempt_at = \(now), retried_at = \(now), lease_until = NULL, leased_by = NULL
        WHERE app_id = \(app) AND id = \(id) AND dead_at IS NOT NULL AND NOT (sealed = 1 AND payload = '')
        """) == 1
}

func outboxItemRecord(_ row: SQLRow) throws -> OutboxItemRecord {
    OutboxItemRecord(
        id: try row.string("id"), appID: try row.optionalString("app_id").map(AppID.init(unchecked:)), kind: OutboxKind(rawValue: try row.string("kind")),
        attempts: Int(try row.int64("attempts")), lastError: try row.optionalString("last_error"), createdAt: try row.int64("created_at"),
        deliveredAt: try row.optionalInt64("delivered_at"), deadAt: try row.optionalInt64("dead_at"), retriedAt: try row.optionalInt64("retried_at"),
        destination: try row.optionalString("destination"), sealed: try row.bool("sealed"), payloadKept: try row.bool("payload_kept"),
        nextAttemptAt: try row.optionalInt64("next_attempt_at"), eventType: try row.optionalString("event_type"), targetURL: try row.optionalString("target_url"),
        lastStatus: try row.optionalInt64("last_status").map(Int.init))
}

private func outboxItem(_ row: SQLRow) throws -> OutboxItem {
    OutboxItem(
        id: try row.string("id"), appID: try row.optionalString("app_id").map(AppID.init(unchecked:)), kind: OutboxKind(rawValue: try row.string("kind")),
        idempotencyKey: try row.string("idempotency_key"), payload: try row.string("payload"), sealed: try row.bool("sealed"),
        attempts: Int(try row.int64("attempts")), createdAt: try row.int64("created_at"), destination: try row.optionalString("destination"),
        retriedAt: try row.optionalInt64("retried_at"))
}
