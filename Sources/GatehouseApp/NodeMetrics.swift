import GatehouseAPI
import GatehouseCore
import GatehouseCrypto

/// The API's metrics on this node: requests are counted in the registry, and `GET /metrics`
/// renders it with the gauges read at each scrape (the database pool, the hash queue, the outbox)
/// and the outbox by kind and state.
struct NodeMetrics: RequestMetrics {
    let registry: Metrics
    let store: any Store
    let hasher: PasswordHasher
    let outbox: OutboxWorker
    let clock: any Clock

    func record(method: String, route: String, status: Int, seconds: Double) {
        registry.record(method: method, route: route, status: status, seconds: seconds)
    }

    func recordRateLimited(route: String, code: String) {
        registry.recordRateLimited(route: route, code: code)
    }

    func exposition() throws -> String {
        let pool = store.connections
        let now = clock.nowMillis()
        let queue = try store.outbox.statistics(now: now)
        let breakdown = try store.outbox.breakdown(now: now)
        let argon2Memory = Argon2idMemory.mappedBytes
        let text = registry.render(
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
        return text + OutboxMetrics.render(breakdown, worker: outbox, now: now)
    }
}
