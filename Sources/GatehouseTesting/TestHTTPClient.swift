import CCurl
import Foundation
import GatehouseCore

/// A response as a test sees it.
public struct TestResponse: Sendable {
    public let status: Int
    /// Header names lowercased, in order.
    public let headers: [(name: String, value: String)]
    public let body: [UInt8]

    public func header(_ name: String) -> String? {
        let lower = name.lowercased()
        return headers.first { $0.name == lower }?.value
    }

    public func headerValues(_ name: String) -> [String] {
        let lower = name.lowercased()
        return headers.filter { $0.name == lower }.map(\.value)
    }

    /// The body parsed as JSON (nil when it is not JSON).
    public var json: JSON? { try? JSON.parse(body) }
    public var text: String { String(decoding: body, as: UTF8.self) }
    /// `code` of a problem+json body.
    public var problemCode: String? { json?["code"]?.stringValue }
    /// `data` of a success body.
    public var data: JSON? { json?["data"] }
}

/// A blocking HTTP/1.1 client on libcurl, for tests and the benchmark driver. One handle per
/// call keeps it simple and thread-safe.
public enum TestHTTPClient {
    private static let globalInit: Void = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    public static func send(
        _ method: String, _ url: String, headers: [(String, String)] = [], body: [UInt8]? = nil, timeoutSeconds: Int = 30
    ) throws -> TestResponse {
        _ = globalInit
        guard let handle = curl_easy_init() else { throw Failure(description: "curl_easy_init failed") }
        defer { curl_easy_cleanup(handle) }
        let collector = Collector()
        let unmanaged = Unmanaged.passRetained(collector)
        defer { unmanaged.release() }

        var list: UnsafeMutablePointer<curl_slist>?
        for (name, value) in headers { list = curl_slist_append(list, "\(name): \(value)") }
        if body != nil && !headers.contains(where: { $0.0.lowercased() == "content-type" }) {
            list = curl_slist_append(list, "Content-Type:")  // no default form type
        }
        list = curl_slist_append(list, "Expect:")
        defer { curl_slist_free_all(list) }

        gh_curl_setopt_string(handle, CURLOPT_URL, url)
        gh_curl_setopt_long(handle, CURLOPT_NOSIGNAL, 1)
        gh_curl_setopt_long(handle, CURLOPT_TIMEOUT, timeoutSeconds)
        gh_curl_setopt_string(handle, CURLOPT_CUSTOMREQUEST, method)
        if method == "HEAD" { gh_curl_setopt_long(handle, CURLOPT_NOBODY, 1) }
        gh_curl_setopt_ptr(handle, CURLOPT_HTTPHEADER, list)
        if let body {
            gh_curl_setopt_off(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count))
            // Above 1 MiB curl announces the body (`Expect: 100-continue`) and, by default, sends it
            // anyway after 1 s without an answer. A server that refuses it at once (413 on its
            // Content-Length) then closes the connection under a body still being sent, and on a
            // busy machine curl reports that send error instead of the 413: wait for the answer.
            gh_curl_setopt_long(handle, CURLOPT_EXPECT_100_TIMEOUT_MS, 15_000)
            // COPYPOSTFIELDS copies the bytes, so the buffer need not outlive the call.
            let bytes = body.isEmpty ? [0] : body
            bytes.withUnsafeBufferPointer { buffer in
                _ = gh_curl_setopt_ptr(handle, CURLOPT_COPYPOSTFIELDS, buffer.baseAddress)
            }
        }
        gh_curl_setopt_ptr(handle, CURLOPT_WRITEDATA, unmanaged.toOpaque())
        gh_curl_setopt_ptr(handle, CURLOPT_HEADERDATA, unmanaged.toOpaque())
        gh_curl_set_write_function(handle, writeBody)
        gh_curl_set_header_function(handle, writeHeader)

        let code = curl_easy_perform(handle)
        guard code == CURLE_OK else { throw Failure(description: "\(method) \(url): \(String(cString: curl_easy_strerror(code)))") }
        var status = 0
        gh_curl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        return TestResponse(status: status, headers: collector.headers, body: collector.body)
    }
}

/// Filled by libcurl's callbacks on the calling thread only.
private final class Collector {
    var body: [UInt8] = []
    var headers: [(name: String, value: String)] = []
}

private let writeBody: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { data, size, count, context in
    let collector = Unmanaged<Collector>.fromOpaque(context!).takeUnretainedValue()
    let n = size * count
    if let data, n > 0 { data.withMemoryRebound(to: UInt8.self, capacity: n) { collector.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: n)) } }
    return n
}

private let writeHeader: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { data, size, count, context in
    let collector = Unmanaged<Collector>.fromOpaque(context!).takeUnretainedValue()
    let n = size * count
    guard let data, n > 0 else { return n }
    let line = data.withMemoryRebound(to: UInt8.self, capacity: n) { String(decoding: UnsafeBufferPointer(start: $0, count: n), as: UTF8.self) }
    if line.hasPrefix("HTTP/") { collector.headers.removeAll() }  // a new response (after 100 Continue)
    if let colon = line.firstIndex(of: ":") {
        let name = line[..<colon].lowercased()
        let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespacesAndNewlines)
        collector.headers.append((name, value))
    }
    return n
}
