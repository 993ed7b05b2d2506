import GatehouseCore

/// The outbox on `/metrics` by kind and state, its open circuit breakers, and the apps with the
/// most items waiting: how an operator sees a noisy tenant (docs/operations.md, "Sharing one server").
enum OutboxMetrics {
    static func render(_ breakdown: OutboxBreakdown, worker: OutboxWorker, now: Int64) -> String {
        var out = "# HELP gatehouse_outbox_items Outbox items on every node by kind and state (queued includes in_flight and paused).\n"
        out += "# TYPE gatehouse_outbox_items gauge\n"
        for count in breakdown.counts {
            out += "gatehouse_outbox_items{kind=\"\(escape(count.kind.rawValue))\",state=\"\(count.state)\"} \(count.count)\n"
        }
        out += "# HELP gatehouse_outbox_destinations_paused Destinations (per app) whose circuit breaker is open now, on every node.\n"
        out += "# TYPE gatehouse_outbox_destinations_paused gauge\ngatehouse_outbox_destinations_paused \(breakdown.pausedCount)\n"
        out += "# HELP gatehouse_outbox_destination_paused_seconds How long an open breaker stays open yet, by app and destination (the \(OutboxBreakdown.listLimit) most failing).\n"
        out += "# TYPE gatehouse_outbox_destination_paused_seconds gauge\n"
        for paused in breakdown.paused {
            let labels = "app_id=\"\(escape(paused.appID?.rawValue ?? ""))\",destination=\"\(escape(paused.destination))\",failures=\"\(paused.failures)\""
            out += "gatehouse_outbox_destination_paused_seconds{\(labels)} \(Double(max(0, paused.pausedUntil - now)) / 1000)\n"
        }
        out += "# HELP gatehouse_outbox_app_queued Items waiting, by app and kind, for the \(OutboxBreakdown.listLimit) apps with the most.\n"
        out += "# TYPE gatehouse_outbox_app_queued gauge\n"
        for backlog in breakdown.largestBacklogs {
            out += "gatehouse_outbox_app_queued{app_id=\"\(escape(backlog.appID.rawValue))\",kind=\"\(escape(backlog.kind.rawValue))\"} \(backlog.queued)\n"
        }
        out += "# HELP gatehouse_outbox_postponed_total Claimed items this node gave back unattempted, their destination paused.\n"
        out += "# TYPE gatehouse_outbox_postponed_total counter\ngatehouse_outbox_postponed_total \(worker.postponed.load(ordering: .relaxed))\n"
        out += "# HELP gatehouse_outbox_breaker_opened_total Failures on this node that opened a destination's breaker or kept it open.\n"
        out += "# TYPE gatehouse_outbox_breaker_opened_total counter\ngatehouse_outbox_breaker_opened_total \(worker.breakerOpened.load(ordering: .relaxed))\n"
        return out
    }

    private static func escape(_ s: String) -> String { Metrics.escape(s) }
}
