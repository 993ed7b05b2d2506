import CCurl
import GatehouseCore
import Synchronization

/// Blobs as objects in an S3-compatible bucket (`GATEHOUSE_BLOB_STORE=s3`, ADR 0013): for
/// deployments that outgrow the database and the local folder. No SDK: libcurl signs every
/// request itself (`CURLOPT_AWS_SIGV4` = `aws:amz:<region>:s3`, the key pair as
/// `CURLOPT_USERPWD`). URLs are path-style, `<endpoint>/<bucket>/<key>`; a ``BlobKey`` is
/// `[a-z0-9_/]` only, so it needs no escaping.
///
/// - A put streams the source to one `PUT` (`CURLOPT_UPLOAD` with the size known up front, so no
///   chunked encoding); the body is sent as `UNSIGNED-PAYLOAD` in `x-amz-content-sha256`, which
///   every request carries (libcurl signs the headers and that value, not a
///   hash of a streamed body). S3 stores an object whole or not at all.
/// - An open sends `HEAD` (404 → nil) for the size and `ETag`; each read then sends a ranged
///   `GET` (`Range: bytes=a-b`, `If-Match: <etag>`) of at least 256 KiB (or what was asked, if
///   more), keeping what the caller did not take yet. So memory per open reader is bounded by
///   the largest read, and a blob replaced while being read fails the read (412) rather than
///   mixing two versions.
/// - Easy handles are kept (up to ``idleHandles``, reset between requests), so reads and deletes
///   reuse libcurl's open connections instead of connecting (and negotiating TLS) each time. A
///   put opens a fresh one: its streamed body could not be rewound for a retry on a stale one.
/// - A delete sends `DELETE`; S3 answers 204 for a missing object too.
///
/// The secret is only ever handed to libcurl: never in a URL, an error or a log line.
public final class S3BlobStore: BlobStore, Sendable {
    public let endpoint: String
    public let bucket: String
    public let region: String
    private let credentials: String
    /// Easy handles between requests (their connections stay open in them).
    private let idle = Mutex<[EasyHandle]>([])
    static let idleHandles = 16

    /// Time to connect; a transfer slower than 1 KiB/s for `stallSeconds` is abandoned.
    static let connectTimeoutSeconds = 10
    static let stallSeconds = 30
    /// The smallest ranged GET a read sends.
    static let readWindow = 256 * 1024
    static let emptyPayloadSHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    /// Error bodies (XML) are kept only this far, for the message.
    static let maxErrorBodyBytes = 16 * 1024
    private static let globalInit: Void = { _ = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()

    /// `endpoint` is `http(s)://host[:port]` (a trailing `/` is dropped).
    public init(endpoint: String, bucket: String, region: String, accessKeyID: String, secretAccessKey: String) {
        var trimmed = endpoint
        while trimmed.hasSuffix("/") { trimmed.removeLast() }
        self.endpoint = trimmed
        self.bucket = bucket
        self.region = region
        self.credentials = accessKeyID + ":" + secretAccessKey
        _ = Self.globalInit
    }

    deinit {
        for easy in idle.withLock({ $0 }) { curl_easy_cleanup(easy.handle) }
    }

    func url(of key: BlobKey) -> String { "\(endpoint)/\(bucket)/\(key.rawValue)" }

    /// Creates the bucket, with no location constraint (so: us-east-1, or a local test server);
    /// an existing bucket of ours is no error. For the tests: the server never creates its bucket.
    public func createBucket() throws {
        let response = try perform(method: "PUT", url: "\(endpoint)/\(bucket)", upload: EmptyReader())
        guard (200..<300).contains(response.status) || response.code == "BucketAlreadyOwnedByYou" else {
            throw failure("create bucket \(bucket)", response)
        }
    }

    /// What the bucket's `HEAD` says, at start: a configuration the store cannot work with is
    /// `refused` (no such bucket, credentials or region refused); a store that cannot be reached
    /// now is `unreachable` (it may be back before the first upload).
    public enum BucketCheck: Sendable, Equatable {
        case ok
        case refused(String)
        case unreachable(String)
    }

    public func checkBucket() -> BucketCheck {
        let response: S3Response
        do { response = try perform(method: "HEAD", url: "\(endpoint)/\(bucket)") } catch { return .unreachable("\(error)") }
        switch response.status {
        case 200..<300: return .ok
        case 404: return .refused("there is no bucket \(bucket) at \(endpoint)")
        case 301, 400, 403: return .refused("the bucket \(bucket) at \(endpoint) refuses these credentials or this region (\(region)): HTTP \(response.status)")
        default: return .unreachable("HEAD of the bucket \(bucket) answered HTTP \(response.status)")
        }
    }

    public func put(_ key: BlobKey, from source: any BlobReader) throws {
        let response = try perform(method: "PUT", url: url(of: key), upload: source)
        guard (200..<300).contains(response.status) else { throw failure("put \(key)", response) }
    }

    public func open(_ key: BlobKey, range: Range<Int64>?) throws -> (any BlobReader)? {
        let response = try perform(method: "HEAD", url: url(of: key))
        if response.status == 404 { return nil }
        guard response.status == 200 else { throw failure("open \(key)", response) }
        guard let length = response.header("content-length").flatMap({ Int64($0) }), length >= 0 else {
            throw BlobStoreError("S3 open \(key): no Content-Length in the answer")
        }
        let start = min(max(0, range?.lowerBound ?? 0), length)
        let end = max(start, min(length, range?.upperBound ?? length))
        return S3BlobReader(store: self, key: key, etag: response.header("etag"), start: start, end: end)
    }

    public func delete(_ key: BlobKey) throws {
        let response = try perform(method: "DELETE", url: url(of: key))
        guard (200..<300).contains(response.status) || response.status == 404 else { throw failure("delete \(key)", response) }
    }

    /// `bytes=first-last` of the object, exactly `last - first + 1` bytes or a throw.
    func get(_ key: BlobKey, etag: String?, first: Int64, last: Int64) throws -> [UInt8] {
        var headers = ["Range: bytes=\(first)-\(last)"]
        if let etag { headers.append("If-Match: \(etag)") }
        let expected = Int(last - first + 1)
        let response = try perform(method: "GET", url: url(of: key), headers: headers, bodyLimit: expected, reserve: expected)
        guard response.status == 206 || (response.status == 200 && first == 0) else {
            if response.status == 404 { throw BlobStoreError("S3 read \(key): deleted while read") }
            if response.status == 412 { throw BlobStoreError("S3 read \(key): replaced while read") }
            throw failure("read \(key)", response)
        }
        guard response.body.count == expected else {
            throw BlobStoreError("S3 read \(key): \(response.body.count) bytes for a range of \(expected)")
        }
        return response.body
    }

    private func failure(_ what: String, _ response: S3Response) -> BlobStoreError {
        BlobStoreError("S3 \(what) in bucket \(bucket): HTTP \(response.status)" + (response.code.map { " \($0)" } ?? ""))
    }

    // MARK: libcurl

    private func perform(
        method: String, url: String, headers: [String] = [], upload: (any BlobReader)? = nil, bodyLimit: Int = S3BlobStore.maxErrorBodyBytes,
        reserve: Int = 0
    ) throws -> S3Response {
        guard let easy = idle.withLock({ $0.popLast() }) ?? curl_easy_init().map(EasyHandle.init) else { throw BlobStoreError("curl_easy_init failed") }
        let handle = easy.handle
        var reusable = false
        defer {
            if reusable {
                curl_easy_reset(handle)  // options gone; the connection cache stays
                let kept = idle.withLock { handles in
                    guard handles.count < Self.idleHandles else { return false }
                    handles.append(easy)
                    return true
                }
                if !kept { curl_easy_cleanup(handle) }
            } else {
                curl_easy_cleanup(handle)
            }
        }
        let transfer = S3Transfer(source: upload, bodyLimit: bodyLimit, reserve: reserve)
        let unmanaged = Unmanaged.passRetained(transfer)
        defer { unmanaged.release() }

        var list: UnsafeMutablePointer<curl_slist>?
        for header in headers { list = curl_slist_append(list, header) }
        // No "Expect:" override: libcurl would sign the emptied header and the signature would
        // not match. A put over 1 MiB waits for 100-continue, so a refused put sends no body.
        // The payload's hash, which S3 requires as a header and libcurl (7.88) signs but does not
        // send: a streamed body is not hashed ahead, an empty one is the hash of nothing.
        list = curl_slist_append(list, "x-amz-content-sha256: " + (upload == nil ? Self.emptyPayloadSHA256 : "UNSIGNED-PAYLOAD"))
        defer { curl_slist_free_all(list) }

        var setup = CURLE_OK
        func set(_ code: CURLcode) { if setup == CURLE_OK { setup = code } }
        set(gh_curl_setopt_string(handle, CURLOPT_URL, url))
        set(gh_curl_setopt_long(handle, CURLOPT_NOSIGNAL, 1))
        set(gh_curl_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https"))
        set(gh_curl_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 0))
        set(gh_curl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT, Self.connectTimeoutSeconds))
        set(gh_curl_setopt_long(handle, CURLOPT_LOW_SPEED_LIMIT, 1024))
        set(gh_curl_setopt_long(handle, CURLOPT_LOW_SPEED_TIME, Self.stallSeconds))
        set(gh_curl_setopt_string(handle, CURLOPT_USERAGENT, "Gatehouse"))
        set(gh_curl_setopt_string(handle, CURLOPT_AWS_SIGV4, "aws:amz:\(region):s3"))
        set(gh_curl_setopt_string(handle, CURLOPT_USERPWD, credentials))
        set(gh_curl_setopt_ptr(handle, CURLOPT_HTTPHEADER, list))
        switch method {
        case "HEAD": set(gh_curl_setopt_long(handle, CURLOPT_NOBODY, 1))
        case "PUT":
            // A fresh connection: on a kept one that the server closed meanwhile, libcurl would
            // have to rewind the body to send it again, and a streamed source cannot rewind.
            set(gh_curl_setopt_long(handle, CURLOPT_FRESH_CONNECT, 1))
            set(gh_curl_setopt_long(handle, CURLOPT_UPLOAD, 1))
            set(gh_curl_setopt_off(handle, CURLOPT_INFILESIZE_LARGE, curl_off_t(upload?.size ?? 0)))
            set(gh_curl_setopt_ptr(handle, CURLOPT_READDATA, unmanaged.toOpaque()))
            set(gh_curl_set_read_function(handle, s3ReadBody))
        case "GET": break
        default: set(gh_curl_setopt_string(handle, CURLOPT_CUSTOMREQUEST, method))
        }
        // The collector lives as long as `transfer`, which `unmanaged` holds.
        let collector = Unmanaged.passUnretained(transfer.response).toOpaque()
        set(gh_curl_setopt_ptr(handle, CURLOPT_WRITEDATA, collector))
        set(gh_curl_setopt_ptr(handle, CURLOPT_HEADERDATA, collector))
        set(gh_curl_set_write_function(handle, collectBody))
        set(gh_curl_set_header_function(handle, collectHeader))
        guard setup == CURLE_OK else { throw BlobStoreError("S3: curl setup failed: \(String(cString: curl_easy_strerror(setup)))") }

        let code = curl_easy_perform(handle)
        reusable = code == CURLE_OK
        if let error = transfer.sourceError { throw error }
        var status = 0
        gh_curl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        if transfer.response.oversized && (200..<300).contains(status) {
            throw BlobStoreError("S3 \(method) \(endpoint): the answer is longer than asked for")
        }
        guard code == CURLE_OK || (code == CURLE_WRITE_ERROR && transfer.response.oversized) else {
            throw BlobStoreError("S3 \(method) \(endpoint): \(String(cString: curl_easy_strerror(code)))")
        }
        return S3Response(status: status, headers: transfer.response.headers, body: transfer.response.body)
    }
}

/// A libcurl easy handle between requests. `@unchecked Sendable`: it is only ever used by the
/// one request that took it from the idle list.
private struct EasyHandle: @unchecked Sendable {
    let handle: UnsafeMutableRawPointer
}

/// A blob being read from S3, a ranged GET at a time.
final class S3BlobReader: BlobReader {
    let size: Int64
    private let store: S3BlobStore
    private let key: BlobKey
    private let etag: String?
    private var position: Int64
    private let end: Int64
    private var buffered: [UInt8] = []
    private var closed = false

    init(store: S3BlobStore, key: BlobKey, etag: String?, start: Int64, end: Int64) {
        self.store = store
        self.key = key
        self.etag = etag
        self.position = start
        self.end = end
        self.size = end - start
    }

    func read(upTo maxBytes: Int) throws -> [UInt8] {
        guard !closed else { throw BlobStoreError("read after close") }
        guard maxBytes > 0 else { return [] }
        if buffered.isEmpty {
            let remaining = end - position
            guard remaining > 0 else { return [] }
            let window = min(remaining, Int64(max(maxBytes, S3BlobStore.readWindow)))
            buffered = try store.get(key, etag: etag, first: position, last: position + window - 1)
            position += window
        }
        if buffered.count <= maxBytes {
            defer { buffered = [] }
            return buffered
        }
        let piece = Array(buffered[..<maxBytes])
        buffered.removeFirst(maxBytes)
        return piece
    }

    func close() {
        closed = true
        buffered = []
    }
}

struct S3Response {
    let status: Int
    let headers: [(name: String, value: String)]
    let body: [UInt8]

    func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }

    /// The `<Code>` of an S3 error answer, if it has one (it never holds a secret).
    var code: String? {
        let text = String(decoding: body, as: UTF8.self)
        guard let open = text.range(of: "<Code>"), let close = text.range(of: "</Code>", range: open.upperBound..<text.endIndex) else { return nil }
        let code = text[open.upperBound..<close.lowerBound]
        guard code.count <= 64, code.allSatisfy({ $0.isLetter || $0.isNumber }) else { return nil }
        return String(code)
    }
}

private final class EmptyReader: BlobReader {
    var size: Int64 { 0 }
    func read(upTo maxBytes: Int) throws -> [UInt8] { [] }
    func close() {}
}

/// Filled and drained by libcurl's callbacks, on the thread inside `curl_easy_perform` only.
private final class S3Transfer {
    let source: (any BlobReader)?
    var sent: Int64 = 0
    var sourceError: (any Error)?
    /// The answer, collected by OutboundHTTPClient's callbacks.
    let response: ResponseCollector

    init(source: (any BlobReader)?, bodyLimit: Int, reserve: Int) {
        self.source = source
        response = ResponseCollector(maxBodyBytes: bodyLimit, maxHeaderBytes: 64 * 1024, reserve: reserve)
    }
}

private let s3ReadBody: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = {
    buffer, size, count, context in
    let transfer = Unmanaged<S3Transfer>.fromOpaque(context!).takeUnretainedValue()
    guard let source = transfer.source, let buffer else { return 0 }
    // Never more than the size announced in the request.
    let wanted = Int(min(Int64(size * count), source.size - transfer.sent))
    guard wanted > 0 else { return 0 }
    do {
        let piece = try source.read(upTo: wanted)
        guard !piece.isEmpty else {
            transfer.sourceError = BlobStoreError("the source ended after \(transfer.sent) of \(source.size) bytes")
            return Int(CURL_READFUNC_ABORT)
        }
        piece.withUnsafeBytes { UnsafeMutableRawPointer(buffer).copyMemory(from: $0.baseAddress!, byteCount: piece.count) }
        transfer.sent += Int64(piece.count)
        return piece.count
    } catch {
        transfer.sourceError = error
        return Int(CURL_READFUNC_ABORT)
    }
}
