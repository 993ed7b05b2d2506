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
/// - Methods are compared exactly (`"GET"`, not `"get"`).
public struct Router<Handler: Sendable>: Sendable {
    private enum Segment: Sendable, Hashable {
        case literal(String)
        case parameter(String)
    }

    private struct Route: Sendable {
        let method: String
        let pattern: String
        let segments: [Segment]
        let handler: Handler
    }

    private var routes: [Route] = []
    /// Routes by their number of segments: a path is only compared with routes of its length.
    private var routesByLength: [Int: [Route]] = [:]

    /// Creates an empty router.
    public init() {}

    /// Registers `handler` for `method` and `pattern`.
    ///
    /// Traps on a malformed pattern (not starting with `/`, an empty or unterminated `{}`, a
    /// parameter name used twice) and on a second route with the same method and the same
    /// pattern shape (`/a/{x}` and `/a/{y}` count as the same).
    public mutating func add(_ method: String, _ pattern: String, _ handler: Handler) {
        let segments = Self.parse(pattern: pattern)
        let shape = Self.shape(segments)
        precondition(
            !routes.contains { $0.method == method && Self.shape($0.segments) == shape },
            "Router: duplicate route \(method) \(pattern)")
        let route = Route(method: method, pattern: pattern, segments: segments, handler: handler)
        routes.append(route)
        routesByLength[segments.count, default: []].append(route)
    }

    /// Finds the route for `method` and `path` (the path without its query string).
    public func match(method: String, path: String) -> RouteMatch<Handler> {
        let pathSegments = path.utf8.first == UInt8(ascii: "/")
            ? path.dropFirst().split(separator: "/", omittingEmptySubsequences: false) : nil
        guard let pathSegments else { return .notFound }

        var best: (route: Route, parameters: [String: String])?
        var allowed: Set<String> = []
        for route in routesByLength[pathSegments.count] ?? [] {
            guard let parameters = Self.bind(route.segments, to: pathSegments) else { continue }
            guard route.method == method else {
                allowed.insert(route.method)
                continue
            }
            if let current = best, !Self.isMoreSpecific(route.segments, than: current.route.segments) {
                continue
            }
            best = (route, parameters)
        }
        if let best {
            return .matched(best.route.handler, parameters: best.parameters, pattern: best.route.pattern)
        }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allowed: allowed.sorted())
    }

    /// Every registered route, in registration order.
    public var operations: [(method: String, pattern: String)] {
        routes.map { (method: $0.method, pattern: $0.pattern) }
    }

    private static func parse(pattern: String) -> [Segment] {
        precondition(pattern.hasPrefix("/"), "Router: pattern must start with '/': \(pattern)")
        var names: Set<String> = []
        return pattern.dropFirst().split(separator: "/", omittingEmptySubsequences: false).map { raw in
            if raw.hasPrefix("{") || raw.hasSuffix("}") || raw.contains("{") || raw.contains("}") {
                precondition(
                    raw.count > 2 && raw.hasPrefix("{") && raw.hasSuffix("}")
                        && !raw.dropFirst().dropLast().contains(where: { $0 == "{" || $0 == "}" }),
                    "Router: a parameter must be a whole segment '{name}': \(pattern)")
                let name = String(raw.dropFirst().dropLast())
                precondition(names.insert(name).inserted, "Router: parameter \(name) used twice in \(pattern)")
                return .parameter(name)
            }
            return .literal(String(raw))
        }
    }

    private static func shape(_ segments: [Segment]) -> [Segment] {
        segments.map {
            if case .parameter = $0 { return .parameter("") }
            return $0
        }
    }

    private static func bind(_ segments: [Segment], to path: [Substring]) -> [String: String]? {
        guard segments.count == path.count else { return nil }
        // Literals first, byte-wise: most routes fail here, before anything is decoded or allocated.
        for (segment, raw) in zip(segments, path) {
            if case .literal(let literal) = segment, !raw.utf8.elementsEqual(literal.utf8) { return nil }
        }
        var parameters: [String: String] = [:]
        for (segment, raw) in zip(segments, path) {
            switch segment {
            case .literal:
                continue
            case .parameter(let name):
                guard !raw.isEmpty, let value = PercentDecoding.decode(raw), !value.isEmpty,
                    !value.contains("/")
                else { return nil }
                parameters[name] = value
            }
        }
        return parameters
    }

    private static func isMoreSpecific(_ a: [Segment], than b: [Segment]) -> Bool {
        for (x, y) in zip(a, b) {
            switch (x, y) {
            case (.literal, .parameter): return true
            case (.parameter, .literal): return false
            default: continue
            }
        }
        return false
    }
}
