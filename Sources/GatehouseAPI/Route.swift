import GatehouseCore
import GatehouseHTTP

/// A handler: decode the request, call one service, encode the answer.
public typealias Handler = @Sendable (Request) throws -> HTTPResponse

/// One operation of the API.
public struct Route: Sendable {
    /// What the operation accepts as a body.
    public enum Body: Sendable {
        /// No body expected; a body, if sent, is ignored (but still capped).
        case none
        /// `application/json`, at most 64 KiB.
        case json
        /// `application/x-www-form-urlencoded`, at most 64 KiB (Apple's form_post).
        case form
        /// `multipart/form-data`, streamed: the parts named in `fileFields` are spooled to disk
        /// (at most the calling app's `files.max_bytes` each, one part each), the others are
        /// short text fields; the handler finds them in `Request.upload` (see `SpooledFile` for
        /// how long the files live and what the handler may do with them).
        case multipart(fileFields: Set<String>)
        /// `application/x-ndjson` (another type is 415), at most `maxBytes` (more is 413), spooled
        /// to a file while it arrives, never held in memory: the handler reads it from
        /// `Request.spooledBody` (removed once the answer is sent). Answered on the network
        /// offload threads (the handler works through the whole file).
        case ndjson(maxBytes: Int)
    }

    public let body: Body
    /// Answered on the server's offload threads, not on an HTTP worker: the handler hashes a
    /// password and may wait for the hasher (ADR 0004).
    public let hashesPassword: Bool
    /// Answered on the server's network offload threads, not on an HTTP worker: the handler
    /// calls an identity provider (keys, Apple's token endpoint) and may wait for it.
    public let callsProvider: Bool
    /// Answered on the network offload threads too: the handler moves file contents (blob store,
    /// spool files) and may take a while with a large one.
    public let doesFileIO: Bool
    /// Checked when the headers are in, before any of the body is read (an upload is refused
    /// without being read: the key, the token, the account's right to upload).
    public let beforeBody: (@Sendable (Request) throws -> Void)?
    public let handler: Handler

    public init(
        body: Body, hashesPassword: Bool = false, callsProvider: Bool = false, doesFileIO: Bool = false,
        beforeBody: (@Sendable (Request) throws -> Void)? = nil, handler: @escaping Handler
    ) {
        self.body = body
        self.hashesPassword = hashesPassword
        self.callsProvider = callsProvider
        self.doesFileIO = doesFileIO
        self.beforeBody = beforeBody
        self.handler = handler
    }
}

/// Builds the route table; controllers add their routes to it.
public struct Routes: Sendable {
    public private(set) var router = Router<Route>()

    public init() {}

    /// Adds to an existing table.
    public init(router: Router<Route>) {
        self.router = router
    }

    /// `head: false` for a GET that writes something: a prefetching HEAD then gets 405.
    public mutating func get(_ pattern: String, head: Bool = true, callsProvider: Bool = false, doesFileIO: Bool = false, _ handler: @escaping Handler) {
        router.add("GET", pattern, head: head, Route(body: .none, callsProvider: callsProvider, doesFileIO: doesFileIO, handler: handler))
    }
    public mutating func delete(_ pattern: String, _ handler: @escaping Handler) { router.add("DELETE", pattern, Route(body: .none, handler: handler)) }
    public mutating func post(
        _ pattern: String, body: Route.Body = .json, hashesPassword: Bool = false, callsProvider: Bool = false,
        beforeBody: (@Sendable (Request) throws -> Void)? = nil, _ handler: @escaping Handler
    ) {
        let fileIO: Bool
        switch body {
        case .multipart, .ndjson: fileIO = true
        default: fileIO = false
        }
        router.add(
            "POST", pattern,
            Route(body: body, hashesPassword: hashesPassword, callsProvider: callsProvider, doesFileIO: fileIO, beforeBody: beforeBody, handler: handler))
    }
    public mutating func patch(_ pattern: String, doesFileIO: Bool = false, _ handler: @escaping Handler) {
        router.add("PATCH", pattern, Route(body: .json, doesFileIO: doesFileIO, handler: handler))
    }
    public mutating func put(_ pattern: String, hashesPassword: Bool = false, _ handler: @escaping Handler) {
        router.add("PUT", pattern, Route(body: .json, hashesPassword: hashesPassword, handler: handler))
    }
}
