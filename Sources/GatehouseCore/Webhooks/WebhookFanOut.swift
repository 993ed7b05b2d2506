/// Turns an audit event into the webhook deliveries of its app: one outbox item per webhook
/// subscribed to the event's webhook type (``EventType/webhookType``), each carrying the body
/// `{"id", "type", "app_id", "created_at", "data": {"user"}}` (API.md, "Webhooks").
///
/// Subscriptions are read from this node's cached settings (``AppDirectory``): a webhook added on
/// another node is seen here once the cache has revalidated (5 s).
public struct WebhookFanOut: EventFanOut {
    private let directory: AppDirectory
    private let sealer: SecretSealer

    public init(directory: AppDirectory, sealer: SecretSealer) {
        self.directory = directory
        self.sealer = sealer
    }

    public func wants(_ type: EventType, app: AppID) -> Bool {
        guard let hookType = type.webhookType else { return false }
        // Not cached (an event recorded by a job rather than a request): assume so, and let
        // ``items(for:app:store:)`` read the settings.
        guard let context = directory.cached(id: app) else { return true }
        return context.settings.webhooks.contains { $0.wants(hookType) }
    }

    public func items(for event: Event, app: AppID, store: any AppScopedStore) throws -> [NewOutboxItem] {
        guard let hookType = event.type.webhookType else { return [] }
        guard let context = try directory.cached(id: app) ?? directory.app(id: app) else { return [] }
        let hooks = context.settings.webhooks.filter { $0.wants(hookType) }
        guard !hooks.isEmpty else { return [] }
        let body: JSON = [
            "id": .string(event.id.rawValue), "type": .string(hookType.rawValue), "app_id": .string(app.rawValue),
            "created_at": .string(rfc3339(millis: event.createdAt)), "data": ["user": try user(event.userID, store: store)],
        ]
        let text = body.serializedString
        return hooks.map { WebhookDelivery(url: $0.url, eventID: event.id.rawValue, body: text).outboxItem(app: app, type: hookType.rawValue, sealer: sealer) }
    }

    /// The user object as the event's transaction sees it; `{"id"}` alone when the row is gone
    /// (an erased account), and null only for an event of no user.
    private func user(_ id: UserID?, store: any AppScopedStore) throws -> JSON {
        guard let id else { return .null }
        guard let (user, identities) = try store.users.userWithIdentities(id) else { return ["id": .string(id.rawValue)] }
        return UserObject.json(user, identities)
    }
}
