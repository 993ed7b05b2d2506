import GatehouseCrypto

/// A request as libmicrohttpd parsed it.
public struct HTTPRequest: Sendable {
    /// The method as sent, e.g. `"GET"`.
    public var method: String
    /// The URL path without the query string, as libmicrohttpd gives it to the access handler.
    public var path: String
    /// The decoded query arguments, in order (duplicates kept).
    public var query: [(name: String, value: String)]
    /// The request header fields, in order.
    public var headers: HTTPHeaders
    /// The request body; empty until the whole body is in (and always empty in `head`).
    public var body: [UInt8]
    /// The parsed `multipart/form-data` body of a `HeadDecision.readMultipart` route (then
    /// `body` stays empty); nil otherwise.
    public var upload: Upload?
    /// The body of a `HeadDecision.spoolBody` route, written to a spool file as it arrived (then
    /// `body` stays empty; `field` is empty, `declaredContentType` the request's); nil otherwise.
    public var spooledBody: SpooledFile?
    /// The textual IP address of the peer (IPv4 or IPv6), or `""` if unknown.
    public var remoteAddress: String
    /// The id that answers and log lines of this request carry: the client's `X-Request-Id` when
    /// it is 1–128 characters of `A–Z a–z 0–9 . _ -`, else `req_` and 24 random hex digits. Made
    /// once, when the server reads the head, so every phase of one request shares it.
    public var requestID: String
    /// What the responder's `head` attached for the later calls about this request (`respond`,
    /// `busy`, the refusals of its body): what it matched and resolved once, so that no later
    /// phase does it again. Nil until `head` has run, and for requests `head` never saw.
    public var context: (any Sendable)?
    /// The server's private spool folder (``SpoolFolder``), where a handler may write a large
    /// response before it is sent (``ResponseSpool``); nil when the server is stopping, and for
    /// requests a test built by hand.
    public var spoolDirectory: String?

    /// Creates a request; the server builds these, tests may too. `requestID` nil makes one from
    /// the headers (see ``requestID``).
    public init(
        method: String, path: String, query: [(name: String, value: String)] = [],
        headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = [], remoteAddress: String = "", requestID: String? = nil
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.remoteAddress = remoteAddress
        self.requestID = requestID ?? Self.requestID(headers)
    }

    private static func requestID(_ headers: HTTPHeaders) -> String {
        if let given = headers["X-Request-Id"], (1...128).contains(given.utf8.count),
            given.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) || $0 == 46 || $0 == 95 || $0 == 45 })
        {
            return given
        }
        return "req_" + Digest.hex(SecureRandom.identifierBytes(12))
    }

    /// The first value of the query argument `name`, or `nil` if absent.
    public func queryValue(_ name: String) -> String? {
        query.first { $0.name == name }?.value
    }
}
