import GatehouseCore

/// Webhook deliveries over ``OutboundHTTPClient``: 10 s per attempt, no redirect followed, and
/// the address policy for URLs a tenant sets, checked after DNS resolution.
public struct OutboundWebhookTransport: WebhookTransport {
    private let client: OutboundHTTPClient

    /// - Parameter allowPrivate: `GATEHOUSE_ALLOW_PRIVATE_OUTBOUND`.
    public init(allowPrivate: Bool, timeoutSeconds: Int = 10) {
        client = OutboundHTTPClient(timeoutSeconds: timeoutSeconds, addressPolicy: .forTenantURLs(allowPrivate: allowPrivate))
    }

    public func post(_ url: String, body: [UInt8], headers: [(String, String)]) -> WebhookTransportOutcome {
        do {
            return .answered(status: try client.post(url, body: body, headers: headers).status)
        } catch {
            switch error {
            case .addressRefused(let reason): return .refused(reason: reason)
            case .unavailable(let reason): return .failed(reason: reason)
            default: return .failed(reason: "\(error)")
            }
        }
    }
}
