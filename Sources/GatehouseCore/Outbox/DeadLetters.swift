/// Dead outbox items, kept to be retried (API.md, "Apple, to the end"): `GET
/// /v1/admin/outbox?state=dead`, `POST /v1/admin/outbox/{id}/retry` and `gatehouse outbox
/// list|retry`. A tenant admin sees and retries its own app's items only; the platform operator
/// every app's. A dead item keeps its sealed payload 30 days (then the maintenance job erases it,
/// and it can no longer be retried).
///
/// A retry queues the item as new: due at once, its attempts counted from 0 (so its back-off starts
/// at 5 s again) and its give-up window (72 hours, 30 days for an Apple revocation) from the retry,
/// so that it is not dead again at its first failure. What it had been through is kept in the
/// `outbox.retried` audit event (`previous_attempts`, `previous_error`).
public final class DeadLetters: Sendable {
    private let store: any Store
    private let units: UnitOfWork
    private let clock: any Clock

    public init(store: any Store, units: UnitOfWork, clock: any Clock) {
        self.store = store
        self.units = units
        self.clock = clock
    }

    /// Who asks: an app's admin (its items only) or the platform operator (every app's).
    public enum Viewer: Sendable, Equatable {
        case app(AppID)
        case platform

        var actor: String { self == .platform ? "platform" : "admin" }
    }

    /// A page of dead items, newest first, and where the next page starts when there may be more.
    /// `only` narrows the platform's list to one app (an app's admin sees its own anyway).
    public func list(_ viewer: Viewer, only: AppID? = nil, after: DeadLetterPosition?, limit: Int) throws -> (items: [OutboxItemRecord], next: DeadLetterPosition?) {
        let found: [OutboxItemRecord]
        switch (viewer, only) {
        case (.app(let app), _), (.platform, .some(let app)): found = try store.app(app).outbox.deadItems(after: after, limit: limit + 1)
        case (.platform, nil): found = try store.outbox.deadItems(after: after, limit: limit + 1)
        }
        let page = Array(found.prefix(limit))
        return (page, found.count > limit ? page.last?.deadPosition : nil)
    }

    /// Queues the dead item `id` again; the item as it is now. 404 when the viewer has no such
    /// item, 409 `outbox/not-dead` when it is not dead, 410 `outbox/payload-erased` when its
    /// payload is gone.
    public func retry(_ viewer: Viewer, id: String) throws -> OutboxItemRecord {
        let notFound = GatehouseError(.notFound, "No such outbox item.")
        guard Self.isItemID(id) else { throw notFound }
        let app: AppID
        switch viewer {
        case .app(let own): app = own
        case .platform:
            guard let owner = try store.outbox.item(id)?.appID else { throw notFound }
            app = owner
        }
        let now = clock.nowMillis()
        return try units.run(store.app(app)) { tx in
            guard let item = try tx.outbox.item(id) else { throw notFound }
            try Self.requireRetryable(item)
            // Guarded again in the statement: another retry, or the erasure, may have come first.
            guard try tx.outbox.requeueDead(id, now: now) else {
                try Self.requireRetryable(try tx.outbox.item(id) ?? item)
                throw notFound
            }
            try tx.auditLog.record(Event(
                type: .outboxRetried, userID: nil, sessionID: nil, ip: nil, userAgent: nil,
                data: [
                    "item_id": .string(id), "kind": .string(item.kind.rawValue), "by": .string(viewer.actor),
                    "previous_attempts": .int(Int64(item.attempts)), "previous_error": .optional(item.lastError),
                ], createdAt: now))
            guard let queued = try tx.outbox.item(id) else { throw notFound }
            return queued
        }
    }

    private static func requireRetryable(_ item: OutboxItemRecord) throws {
        guard item.deadAt != nil else {
            throw GatehouseError(
                .outboxItemNotDead, "This outbox item is not dead (\(item.deliveredAt == nil ? "it is queued" : "it was delivered")): there is nothing to retry.")
        }
        guard item.payloadKept else {
            throw GatehouseError(
                .outboxPayloadErased,
                "This dead item's sealed payload was erased 30 days after it died, so it cannot be sent again; the change that queued it must be made anew.")
        }
    }

    /// `obx_` and hex, as the outbox makes them: anything else names no item.
    public static func isItemID(_ text: some StringProtocol) -> Bool {
        text.hasPrefix("obx_") && text.utf8.count <= 64 && text.utf8.dropFirst(4).allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
            && text.utf8.count > 4
    }
}

extension OutboxItemRecord {
    /// Where the item stands: dead, delivered, or queued (due, in flight or waiting).
    public var state: WebhookDeliveryState { deadAt != nil ? .dead : deliveredAt != nil ? .delivered : .queued }

    /// The item as an admin sees it (the API's list and retry, the command line): what it is,
    /// where it stands, whether it can be retried; never its payload.
    public var adminJSON: JSON {
        // A sealed payload is erased 30 days after the item died; an unsealed one is kept.
        let keptUntil = sealed && payloadKept ? deadAt.map { $0 + MaintenancePolicy.deadOutboxPayloadRetention } : nil
        func time(_ millis: Int64?) -> JSON { millis.map { .string(rfc3339(millis: $0)) } ?? .null }
        return [
            "id": .string(id), "kind": .string(kind.rawValue), "app_id": .optional(appID?.rawValue), "state": .string(state.rawValue),
            "attempts": .int(Int64(attempts)), "last_error": .optional(lastError), "destination": .optional(destination),
            "created_at": .string(rfc3339(millis: createdAt)), "dead_at": time(deadAt), "retried_at": time(retriedAt),
            "retryable": .bool(deadAt != nil && payloadKept), "payload_kept_until": time(keptUntil),
        ]
    }
}
