/// Queuing one app's outbox items (the worker claims them through ``OutboxStore``).
public protocol OutboxQueue: Sendable {
    /// Queues an outbox item (false when its idempotency key is queued already); in a
    /// ``AppScopedStore/transaction(_:)``, it commits with the change that causes it.
    func enqueue(_ item: NewOutboxItem, now: Int64) throws -> Bool
    /// Removes a queued item not yet attempted nor held by a worker (false when there is none):
    /// a unit of work that makes an item queued ahead of it unneeded (``BlobDeletion``'s reservation).
    func withdraw(idempotencyKey: String) throws -> Bool
}
