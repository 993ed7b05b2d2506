import GatehouseCore
import GatehouseHTTP

/// Health, readiness and metrics for operators and load balancers.
struct OperationsController {
    let auth: Authenticator
    let store: any Store
    let metrics: any RequestMetrics

    func register(_ routes: inout Routes) {
        routes.get("/healthz", health)
        routes.get("/readyz", ready)
        routes.get("/metrics", prometheus)
    }

    func health(_ request: Request) throws -> HTTPResponse {
        .json(["status": "ok"])
    }

    func ready(_ request: Request) throws -> HTTPResponse {
        guard store.ping() else { throw GatehouseError(.unavailable, "The database is not reachable.", retryAfter: 1) }
        return .json(["status": "ok"])
    }

    func prometheus(_ request: Request) throws -> HTTPResponse {
        try auth.platform(request)
        return HTTPResponse(
            status: 200, headers: HTTPHeaders([("Content-Type", "text/plain; version=0.0.4; charset=utf-8"), ("Cache-Control", "no-store")]),
            body: Array(try metrics.exposition().utf8))
    }
}
