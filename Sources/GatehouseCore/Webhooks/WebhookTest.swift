/// `POST /v1/admin/app/webhooks/test` and `GET /v1/admin/webhooks/deliveries`: an admin's check of
/// the app's webhooks (ADR 0035). A test is a `webhook.test` event queued through the outbox like
/// every delivery (signed with the endpoint's secret at each attempt, retried, fair between apps),
/// to every webhook of the app or the one named, whatever events it subscribes to; at most
/// ``perMinute`` tests a minute per app.
public final class WebhookTest: Sendable {
    /// Test deliveries an app may queue in a minute (each may go to several endpoints).
    public static let perMinute: Int64 = 10
    private let store: any Store
    private let units: UnitOfWork
    private let sealer: SecretSealer
    private let limiter: RateLimiter
    private let clock: any Clock

    public init(store: any Store, units: UnitOfWork, sealer: SecretSealer, clock: any Clock) {
        self.store = store
        self.units = units
        self.sealer = sealer
        self.limiter = RateLimiter(clock: clock)
        self.clock = clock
    }

    /// One queued test delivery.
    public struct Queued: Sendable, Equatable {
        public var id: String
        public var url: String
        public var eventID: String
    }

    /// Queues a test delivery to `url`, or to each of the app's webhooks when nil.
    public func send(app: AppContext, url: String?) throws -> [Queued] {
        let hooks = app.settings.webhooks.filter { url == nil || $0.url == url }
        if hooks.isEmpty {
            throw url == nil
                ? GatehouseError.validation("webhooks", "The app has no webhook to test: add one to its settings first.")
                : GatehouseError.validation("url", "Not one of the app's webhooks (the URL must be as in its settings).")
        }
        let data = store.app(app.id)
        try limiter.hit(data, bucket: "webhook_test", subject: "app", limit: Self.perMinute)
        let now = clock.nowMillis()
        let eventID = EventID.generate().rawValue
        let body: JSON = [
            "id": .string(eventID), "type": "webhook.test", "app_id": .string(app.id.rawValue), "created_at": .string(rfc3339(millis: now)),
            "data": ["test": true],
        ]
        let text = body.serializedString
        return try units.run(data) { tx in
            try hooks.map { hook in
                let item = WebhookDelivery(url: hook.url, eventID: eventID, body: text).outboxItem(app: app.id, type: "webhook.test", sealer: sealer)
                _ = try tx.outbox.enqueue(item, now: now)
                guard let id = try tx.outbox.itemID(idempotencyKey: item.idempotencyKey) else {
                    throw InternalError("a test delivery just queued is not found")
                }
                return Queued(id: id, url: hook.url, eventID: eventID)
            }
        }
    }

    /// A page of the app's webhook deliveries, newest first, and where the next page starts.
    public func deliveries(
        app: AppContext, state: WebhookDeliveryState?, eventType: String?, after: DeadLetterPosition?, limit: Int
    ) throws -> (items: [OutboxItemRecord], next: DeadLetterPosition?) {
        let found = try store.app(app.id).outbox.webhookDeliveries(state: state, eventType: eventType, after: after, limit: limit + 1)
        let page = Array(found.prefix(limit))
        return (page, found.count > limit ? page.last.map { DeadLetterPosition(createdAt: $0.createdAt, id: $0.id) } : nil)
    }
}

extension OutboxItemRecord {
    /// A webhook delivery as the admin's list shows it: never the payload nor a secret.
    public var deliveryJSON: JSON {
        func time(_ millis: Int64?) -> JSON { millis.map { .string(rfc3339(millis: $0)) } ?? .null }
        return [
            "id": .string(id), "event_type": .optional(eventType), "url": .optional(targetURL), "state": .string(state.rawValue),
            "attempts": .int(Int64(attempts)), "last_status": lastStatus.map { .int(Int64($0)) } ?? .null, "last_error": .optional(lastError),
            "created_at": .string(rfc3339(millis: createdAt)), "next_attempt_at": state == .queued ? time(nextAttemptAt) : .null,
            "delivered_at": time(deliveredAt), "dead_at": time(deadAt), "retryable": .bool(deadAt != nil && payloadKept),
        ]
    }
}
