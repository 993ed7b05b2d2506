/// How a webhook delivery reaches its endpoint: an HTTP POST that follows no redirect, gives up
/// after `timeoutSeconds`, and refuses addresses a tenant may not reach (GatehouseProviders'
/// outbound client, in production).
public protocol WebhookTransport: Sendable {
    func post(_ url: String, body: [UInt8], headers: [(String, String)]) -> WebhookTransportOutcome
}

public enum WebhookTransportOutcome: Sendable, Equatable {
    /// The endpoint answered with this status.
    case answered(status: Int)
    /// Not sent: the URL resolved to an address a tenant may not reach.
    case refused(reason: String)
    /// No answer: unreachable, timed out, or the answer was too large.
    case failed(reason: String)
}

/// Delivers the outbox's webhooks (Standard Webhooks): `POST url` with the queued body and the
/// `webhook-id` (the event id), `webhook-timestamp` (this attempt's, Unix seconds) and
/// `webhook-signature` headers. A 2xx delivers it; any other answer, a redirect (not followed) or
/// no answer is retried with the same `webhook-id`. A webhook no longer in the app's settings, a
/// refused address or a payload that cannot be opened is a dead letter.
public struct WebhookOutboxHandler: OutboxHandler {
    public var kind: OutboxKind { .webhook }
    private let directory: AppDirectory
    private let sealer: SecretSealer
    private let transport: any WebhookTransport
    private let clock: any Clock

    public init(directory: AppDirectory, sealer: SecretSealer, transport: any WebhookTransport, clock: any Clock) {
        self.directory = directory
        self.sealer = sealer
        self.transport = transport
        self.clock = clock
    }

    /// The endpoint's host and port (queued with the item; read from the payload for older items).
    public func destination(of item: OutboxItem) -> String? {
        item.destination ?? WebhookDelivery.open(item, sealer: sealer).flatMap { OutboxDestination.of(url: $0.url) }
    }

    public func deliver(_ item: OutboxItem) -> OutboxDelivery { attempt(item).outcome }

    /// The delivery, and the status the endpoint answered (kept as the item's `last_status`).
    public func attempt(_ item: OutboxItem) -> OutboxAttempt {
        guard let appID = item.appID else { return OutboxAttempt(.dead(reason: "a webhook item names no app")) }
        guard let delivery = WebhookDelivery.open(item, sealer: sealer) else {
            return OutboxAttempt(.dead(reason: "the payload cannot be opened with this master key"))
        }
        let app: AppContext
        do {
            guard let found = try directory.app(id: appID) else { return OutboxAttempt(.dead(reason: "the app no longer exists")) }
            app = found
        } catch {
            return OutboxAttempt(.retry(reason: "the app's settings cannot be read now"))
        }
        // The secret as set now: a rotated secret signs the retries of earlier events too, and for
        // 24 hours after a change the replaced one signs as well (two `v1,` signatures).
        guard let hook = app.settings.webhooks.first(where: { $0.url == delivery.url }) else {
            return OutboxAttempt(.dead(reason: "the webhook is no longer in the app's settings"))
        }
        let body = Array(delivery.body.utf8)
        let now = clock.nowMillis()
        let timestamp = now / 1000
        let headers = [
            ("Content-Type", "application/json"), ("webhook-id", delivery.eventID), ("webhook-timestamp", String(timestamp)),
            ("webhook-signature", WebhookSignature.sign(keys: hook.signingKeys(now: now), id: delivery.eventID, timestamp: timestamp, body: body)),
        ]
        switch transport.post(delivery.url, body: body, headers: headers) {
        case .answered(let status) where (200...299).contains(status): return OutboxAttempt(.delivered, status: status)
        case .answered(let status) where (300...399).contains(status): return OutboxAttempt(.unreachable(reason: "the endpoint answered \(status), a redirect (not followed)"), status: status)
        case .answered(let status): return OutboxAttempt(.unreachable(reason: "the endpoint answered \(status)"), status: status)
        case .refused(let reason): return OutboxAttempt(.dead(reason: reason))
        case .failed(let reason): return OutboxAttempt(.unreachable(reason: reason))
        }
    }
}
