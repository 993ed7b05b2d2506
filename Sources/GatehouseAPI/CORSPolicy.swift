import GatehouseCore
import GatehouseHTTP
import Synchronization

/// CORS from each app's `allowed_origins`. Actual responses allow an origin only when the calling
/// app (its `X-App-Key`) lists it. Preflights carry no app key, so they are answered for an origin
/// that any app lists (the actual request is then checked against its own app).
///
/// `/v1/admin/*` is outside CORS altogether: secret keys belong on servers, so those answers carry
/// no CORS header and a preflight there is an ordinary `OPTIONS` (405). Every other answer carries
/// `Vary: Origin`, whether or not this request's origin matched, so a shared cache never serves one
/// origin's answer to another.
final class CORSPolicy: Sendable {
    private let directory: AppDirectory
    private let catalog: any AppCatalog
    private let clock: any Clock
    /// Preflight answers per origin, cached briefly (a preflight flood must not become a query flood).
    private let preflightCache = Mutex<[String: (allowed: Bool, at: Int64)]>([:])

    static let allowedHeaders = "X-App-Key, Authorization, Content-Type, X-Request-Id"
    static let exposedHeaders = "X-Request-Id, Retry-After, WWW-Authenticate"

    init(directory: AppDirectory, catalog: any AppCatalog, clock: any Clock) {
        self.directory = directory
        self.catalog = catalog
        self.clock = clock
    }

    /// Whether answers for `path` (as sent, not decoded) may carry CORS headers. The router matches
    /// literal segments byte-wise, so no spelling of an admin route escapes this prefix test.
    static func covers(path: String) -> Bool {
        !(path == "/v1/admin" || path.hasPrefix("/v1/admin/"))
    }

    func isPreflight(_ request: HTTPRequest) -> Bool {
        request.method == "OPTIONS" && request.headers["Origin"] != nil && request.headers["Access-Control-Request-Method"] != nil
            && Self.covers(path: request.path)
    }

    /// Answers a preflight for a route that exists (`allowedMethods` are the route's methods).
    func preflight(_ request: HTTPRequest, allowedMethods: [String]) -> HTTPResponse {
        var response = HTTPResponse(status: 204)
        response.headers.set("Vary", "Origin")
        guard let origin = request.headers["Origin"]?.lowercased(), isAllowedByAnyApp(origin) else { return response }
        response.headers.set("Access-Control-Allow-Origin", origin)
        response.headers.set("Access-Control-Allow-Methods", allowedMethods.joined(separator: ", "))
        response.headers.set("Access-Control-Allow-Headers", Self.allowedHeaders)
        response.headers.set("Access-Control-Allow-Credentials", "true")
        response.headers.set("Access-Control-Max-Age", "600")
        return response
    }

    /// Adds `Vary: Origin` to an actual response outside `/v1/admin/*`, and the CORS headers when
    /// the calling app allows the request's origin.
    func decorate(_ response: inout HTTPResponse, for request: HTTPRequest) {
        guard Self.covers(path: request.path) else { return }
        if !response.headers.values("Vary").contains("Origin") { response.headers.add("Vary", "Origin") }
        guard let origin = request.headers["Origin"]?.lowercased(), let key = request.headers["X-App-Key"],
            let app = try? RequestContext.app(key: key, of: request, directory: directory), app.settings.allowedOrigins.contains(origin)
        else { return }
        response.headers.set("Access-Control-Allow-Origin", origin)
        response.headers.set("Access-Control-Allow-Credentials", "true")
        response.headers.set("Access-Control-Expose-Headers", Self.exposedHeaders)
    }

    private func isAllowedByAnyApp(_ origin: String) -> Bool {
        let now = clock.nowMillis()
        if let cached = preflightCache.withLock({ $0[origin] }), now - cached.at < 5000 { return cached.allowed }
        let allowed = (try? catalog.isOriginAllowedByAnyApp(origin)) ?? false
        preflightCache.withLock { cache in
            if cache.count > 10_000 { cache.removeAll() }
            cache[origin] = (allowed, now)
        }
        return allowed
    }
}
