import GatehouseCore
import GatehouseHTTP
import Synchronization

/// What `head` learns of a request, carried in `HTTPRequest.context` to every later call about it
/// (`respond`, `busy`, the refusals of its body): the route, matched once a request, and the app
/// of its `X-App-Key`, resolved at most once (an upload needs it for its size limit before the
/// body, to check the caller before the body, to answer, and for CORS).
final class RequestContext: Sendable {
    let route: Route
    let parameters: [String: String]
    /// The route's pattern, for metrics and the access log.
    let pattern: String
    private let directory: AppDirectory
    /// The app of the `X-App-Key` looked up (nil inside: no app has that key), by key.
    private let resolved = Mutex<(key: String, app: AppContext?)?>(nil)

    init(route: Route, parameters: [String: String], pattern: String, directory: AppDirectory) {
        self.route = route
        self.parameters = parameters
        self.pattern = pattern
        self.directory = directory
    }

    /// The active app whose public key is `key` (the request's `X-App-Key`), or nil: looked up once,
    /// then remembered for the rest of the request. A lookup that fails (the database) is not
    /// remembered.
    func app(key: String) throws -> AppContext? {
        if let resolved = resolved.withLock({ $0 }), resolved.key == key { return resolved.app }
        let app = try directory.app(key: key)
        resolved.withLock { $0 = (key, app) }
        return app
    }

    /// The context `head` attached to `request`, if it matched a route.
    static func of(_ request: HTTPRequest) -> RequestContext? {
        request.context as? RequestContext
    }

    /// The app of `key` for `request`: the one its context resolved, else looked up in `directory`
    /// (an answer `head` gave before matching a route has no context).
    static func app(key: String, of request: HTTPRequest, directory: AppDirectory) throws -> AppContext? {
        if let context = of(request) { return try context.app(key: key) }
        return try directory.app(key: key)
    }
}
