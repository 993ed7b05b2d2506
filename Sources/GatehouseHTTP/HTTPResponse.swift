/// A response to send.
///
/// Header fields whose name or value contains CR, LF or NUL (or whose name is not a valid
/// token) are dropped by the server, never sent. `Content-Length` is set by the server.
public struct HTTPResponse: Sendable {
    /// The status code (100–599); anything else is sent as 500.
    public var status: Int
    /// Header fields to send.
    public var headers: HTTPHeaders
    /// The body bytes.
    public var body: [UInt8]
    /// A body read piece by piece as the connection takes it (instead of `body`), for large
    /// content: the server holds one piece at a time.
    public var stream: ResponseStream?

    /// Creates a response.
    public init(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A response whose body is `stream`'s `size` bytes.
    public init(status: Int, headers: HTTPHeaders = HTTPHeaders(), stream: ResponseStream) {
        self.init(status: status, headers: headers)
        self.stream = stream
    }
}

/// A response body the server pulls as the client reads it: `size` bytes in all, `read` called
/// with at most `maxBytes` each time, in order, from one thread at a time, then `close` once
/// (also when the client goes away first, or for a `HEAD`, which reads nothing).
///
/// `@unchecked Sendable`: a response crosses once from the thread that made it to the one that
/// sends it, and is read by that one alone.
public final class ResponseStream: @unchecked Sendable {
    public let size: Int64
    private let readPiece: (Int) throws -> [UInt8]
    private let onClose: () -> Void
    private var closed = false

    public init(size: Int64, read: @escaping (Int) throws -> [UInt8], close: @escaping () -> Void) {
        self.size = size
        self.readPiece = read
        self.onClose = close
    }

    /// The next bytes (empty at the end); nil when reading failed (the connection is then cut).
    func next(upTo maxBytes: Int) -> [UInt8]? { try? readPiece(maxBytes) }

    func close() {
        guard !closed else { return }
        closed = true
        onClose()
    }

    deinit { close() }
}

extension HTTPResponse {
    /// The response as HTTP/1.1 bytes with `Connection: close`, for writing straight to a socket
    /// when libmicrohttpd cannot queue it (a body that came too slowly). Headers pass
    /// `ResponseHeaderPolicy` as for queued responses; a `stream` body is not included.
    func closingWireBytes() -> [UInt8] {
        let status = (200...599).contains(self.status) ? self.status : 500
        var head = "HTTP/1.1 \(status) \(Self.reason(status))\r\n"
        for (name, value) in headers where ResponseHeaderPolicy.allows(name: name, value: value) && !HTTPHeaders.namesMatch(name, "Connection") {
            head += "\(name): \(value)\r\n"
        }
        for (name, value) in ResponseHeaderPolicy.always where !headers.contains(name) { head += "\(name): \(value)\r\n" }
        head += "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        return Array(head.utf8) + body
    }

    private static func reason(_ status: Int) -> String {
        switch status {
        case 408: "Request Timeout"
        case 503: "Service Unavailable"
        default: status < 400 ? "OK" : status < 500 ? "Client Error" : "Server Error"
        }
    }
}
