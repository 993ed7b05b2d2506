/// Routes `(method, path)` to handlers with patterns like `/v1/apps/{app_id}/users/{id}`.
///
/// - Segments are separated by `/`; a segment is either a literal (compared exactly, dots
///   allowed: `/.well-known/openid-configuration`, `/jwks.json`) or a whole-segment parameter
///   `{name}`.
/// - A parameter matches one non-empty segment; its value is percent-decoded and a segment
///   whose decoding fails or yields `/` does not match.
/// - A trailing slash is significant: `/v1/users/` is not `/v1/users`.
/// - When several patterns match a path, the one with a literal at the first position where
///   they differ wins (`/users/me` before `/users/{id}`).
/// - Methods are compared exactly (`"GET"`, not `"get"`). `HEAD` is answered by the `GET` route
///   (RFC 9110 asks every server for both; libmicrohttpd sends no body to a `HEAD`), unless that
///   route was added with `head: false`.
public struct Router<Handler: Sendable>: Sendable {
    private var routes: [RouteEntry] = []
    /// `handlers[i]` answers `routes[i]`.
    private var handlers: [Handler] = []
    /// Route indices by their number of segments: a path is only compared with routes of its length.
    private var routesByLength: [Int: [Int]] = [:]
    /// The routes without parameters, by their exact pattern: most requests go to one of these
    /// (`/v1/me`, `/v1/auth/refresh`, `/healthz`), found by one lookup instead of a scan.
    private var literalRoutes: [String: [Int]] = [:]

    /// Creates an empty router.
    public init() {}

    /// Registers `handler` for `method` and `pattern`; a `GET` route answers `HEAD` too unless
    /// `head` is false (for a `GET` that writes something, which a prefetching `HEAD` should not).
    ///
    /// Traps on a malformed pattern (not starting with `/`, an empty or unterminated `{}`, a
    /// parameter name used twice), on a second route with the same method and the same
    /// pattern shape (`/a/{x}` and `/a/{y}` count as the same), and on a `HEAD` route.
    public mutating func add(_ method: String, _ pattern: String, head: Bool = true, _ handler: Handler) {
        let path = PathPattern(pattern)
        precondition(method != "HEAD", "Router: HEAD is answered by the GET route")
        precondition(
            !routes.contains { $0.method == method && $0.path.shape == path.shape },
            "Router: duplicate route \(method) \(pattern)")
        routesByLength[path.segments.count, default: []].append(routes.count)
        if path.isLiteral { literalRoutes[pattern, default: []].append(routes.count) }
        routes.append(RouteEntry(method: method, pattern: pattern, path: path, answersHead: method == "GET" && head))
        handlers.append(handler)
    }

    /// Finds the route for `method` and `path` (the path without its query string).
    public func match(method: String, path: String) -> RouteMatch<Handler> {
        guard path.utf8.first == UInt8(ascii: "/") else { return .notFound }
        let isHead = method == "HEAD"
        // A route without parameters that matches is the most specific there is (a literal at
        // every position). Only for an ASCII path: String equality is canonical equivalence
        // (U+212A KELVIN SIGN equals "K"), where the scan below compares bytes.
        if path.utf8.allSatisfy({ $0 < 0x80 }), let exact = literalRoutes[path],
            let index = exact.first(where: { routes[$0].method == method || (isHead && routes[$0].answersHead) })
        {
            return .matched(handlers[index], parameters: [:], pattern: routes[index].pattern)
        }
        let pathSegments = path.utf8.dropFirst().split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        let candidates = routesByLength[pathSegments.count] ?? []
        var best: (index: Int, parameters: [String: String])?
        for index in candidates where routes[index].method == method || (isHead && routes[index].answersHead) {
            if let current = best, !routes[index].path.isMoreSpecific(than: routes[current.index].path) { continue }
            guard let parameters = routes[index].path.bind(pathSegments) else { continue }
            best = (index, parameters)
        }
        if let best {
            return .matched(handlers[best.index], parameters: best.parameters, pattern: routes[best.index].pattern)
        }
        // Only a miss pays for the methods the path would take.
        var allowed: Set<String> = []
        for index in candidates where routes[index].path.bind(pathSegments) != nil {
            allowed.insert(routes[index].method)
            if routes[index].answersHead { allowed.insert("HEAD") }
        }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allowed: allowed.sorted())
    }

    /// Every registered route, in registration order.
    public var operations: [(method: String, pattern: String)] {
        routes.map { (method: $0.method, pattern: $0.pattern) }
    }
}

/// What matching reads of a route, apart from its handler. Outside `Router`, because a type
/// nested in a generic one is generic too: its metadata was looked up four times a request
/// (about 1,300 instructions), `match` being called unspecialised from another module.
private struct RouteEntry: Sendable {
    let method: String
    let pattern: String
    let path: PathPattern
    let answersHead: Bool
}

/// A parsed route pattern; not generic, so matching runs as specialised code.
struct PathPattern: Sendable {
    enum Segment: Sendable, Hashable {
        case literal([UInt8])
        case parameter(String)
    }

    let segments: [Segment]

    /// True when every segment is a literal.
    var isLiteral: Bool {
        segments.allSatisfy { if case .literal = $0 { true } else { false } }
    }

    init(_ pattern: String) {
        precondition(pattern.hasPrefix("/"), "Router: pattern must start with '/': \(pattern)")
        var names: Set<String> = []
        segments = pattern.dropFirst().split(separator: "/", omittingEmptySubsequences: false).map { raw in
            if raw.hasPrefix("{") || raw.hasSuffix("}") || raw.contains("{") || raw.contains("}") {
                precondition(
                    raw.count > 2 && raw.hasPrefix("{") && raw.hasSuffix("}")
                        && !raw.dropFirst().dropLast().contains(where: { $0 == "{" || $0 == "}" }),
                    "Router: a parameter must be a whole segment '{name}': \(pattern)")
                let name = String(raw.dropFirst().dropLast())
                precondition(names.insert(name).inserted, "Router: parameter \(name) used twice in \(pattern)")
                return .parameter(name)
            }
            return .literal(Array(raw.utf8))
        }
    }

    /// The pattern with parameter names erased: `/a/{x}` and `/a/{y}` have the same shape.
    var shape: [Segment] {
        segments.map {
            if case .parameter = $0 { return .parameter("") }
            return $0
        }
    }

    func bind(_ path: [Substring.UTF8View.SubSequence]) -> [String: String]? {
        guard segments.count == path.count else { return nil }
        // Literals first, byte-wise: most routes fail here, before anything is decoded or allocated.
        for index in segments.indices {
            if case .literal(let literal) = segments[index], !path[index].elementsEqual(literal) { return nil }
        }
        var parameters: [String: String] = [:]
        for index in segments.indices {
            guard case .parameter(let name) = segments[index] else { continue }
            let raw = Substring(path[index])
            guard !raw.isEmpty, let value = PercentDecoding.decode(raw), !value.isEmpty, !value.contains("/") else { return nil }
            parameters[name] = value
        }
        return parameters
    }

    /// True when this pattern has a literal at the first position where the two differ in kind.
    func isMoreSpecific(than other: PathPattern) -> Bool {
        for index in segments.indices where index < other.segments.count {
            switch (segments[index], other.segments[index]) {
            case (.literal, .parameter): return true
            case (.parameter, .literal): return false
            default: continue
            }
        }
        return false
    }
}
