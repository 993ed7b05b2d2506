/// Queuing one app's outbox items (the worker claims them through ``OutboxStore``).
public protocol OutboxQueue: Sendable {
    /// Queues an outbox item (false when its idempotency key is queued already); in a
    /// ``AppScopedStore/transaction(_:)``, it commits with the change that causes it.
    func enqueue(_ item: NewOutboxItem, now: Int64) throws -> Bool
    /// Removes a queued item not yet attempted nor held by a worker (false when there is none):
    /// a unit of work that makes an item queued ahead of it unneeded (``BlobDeletion``'s reservation).
    func withdraw(idempotencyKey: String) throws -> Bool
    /// The app's item with this id; nil when there is none (or it is another app's).
    func item(_ id: String) throws -> OutboxItemRecord?
    /// The app's dead items, newest first (by death, then id), after `after`, at most `limit`.
    func deadItems(after: DeadLetterPosition?, limit: Int) throws -> [OutboxItemRecord]
    /// Queues the app's dead item `id` again, due at `now`: not dead any more, attempts counted
    /// from 0, its give-up window from `now` (``OutboxItem/retriedAt``). False (nothing changed)
    /// when there is no such dead item of the app, or its payload was erased.
    func requeueDead(_ id: String, now: Int64) throws -> Bool
    /// The id of the app's item queued under `idempotencyKey`; nil when there is none.
    func itemID(idempotencyKey: String) throws -> String?
    /// The app's webhook deliveries, newest first (by creation, then id), after `after`, at most
    /// `limit`; only those in `state` and of `eventType` when given.
    func webhookDeliveries(state: WebhookDeliveryState?, eventType: String?, after: DeadLetterPosition?, limit: Int) throws -> [OutboxItemRecord]
}

/// Where a webhook delivery stands, as the admin's list filters it.
public enum WebhookDeliveryState: String, Sendable, CaseIterable {
    /// Not delivered yet: due, in flight, or waiting for its next attempt.
    case queued
    case delivered
    /// Given up on (kept to be retried by hand).
    case dead
}
