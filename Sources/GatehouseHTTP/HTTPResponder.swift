/// What `HTTPResponder.head` decides once the request headers are in.
public enum HeadDecision: Sendable {
    /// Read the body, up to `limit` bytes; more is answered with `bodyTooLarge`. With `offload`,
    /// `respond` runs on the server's offload threads instead of the worker (for handlers that
    /// wait long, such as password hashing: see `HTTPServer.Configuration.offloadThreads`). With
    /// `waitsOnNetwork`, it runs on the network offload threads instead (handlers that wait for
    /// another server: see `HTTPServer.Configuration.networkOffloadThreads`), so a slow remote
    /// server holds neither a worker nor the threads that hash.
    case readBody(limit: Int, offload: Bool = false, waitsOnNetwork: Bool = false)
    /// Read a `multipart/form-data` body with libmicrohttpd's post processor, streaming the
    /// parts of `form.fileFields` to spool files (never buffering them), and hand the result to
    /// `respond` in `HTTPRequest.upload`. Another `Content-Type` is answered with
    /// `unsupportedMediaType` before reading; a body or file over the form's limits with
    /// `uploadTooLarge` (before reading when `Content-Length` says so); a broken body with
    /// `malformedBody`. `offload` and `waitsOnNetwork` as for `readBody`.
    case readMultipart(MultipartForm, offload: Bool = false, waitsOnNetwork: Bool = false)
    /// Write the raw body to a spool file in the server's spool folder while it arrives (never
    /// holding it in memory: a bulk body such as an NDJSON import) and hand it to `respond` in
    /// `HTTPRequest.spooledBody`; the file is removed once the response has been sent, as an
    /// upload's (see `SpooledFile`). More than `limit` bytes is answered with `uploadTooLarge`
    /// (before reading when `Content-Length` says so; else the partial file is removed at once and
    /// the rest discarded as for `bodyTooLarge`); a spool file that cannot be written with
    /// `uploadFailed`. The body is timed like an upload. The `Content-Type` is the responder's to
    /// check in `head`. `offload` and `waitsOnNetwork` as for `readBody`.
    case spoolBody(limit: Int, offload: Bool = false, waitsOnNetwork: Bool = false)
    /// Answer without reading the body. When the request declares one, the connection is then
    /// closed; a request without one keeps it (ADR 0001).
    case respond(HTTPResponse)
}

/// What the server calls.
///
/// All methods are called on libmicrohttpd worker threads (`respond` of an offloaded request on
/// an offload thread); implementations are synchronous and thread-safe. A worker blocked in a
/// method also delays the other connections that worker serves: offload what waits long.
///
/// Size limits: the server checks `HTTPServer.Configuration.maxURLBytes` and `maxHeaderBytes`
/// before `head` and calls `uriTooLong` / `headerTooLarge` instead. Requests whose request line
/// and headers do not fit in `connectionMemoryLimit` at all are answered by libmicrohttpd
/// itself (414 or 431 with its own HTML body) or the connection is closed; none of these
/// methods is called for them.
public protocol HTTPResponder: Sendable {
    /// Headers are in, no body byte has been read. Decide the body limit, or answer right away
    /// (the body is then not read). What `head` stores in `request.context` reaches every later
    /// call about the request (`respond`, `busy`, `bodyTooLarge`, `uploadTooLarge`, …).
    func head(_ request: inout HTTPRequest) -> HeadDecision
    /// The whole body is in (for `readMultipart`, parsed into `request.upload`; for `spoolBody`,
    /// in `request.spooledBody`; their spool files are removed once the response has been sent:
    /// see `SpooledFile`).
    func respond(to request: HTTPRequest) -> HTTPResponse
    /// The body exceeded the limit from `head`: a declared `Content-Length` over it (checked
    /// before reading any body byte), or a chunked body that grew past it while reading
    /// (buffering stops at once; this is then called after the last chunk, see
    /// `HTTPServer.Configuration.maxDiscardedBodyBytes`). `request.body` is empty.
    func bodyTooLarge(_ request: HTTPRequest) -> HTTPResponse
    /// The header fields (sum of name and value lengths in bytes) exceed
    /// `Configuration.maxHeaderBytes`. Answer with 431. `head` is not called.
    /// The default answers 431 with an empty body.
    func headerTooLarge(_ request: HTTPRequest) -> HTTPResponse
    /// The request target (path and query) is longer than `Configuration.maxURLBytes`.
    /// Answer with 414. `head` is not called. The default answers 414 with an empty body.
    func uriTooLong(_ request: HTTPRequest) -> HTTPResponse
    /// The request framing is ambiguous in a way libmicrohttpd 0.9.75 tolerates but a proxy
    /// might read differently (request smuggling): several `Content-Length` values that
    /// differ, or `Content-Length` together with `Transfer-Encoding`. Answer with 400; the
    /// body is not read and the connection is closed. `reason` is a short English sentence.
    /// The default answers 400 with an empty body.
    func badRequest(_ request: HTTPRequest, reason: String) -> HTTPResponse
    /// A `readMultipart` body, or a file part in it, exceeds its `MultipartForm` limit `limit`
    /// (bytes), or a `spoolBody` body its `limit`: declared by `Content-Length`, or found while
    /// reading (the partial spool file is removed at once, the rest of the body discarded as for
    /// `bodyTooLarge`). Answer with 413.
    /// The default calls `bodyTooLarge`.
    func uploadTooLarge(_ request: HTTPRequest, limit: Int) -> HTTPResponse
    /// A `readMultipart` route received another `Content-Type` than `multipart/form-data`.
    /// Answer with 415; the body is not read. The default answers 415 with an empty body.
    func unsupportedMediaType(_ request: HTTPRequest, expected: String) -> HTTPResponse
    /// A `readMultipart` body is not well-formed multipart (no boundary, no closing boundary, a
    /// part header too long) or holds what the form refuses (a second part for a file field,
    /// too many or too long text fields). Answer with 400; `reason` is a short English
    /// sentence. The default answers 400 with an empty body.
    func malformedBody(_ request: HTTPRequest, reason: String) -> HTTPResponse
    /// A spool file could not be created or written (disk full, spool directory missing).
    /// The default answers 503 with an empty body.
    func uploadFailed(_ request: HTTPRequest, reason: String) -> HTTPResponse
    /// A request to be offloaded finds the offload queue full, or the server stopping.
    /// Answer with 503. The default answers 503 with an empty body.
    func busy(_ request: HTTPRequest) -> HTTPResponse
    /// The body did not arrive in time (`HTTPServer.Configuration.jsonBodyTimeoutSeconds`,
    /// `uploadMinimumBytesPerSecond`). Answer with 408; called on the server's sweep thread, not
    /// a worker. The answer is written straight to the socket, `Connection: close`, and the
    /// connection shut down; a streamed body is not sent. The default answers 408 with an empty body.
    func requestTimeout(_ request: HTTPRequest) -> HTTPResponse
}

extension HTTPResponder {
    public func headerTooLarge(_ request: HTTPRequest) -> HTTPResponse {
        HTTPResponse(status: 431)
    }

    public func uriTooLong(_ request: HTTPRequest) -> HTTPResponse {
        HTTPResponse(status: 414)
    }

    public func badRequest(_ request: HTTPRequest, reason: String) -> HTTPResponse {
        HTTPResponse(status: 400)
    }

    public func busy(_ request: HTTPRequest) -> HTTPResponse {
        HTTPResponse(status: 503)
    }

    public func requestTimeout(_ request: HTTPRequest) -> HTTPResponse {
        HTTPResponse(status: 408)
    }

    public func uploadTooLarge(_ request: HTTPRequest, limit: Int) -> HTTPResponse {
        bodyTooLarge(request)
    }

    public func unsupportedMediaType(_ request: HTTPRequest, expected: String) -> HTTPResponse {
        HTTPResponse(status: 415)
    }

    public func malformedBody(_ request: HTTPRequest, reason: String) -> HTTPResponse {
        HTTPResponse(status: 400)
    }

    public func uploadFailed(_ request: HTTPRequest, reason: String) -> HTTPResponse {
        HTTPResponse(status: 503)
    }
}
