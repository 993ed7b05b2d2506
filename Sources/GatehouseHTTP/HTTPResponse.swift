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

    /// Creates a response.
    public init(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}
