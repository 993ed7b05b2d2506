import Synchronization

/// Per-request state, carried in libmicrohttpd's `*con_cls` from the request line to the
/// completion callback. Needs no lock: libmicrohttpd calls back for one connection on one worker
/// thread at a time, and while an offloaded request's connection is suspended only the offload
/// thread touches it, through `offloadedResponse`.
final class RequestState {
    enum Phase {
        /// Request line seen; the access handler has not run yet.
        case created
        /// `head` said to read the body (or has not been asked yet).
        case readingBody
        /// The connection is suspended while an offload thread answers; the access handler
        /// runs again once it is resumed, with the answer in `offloadedResponse`.
        case offloaded
        /// A response is queued.
        case answered
    }

    /// The request target as sent (path and query, not decoded).
    let target: String
    /// Its length in bytes.
    let targetLength: Int
    var phase = Phase.created
    /// Whether this request is counted in `ServerContext.inFlight`.
    var counted = false
    /// Replaced by the real request once the head is read; a placeholder draws no random id.
    var request = HTTPRequest(method: "", path: "", requestID: "")
    var limit = 0
    var offload = false
    var waitsOnNetwork = false
    /// The answer of an offloaded request, set by the offload thread before it resumes the connection.
    let offloadedResponse = Mutex<HTTPResponse?>(nil)
    var body: [UInt8] = []
    var bodyTooLarge = false
    /// Body bytes thrown away after the limit was passed.
    var discardedBytes = 0
    /// The multipart body being read, for `HeadDecision.readMultipart`.
    var multipart: MultipartReader?
    /// The spool file of a `HeadDecision.spoolBody` body, and its limit in `limit`.
    var spool: SpoolWriter?
    /// Why a `spoolBody` body is refused (set while reading; answered after its last byte).
    var spoolFailure: MultipartReader.Failure?
    /// What `head` answered a request that declares no body, queued at the final call of the
    /// access handler: queued at once, libmicrohttpd 0.9.75 closes the connection after it.
    var decided: HTTPResponse?
    /// The connection's record while its body is timed (`ConnectionRecord.bodyStarted`).
    var timedBody: ConnectionRecord?

    init(target: String, targetLength: Int) {
        self.target = target
        self.targetLength = targetLength
    }

    /// The request is over (answered and sent, aborted, or timed out): its spool files go.
    func end() {
        multipart?.discard()
        multipart = nil
        spool?.remove()
        spool = nil
    }

    /// The target up to the query, not percent-decoded.
    var path: String {
        guard let question = target.firstIndex(of: "?") else { return target }
        return String(target[..<question])
    }
}
