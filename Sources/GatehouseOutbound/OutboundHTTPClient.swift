import CCurl

/// A response from ``OutboundHTTPClient``, whatever its status.
public struct OutboundResponse: Sendable {
    /// The HTTP status code.
    public let status: Int
    /// Header fields of the final response in order, names lowercased, values trimmed.
    public let headers: [(name: String, value: String)]
    /// The body, at most the client's `maxResponseBytes`.
    public let body: [UInt8]

    /// Creates a response (the client builds these; tests may too).
    public init(status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first value of the header `name` (any case), or `nil`.
    public func header(_ name: String) -> String? {
        let lower = name.lowercased()
        return headers.first { $0.name == lower }?.value
    }
}

/// Blocking HTTP(S) calls to identity providers on libcurl.
///
/// Each call uses its own easy handle on the calling thread, so the client is thread-safe and
/// holds no connection state. Calls are bounded: connect within 3 s (or the total timeout when
/// shorter), finish within `timeoutSeconds`, at most `maxResponseBytes` of body and 64 KiB of
/// headers. Only `http` and `https` URLs are accepted; redirects are never followed (a 3xx is
/// returned as it is). Any HTTP status is returned: callers decide what a 4xx or 5xx means.
/// Transport failures, timeouts and oversized responses throw ``ProviderError/unavailable(_:)``.
/// A destination the client's ``addressPolicy`` refuses throws ``ProviderError/addressRefused(_:)``
/// before any byte is sent to it.
public final class OutboundHTTPClient: Sendable {
    /// The total time allowed for one call, in seconds.
    public let timeoutSeconds: Int
    /// The largest response body accepted; a larger one fails the call.
    public let maxResponseBytes: Int
    /// Which addresses calls may connect to, checked after DNS resolution.
    public let addressPolicy: OutboundAddressPolicy
    /// Told of every call once it ends: its URL, the response status (nil when there was no
    /// response: unreachable, timed out, refused, too large) and how long it took in seconds.
    public typealias Observer = @Sendable (_ url: String, _ status: Int?, _ seconds: Double) -> Void
    private let observer: Observer?

    /// A provider that does not complete a TCP (and TLS) handshake in 3 s is not going to
    /// answer: fail fast rather than hold a thread for the whole `timeoutSeconds`.
    static let connectTimeoutSeconds = 3
    static let maxHeaderBytes = 64 * 1024
    private static let globalInit: Void = { _ = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()

    /// Creates a client. `timeoutSeconds` is clamped to at least 1. The default `addressPolicy`
    /// suits the server's own URLs; a client for URLs a tenant admin sets takes
    /// ``OutboundAddressPolicy/forTenantURLs(allowPrivate:)``.
    public init(
        timeoutSeconds: Int = 10, maxResponseBytes: Int = 1 << 20, addressPolicy: OutboundAddressPolicy = .anyAddress, observer: Observer? = nil
    ) {
        self.observer = observer
        self.timeoutSeconds = max(1, timeoutSeconds)
        self.maxResponseBytes = max(0, maxResponseBytes)
        self.addressPolicy = addressPolicy
        _ = Self.globalInit
    }

    /// `GET url` with the given extra request headers.
    public func get(_ url: String, headers: [(String, String)] = []) throws(ProviderError) -> OutboundResponse {
        try perform(url: url, headers: headers, body: nil)
    }

    /// `POST url` with `fields` as an `application/x-www-form-urlencoded` body. Names and values
    /// are percent-encoded strictly (everything but `A–Z a–z 0–9 - . _ ~`), so `&`, `=` and `+`
    /// inside a value stay part of it.
    public func postForm(
        _ url: String, fields: [(String, String)], headers: [(String, String)] = []
    ) throws(ProviderError) -> OutboundResponse {
        let body = Array(PercentEncoding.form(fields).utf8)
        var all = headers.filter { $0.0.lowercased() != "content-type" }
        all.append(("Content-Type", "application/x-www-form-urlencoded"))
        return try perform(url: url, headers: all, body: body)
    }

    /// `POST url` with `body` sent as it is (its `Content-Type` among `headers`).
    public func post(_ url: String, body: [UInt8], headers: [(String, String)] = []) throws(ProviderError) -> OutboundResponse {
        try perform(url: url, headers: headers, body: body)
    }

    private func perform(url: String, headers: [(String, String)], body: [UInt8]?) throws(ProviderError) -> OutboundResponse {
        guard let observer else { return try performOnce(url: url, headers: headers, body: body) }
        let start = ContinuousClock.now
        func elapsed() -> Double {
            let duration = start.duration(to: .now)
            return Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        }
        do {
            let response = try performOnce(url: url, headers: headers, body: body)
            observer(url, response.status, elapsed())
            return response
        } catch {
            observer(url, nil, elapsed())
            throw error
        }
    }

    private func performOnce(url: String, headers: [(String, String)], body: [UInt8]?) throws(ProviderError) -> OutboundResponse {
        let lowered = url.lowercased()
        guard lowered.hasPrefix("https://") || lowered.hasPrefix("http://") else {
            throw .unavailable("only http and https URLs are allowed")
        }
        guard !url.utf8.contains(where: { $0 < 0x21 || $0 == 0x7F }) else {
            throw .unavailable("URL contains spaces or control characters")
        }
        guard let handle = curl_easy_init() else { throw .unavailable("curl_easy_init failed") }
        defer { curl_easy_cleanup(handle) }

        let collector = ResponseCollector(maxBodyBytes: maxResponseBytes, maxHeaderBytes: Self.maxHeaderBytes)
        let unmanaged = Unmanaged.passRetained(collector)
        defer { unmanaged.release() }

        var list: UnsafeMutablePointer<curl_slist>?
        for (name, value) in headers where Self.isSafeHeader(name: name, value: value) {
            list = curl_slist_append(list, "\(name): \(value)")
        }
        list = curl_slist_append(list, "Expect:")  // no 100-continue round trip
        defer { curl_slist_free_all(list) }

        let addressGuard = CurlAddressGuard(policy: addressPolicy)
        defer { withExtendedLifetime(addressGuard) {} }

        var setup = CURLE_OK
        func set(_ code: CURLcode) { if setup == CURLE_OK { setup = code } }
        set(addressGuard.install(on: handle))
        set(gh_curl_setopt_string(handle, CURLOPT_URL, url))
        // Threads and signals: libcurl must not use SIGALRM for DNS timeouts in a threaded server.
        set(gh_curl_setopt_long(handle, CURLOPT_NOSIGNAL, 1))
        set(gh_curl_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https"))
        set(gh_curl_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 0))
        set(gh_curl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT, min(Self.connectTimeoutSeconds, timeoutSeconds)))
        set(gh_curl_setopt_long(handle, CURLOPT_TIMEOUT, timeoutSeconds))
        set(gh_curl_setopt_off(handle, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(maxResponseBytes)))
        set(gh_curl_setopt_string(handle, CURLOPT_ACCEPT_ENCODING, ""))  // gzip etc.; the cap applies decoded
        set(gh_curl_setopt_string(handle, CURLOPT_USERAGENT, "Gatehouse"))
        set(gh_curl_setopt_ptr(handle, CURLOPT_HTTPHEADER, list))
        if let body {
            set(gh_curl_setopt_long(handle, CURLOPT_POST, 1))
            set(gh_curl_setopt_off(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count)))
            // COPYPOSTFIELDS copies the bytes, so the buffer need not outlive this statement.
            let bytes = body.isEmpty ? [0] : body
            bytes.withUnsafeBufferPointer { buffer in
                set(gh_curl_setopt_ptr(handle, CURLOPT_COPYPOSTFIELDS, buffer.baseAddress))
            }
        }
        set(gh_curl_setopt_ptr(handle, CURLOPT_WRITEDATA, unmanaged.toOpaque()))
        set(gh_curl_setopt_ptr(handle, CURLOPT_HEADERDATA, unmanaged.toOpaque()))
        set(gh_curl_set_write_function(handle, collectBody))
        set(gh_curl_set_header_function(handle, collectHeader))
        guard setup == CURLE_OK else { throw .unavailable("curl setup failed: \(Self.message(setup))") }

        let code = curl_easy_perform(handle)
        // A refused address fails the call only if no other address of the name answered.
        if code != CURLE_OK, let refused = addressGuard.refused {
            throw .addressRefused("\(Self.origin(url)) resolved to an address (\(refused)) which this request may not reach")
        }
        if collector.oversized || code == CURLE_FILESIZE_EXCEEDED {
            throw .unavailable("response from \(Self.origin(url)) exceeds \(maxResponseBytes) bytes")
        }
        guard code == CURLE_OK else {
            throw .unavailable("\(Self.origin(url)): \(Self.message(code))")
        }
        var status = 0
        gh_curl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        return OutboundResponse(status: status, headers: collector.headers, body: collector.body)
    }

    private static func isSafeHeader(name: String, value: String) -> Bool {
        !name.isEmpty && !name.utf8.contains { $0 <= 0x20 || $0 == UInt8(ascii: ":") || $0 == 0x7F }
            && !value.utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0 }
    }

    private static func message(_ code: CURLcode) -> String {
        String(cString: curl_easy_strerror(code))
    }

    /// Scheme, host and port only: paths and queries may carry codes or tokens, so they stay out of logs.
    public static func origin(_ url: String) -> String {
        guard let colon = url.firstIndex(of: ":") else { return "?" }
        let rest = url[colon...].drop { $0 == ":" || $0 == "/" }
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let host = authority.split(separator: "@", omittingEmptySubsequences: false).last ?? ""
        return "\(url[..<colon])://\(host)"
    }
}

/// Filled by libcurl's callbacks (``collectBody``, ``collectHeader``), which run on the thread
/// inside `curl_easy_perform` only. Shared with ``S3BlobStore``.
final class ResponseCollector {
    let maxBodyBytes: Int
    let maxHeaderBytes: Int
    var body: [UInt8] = []
    var headers: [(name: String, value: String)] = []
    var headerBytes = 0
    var oversized = false

    /// `reserve`: bytes of body to make room for at once (a ranged read knows its length).
    init(maxBodyBytes: Int, maxHeaderBytes: Int, reserve: Int = 0) {
        self.maxBodyBytes = maxBodyBytes
        self.maxHeaderBytes = maxHeaderBytes
        body.reserveCapacity(reserve)
    }
}

/// Returning fewer bytes than offered makes libcurl abort the transfer with `CURLE_WRITE_ERROR`.
let collectBody: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = {
    data, size, count, context in
    let collector = Unmanaged<ResponseCollector>.fromOpaque(context!).takeUnretainedValue()
    let n = size * count
    guard let data, n > 0 else { return n }
    guard collector.body.count + n <= collector.maxBodyBytes else {
        collector.oversized = true
        return 0
    }
    data.withMemoryRebound(to: UInt8.self, capacity: n) {
        collector.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: n))
    }
    return n
}

let collectHeader: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = {
    data, size, count, context in
    let collector = Unmanaged<ResponseCollector>.fromOpaque(context!).takeUnretainedValue()
    let n = size * count
    guard let data, n > 0 else { return n }
    collector.headerBytes += n
    guard collector.headerBytes <= collector.maxHeaderBytes else {
        collector.oversized = true
        return 0
    }
    let line = data.withMemoryRebound(to: UInt8.self, capacity: n) {
        String(decoding: UnsafeBufferPointer(start: $0, count: n), as: UTF8.self)
    }
    if line.hasPrefix("HTTP/") {
        collector.headers.removeAll()  // a new response: only the final one's headers count
        return n
    }
    guard let colon = line.firstIndex(of: ":") else { return n }
    let name = line[..<colon].lowercased()
    let value = line[line.index(after: colon)...].trimmingWhitespace()
    collector.headers.append((name, value))
    return n
}

extension Substring {
    fileprivate func trimmingWhitespace() -> String {
        let isSpace: (Character) -> Bool = { $0.isWhitespace }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[first...last])
    }
}
