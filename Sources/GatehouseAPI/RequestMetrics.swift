import GatehouseCore

/// What the API counts of every answer, and the page `GET /metrics` serves. The composition root
/// (GatehouseApp) plugs in its registry; the handlers know no metrics format.
public protocol RequestMetrics: Sendable {
    /// One finished request. `route` is the matched pattern, or a fixed word for unmatched requests.
    func record(method: String, route: String, status: Int, seconds: Double)
    /// A 429 answer on `route` with its error `code`.
    func recordRateLimited(route: String, code: String)
    /// The Prometheus text exposition of this node (`GET /metrics`).
    func exposition() throws -> String
}
