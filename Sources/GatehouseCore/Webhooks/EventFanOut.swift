/// What the store asks each time it records an audit event: the outbox items that must commit
/// with it (webhook deliveries). The one hook every event passes through, whichever path records
/// it, so that no writer can forget its webhooks (ADR 0009).
public protocol EventFanOut: Sendable {
    /// Cheap (cached settings, no database): whether the app has a webhook subscribed to the
    /// webhook type `type` maps to. When false, the store records the event alone.
    func wants(_ type: EventType, app: AppID) -> Bool
    /// The outbox items to commit with `event`. `store` is bound to the event's own transaction:
    /// reads through it see the change the event records. A throw rolls the change back.
    func items(for event: Event, app: AppID, store: any AppScopedStore) throws -> [NewOutboxItem]
}
