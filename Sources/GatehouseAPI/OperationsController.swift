import GatehouseCore
import GatehouseCrypto
import GatehouseHTTP

/// Health, readiness and metrics for operators and load balancers.
struct OperationsController {
    let auth: Authenticator
    let store: any Store
    let metrics: Metrics
    let outbox: OutboxWorker
    let hasher: PasswordHasher
    let clock: any Clock

    func register(_ routes: inout Routes) {
        routes.get("/healthz", health)
        routes.get("/readyz", ready)
        routes.get("/metrics", prometheus)
    }

    func health(_ request: Request) throws -> HTTPResponse {
        .json(["status": "ok"])
    }

    func ready(_ request: Request) throws -> HTTPResponse {
        guard store.ping() else { throw GatehouseError(.unavailable, "The database is not reachable.", retryAfter: 1) }
        return .json(["status": "ok"])
    }

    func prometheus(_ request: Request) throws -> HTTPResponse {
        try auth.platform(request)
        let pool = store.connections
        let now = clock.nowMillis()
        let queue = try store.outbox.statistics(now: now)
        let breakdown = try store.outbox.breakdown(now: now)
        let argon2Memory = Argon2idMemory.mappedBytes
        let text = metrics.render(
            gauges: [
                ("gatehouse_db_pool_connections", "Database connections open in the pool.", Double(pool.open)),
                ("gatehouse_db_pool_in_use", "Database connections in use.", Double(pool.inUse)),
                ("gatehouse_db_pool_waiting", "Requests waiting for a database connection.", Double(pool.waiting)),
                ("gatehouse_password_hash_queue_depth", "Password hashes waiting for a hash thread on this node.", Double(hasher.queueDepth)),
                ("gatehouse_password_hash_memory_bytes", "Memory mapped for argon2id's work areas on this node, in use or kept for the next hashes.",
                 Double(argon2Memory.kept + argon2Memory.lent)),
                ("gatehouse_outbox_queued", "Outbox items neither delivered nor dead, on every node.", Double(queue.queued)),
                ("gatehouse_outbox_in_flight", "Outbox items a worker holds now, on every node.", Double(queue.inFlight)),
                ("gatehouse_outbox_dead", "Dead letters kept in the outbox.", Double(queue.dead)),
                ("gatehouse_outbox_oldest_due_seconds", "How long the oldest due outbox item has waited past its next attempt.",
                 Double(queue.oldestDueAgeMillis) / 1000),
            ],
            counters: [
                ("gatehouse_outbox_delivered_total", "Outbox items this node delivered.", Double(outbox.delivered.load(ordering: .relaxed))),
                ("gatehouse_outbox_retried_total", "Outbox deliveries this node will try again.", Double(outbox.retried.load(ordering: .relaxed))),
                ("gatehouse_outbox_dead_lettered_total", "Outbox items this node dead-lettered.", Double(outbox.deadLettered.load(ordering: .relaxed))),
            ])
        return HTTPResponse(
            status: 200, headers: HTTPHeaders([("Content-Type", "text/plain; version=0.0.4; charset=utf-8"), ("Cache-Control", "no-store")]),
            body: Array((text + OutboxMetrics.render(breakdown, worker: outbox, now: now)).utf8))
    }
}
