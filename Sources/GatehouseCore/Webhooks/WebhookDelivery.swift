import GatehouseCrypto

/// One delivery as the outbox keeps it: where to, and the exact body bytes that are signed and
/// sent on every attempt. Sealed in the table (the body holds the user's personal data) and erased
/// once delivered or dead. No secret: the handler reads the endpoint's secret from the app's
/// current settings at each attempt.
public struct WebhookDelivery: Sendable, Equatable {
    public var url: String
    /// The event id: the `webhook-id` of every attempt.
    public var eventID: String
    public var body: String

    public init(url: String, eventID: String, body: String) {
        self.url = url
        self.eventID = eventID
        self.body = body
    }

    /// The sealing field of a delivery's payload (with the app, the AAD of ``SecretSealer``).
    static let sealedField = "outbox/webhook"

    /// The outbox item that delivers this for `app`, keyed by event and endpoint (a repeated
    /// queuing of one event to one URL is one delivery).
    /// `type`: the webhook type, shown in the admin's list of deliveries.
    public func outboxItem(app: AppID, type: String? = nil, sealer: SecretSealer) -> NewOutboxItem {
        let json: JSON = ["url": .string(url), "id": .string(eventID), "body": .string(body)]
        let endpoint = Digest.hex(Digest.sha256(Array(url.utf8))).prefix(16)
        return NewOutboxItem(
            appID: app, kind: .webhook, idempotencyKey: "webhook:\(eventID):\(endpoint)",
            payload: sealer.seal(json.serializedString, app: app, field: Self.sealedField), sealed: true,
            destination: OutboxDestination.of(url: url), eventType: type, targetURL: url)
    }

    /// Opens an item's payload; nil when it cannot be opened (another master key) or read.
    public static func open(_ item: OutboxItem, sealer: SecretSealer) -> WebhookDelivery? {
        guard let app = item.appID, let opened = try? sealer.open(item.payload, app: app, field: sealedField),
            let json = try? JSON.parse(Array(opened.utf8)), let url = json["url"]?.stringValue, let id = json["id"]?.stringValue,
            let body = json["body"]?.stringValue
        else { return nil }
        return WebhookDelivery(url: url, eventID: id, body: body)
    }
}
