/// The outcome of `Router.match(method:path:)`.
public enum RouteMatch<Handler: Sendable>: Sendable {
    /// A route matched: its handler, the decoded `{param}` values by name, and its pattern.
    case matched(Handler, parameters: [String: String], pattern: String)
    /// The path matches routes, but none for this method; `allowed` is sorted (for `Allow`).
    case methodNotAllowed(allowed: [String])
    /// No route matches the path.
    case notFound
}
