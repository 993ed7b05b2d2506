import Foundation
import GatehouseCore
import GatehouseCrypto
import GatehouseHTTP

/// Connects the HTTP server to the route table: request ids, CORS, limits, error mapping,
/// metrics and the access log all happen here, so handlers only decode, call and encode.
final class APIResponder: HTTPResponder {
    static let jsonBodyLimit = 64 * 1024

    private let router: Router<Route>
    /// The apps, for the upload limit of the calling app.
    private let directory: AppDirectory
    private let cors: CORSPolicy
    private let metrics: any RequestMetrics
    private let log: any LogSink
    /// Writes an access-log line (`GATEHOUSE_ACCESS_LOG`); nil when off.
    private let accessLog: (@Sendable ([String: JSON]) -> Void)?
    private let trustedProxies: [IPRange]

    init(
        router: Router<Route>, directory: AppDirectory, cors: CORSPolicy, metrics: any RequestMetrics, log: any LogSink,
        accessLog: (@Sendable ([String: JSON]) -> Void)?, trustedProxies: [IPRange]
    ) {
        self.trustedProxies = trustedProxies
        self.router = router
        self.directory = directory
        self.cors = cors
        self.metrics = metrics
        self.log = log
        self.accessLog = accessLog
    }

    /// Matches the route (the only match of the request: the later calls read it from the
    /// request's context) and decides how to read the body.
    func head(_ request: inout HTTPRequest) -> HeadDecision {
        within(request) { decideHead(&request) }
    }

    private func decideHead(_ request: inout HTTPRequest) -> HeadDecision {
        switch router.match(method: request.method, path: request.path) {
        case .notFound:
            return .respond(finish(request, route: "unmatched", start: .now, problem(.notFound, "No such route.", request)))
        case .methodNotAllowed(let allowed):
            if cors.isPreflight(request) {
                return .respond(finish(request, route: "preflight", start: .now, cors.preflight(request, allowedMethods: allowed)))
            }
            var response = problem(.methodNotAllowed, "Use \(allowed.joined(separator: ", ")).", request)
            response.headers.set("Allow", allowed.joined(separator: ", "))
            return .respond(finish(request, route: "unmatched", start: .now, response))
        case .matched(let route, let parameters, let pattern):
            let context = RequestContext(route: route, parameters: parameters, pattern: pattern, directory: directory)
            request.context = context
            if let field = Self.fieldWithNUL(request) {
                let error = GatehouseError.validation(field, "Must not contain U+0000.")
                return .respond(finish(request, route: pattern, start: .now, Problem.response(error, instance: request.path, requestID: requestID(request))))
            }
            if let check = route.beforeBody {
                let requestID = requestID(request)
                do {
                    try check(Request(http: request, parameters: parameters, requestID: requestID, clientIP: clientIP(request), context: context))
                } catch {
                    return .respond(finish(request, route: pattern, start: .now, Problem.response(for: error, instance: request.path, requestID: requestID, log: log)))
                }
            }
            if case .json = route.body, hasBody(request), !isJSON(request.headers["Content-Type"]) {
                return .respond(
                    finish(request, route: pattern, start: .now, problem(.unsupportedMediaType, "Send the body as application/json.", request)))
            }
            if case .form = route.body, mediaType(request.headers["Content-Type"]) != "application/x-www-form-urlencoded" {
                return .respond(
                    finish(request, route: pattern, start: .now, problem(.unsupportedMediaType, "Send the body as application/x-www-form-urlencoded.", request)))
            }
            if case .multipart(let fileFields) = route.body {
                // Content types other than multipart/form-data are refused by the server (415).
                let form = MultipartForm(fileFields: fileFields, maxFileBytes: uploadLimit(request))
                return .readMultipart(form, offload: route.hashesPassword, waitsOnNetwork: route.callsProvider || route.doesFileIO)
            }
            if case .ndjson(let maxBytes) = route.body {
                guard mediaType(request.headers["Content-Type"]) == "application/x-ndjson" else {
                    return .respond(finish(request, route: pattern, start: .now, problem(.unsupportedMediaType, "Send the body as application/x-ndjson.", request)))
                }
                return .spoolBody(limit: maxBytes, offload: route.hashesPassword, waitsOnNetwork: true)
            }
            return .readBody(limit: Self.jsonBodyLimit, offload: route.hashesPassword, waitsOnNetwork: route.callsProvider || route.doesFileIO)
        }
    }

    func respond(to request: HTTPRequest) -> HTTPResponse {
        within(request) { answer(request) }
    }

    private func answer(_ request: HTTPRequest) -> HTTPResponse {
        let start = ContinuousClock.now
        guard let context = RequestContext.of(request) else {
            // `head` answered every request it matched no route for.
            return finish(request, route: "unmatched", start: start, problem(.notFound, nil, request))
        }
        let requestID = requestID(request)
        let ip = clientIP(request)
        var response: HTTPResponse
        do {
            response = try context.route.handler(Request(http: request, parameters: context.parameters, requestID: requestID, clientIP: ip, context: context))
        } catch {
            response = Problem.response(for: error, instance: request.path, requestID: requestID, log: log)
        }
        return finish(request, route: context.pattern, start: start, response, requestID: requestID, clientIP: ip)
    }

    func bodyTooLarge(_ request: HTTPRequest) -> HTTPResponse {
        within(request) {
            finish(request, route: "unmatched", start: .now, problem(.payloadTooLarge, "The body is larger than \(Self.jsonBodyLimit / 1024) KiB.", request))
        }
    }

    func uploadTooLarge(_ request: HTTPRequest, limit: Int) -> HTTPResponse {
        within(request) {
            if case .ndjson(let maxBytes)? = RequestContext.of(request)?.route.body {
                return finish(request, route: pattern(request), start: .now, problem(.payloadTooLarge, "The body may be at most \(Self.describe(bytes: maxBytes)).", request))
            }
            return finish(request, route: pattern(request), start: .now, problem(.payloadTooLarge, "Files may be at most \(Self.describe(bytes: uploadLimit(request))).", request))
        }
    }

    func unsupportedMediaType(_ request: HTTPRequest, expected: String) -> HTTPResponse {
        within(request) {
            finish(request, route: pattern(request), start: .now, problem(.unsupportedMediaType, "Send the body as \(expected).", request))
        }
    }

    func malformedBody(_ request: HTTPRequest, reason: String) -> HTTPResponse {
        within(request) {
            finish(request, route: pattern(request), start: .now, problem(.malformedRequest, reason, request))
        }
    }

    func uploadFailed(_ request: HTTPRequest, reason: String) -> HTTPResponse {
        within(request) {
            log.error("upload spool failed", ["reason": .string(reason), "path": .string(String(request.path.prefix(256)))])
            return finish(request, route: pattern(request), start: .now, problem(.unavailable, "The upload could not be stored; retry later.", request))
        }
    }

    func headerTooLarge(_ request: HTTPRequest) -> HTTPResponse {
        within(request) {
            finish(request, route: "unmatched", start: .now, problem(.headersTooLarge, "The request headers are too large.", request))
        }
    }

    func badRequest(_ request: HTTPRequest, reason: String) -> HTTPResponse {
        within(request) {
            finish(request, route: "unmatched", start: .now, problem(.malformedRequest, reason, request))
        }
    }

    func busy(_ request: HTTPRequest) -> HTTPResponse {
        within(request) {
            let error = GatehouseError(.busy, "Too many sign-ins are waiting; retry shortly.", retryAfter: 1)
            return finish(request, route: pattern(request), start: .now, Problem.response(error, instance: request.path, requestID: requestID(request)))
        }
    }

    func requestTimeout(_ request: HTTPRequest) -> HTTPResponse {
        within(request) {
            var response = finish(
                request, route: pattern(request), start: .now,
                problem(.requestTimeout, "The request body did not arrive in time; send it again, faster.", request))
            response.headers.add("Connection", "close")
            return response
        }
    }

    func uriTooLong(_ request: HTTPRequest) -> HTTPResponse {
        within(request) {
            var short = request
            short.path = String(request.path.prefix(256))
            return finish(short, route: "unmatched", start: .now, problem(.uriTooLong, "The URL is too long.", short))
        }
    }

    // MARK: -

    /// The calling app's `files.max_bytes`; when `X-App-Key` names no app, the highest any app
    /// may set, and the handler answers (401 for the key) once the body is in.
    private func uploadLimit(_ request: HTTPRequest) -> Int {
        guard let key = request.headers["X-App-Key"], !key.isEmpty, key.utf8.count <= 128,
            let app = try? RequestContext.app(key: key, of: request, directory: directory)
        else {
            return Int(AppSettings.Files.maxBytesCeiling)
        }
        return Int(clamping: app.settings.files.maxBytes)
    }

    /// The route pattern `head` matched, for metrics and the log, or `unmatched`.
    private func pattern(_ request: HTTPRequest) -> String {
        RequestContext.of(request)?.pattern ?? "unmatched"
    }

    /// `5 MiB`, `2 KiB`, or `1500 bytes`.
    static func describe(bytes: Int) -> String {
        if bytes >= 1024 * 1024, bytes % (1024 * 1024) == 0 { return "\(bytes / (1024 * 1024)) MiB" }
        if bytes >= 1024, bytes % 1024 == 0 { return "\(bytes / 1024) KiB" }
        return "\(bytes) bytes"
    }

    private func problem(_ code: ErrorCode, _ detail: String?, _ request: HTTPRequest) -> HTTPResponse {
        Problem.response(GatehouseError(code, detail), instance: request.path, requestID: requestID(request))
    }

    /// Runs `body` with a log context for `request` bound, so that every line it causes carries
    /// the request id (and the app, once resolved).
    private func within<T>(_ request: HTTPRequest, _ body: () -> T) -> T {
        RequestLogContext.$current.withValue(RequestLogContext(requestID: request.requestID), operation: body)
    }

    /// The request id of the request being answered (bound by `within`).
    private func requestID(_ request: HTTPRequest) -> String {
        RequestLogContext.current?.requestID ?? request.requestID
    }

    /// Adds the headers every response carries, then counts and logs it.
    private func finish(
        _ request: HTTPRequest, route: String, start: ContinuousClock.Instant, _ response: HTTPResponse, requestID: String? = nil, clientIP ip: String? = nil
    ) -> HTTPResponse {
        var response = response
        let id = requestID ?? response.headers["X-Request-Id"] ?? self.requestID(request)
        response.headers.set("X-Request-Id", id)
        if !cors.isPreflight(request) { cors.decorate(&response, for: request) }
        let elapsed = start.duration(to: .now)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        metrics.record(method: request.method, route: route, status: response.status, seconds: seconds)
        if response.status == 429 { metrics.recordRateLimited(route: route, code: RequestLogContext.current?.errorCode ?? "none") }
        if let accessLog {
            var fields: [String: JSON] = [
                "request_id": .string(id), "method": .string(String(request.method.prefix(16))), "route": .string(route),
                "path": .string(String(request.path.prefix(256))), "status": .int(Int64(response.status)),
                "duration_ms": .double((seconds * 1_000_000).rounded() / 1000), "ip": .string(ip ?? clientIP(request)),
                "bytes": .int(request.method == "HEAD" ? 0 : response.stream?.size ?? Int64(response.body.count)),
            ]
            if let agent = request.headers["User-Agent"] { fields["user_agent"] = .string(String(agent.prefix(256))) }
            if let code = RequestLogContext.current?.errorCode { fields["code"] = .string(code) }
            accessLog(fields)
        }
        return response
    }

    private func clientIP(_ request: HTTPRequest) -> String {
        // Every X-Forwarded-For line, in order: some proxies add a line instead of appending to the client's.
        let forwarded = request.headers.values("X-Forwarded-For")
        return ClientAddress.resolve(
            peer: request.remoteAddress, forwardedFor: forwarded.isEmpty ? nil : forwarded.joined(separator: ","), trustedProxies: trustedProxies)
    }

    /// The first part of the request that holds U+0000 once decoded: a path segment (`%00`), a
    /// query parameter or a header. No identifier, key or name holds one, PostgreSQL text cannot
    /// store it, and C code downstream would cut the value short at it; so it is refused here,
    /// before any lookup (JSON bodies: `Request.jsonBody`).
    static func fieldWithNUL(_ request: HTTPRequest) -> String? {
        if hasNUL(request.path) || hasEncodedNUL(request.path) { return "path" }
        if let parameter = request.query.first(where: { hasNUL($0.name) || hasNUL($0.value) }) {
            return String(parameter.name.prefix { $0 != "\u{0}" })
        }
        for (name, value) in request.headers where hasNUL(name) || hasNUL(value) {
            return String(name.prefix { $0 != "\u{0}" })
        }
        return nil
    }

    /// Runs on every header of every request: `memchr` over the UTF-8 bytes where Swift can lend them.
    private static func hasNUL(_ text: String) -> Bool {
        text.utf8.withContiguousStorageIfAvailable { bytes in
            guard let start = bytes.baseAddress, !bytes.isEmpty else { return false }
            return memchr(start, 0, bytes.count) != nil
        } ?? text.utf8.contains(0)
    }

    /// `%00` in `path`, byte-wise (`String.contains` goes through Foundation here).
    private static func hasEncodedNUL(_ path: String) -> Bool {
        var previous: (UInt8, UInt8) = (0, 0)
        for byte in path.utf8 {
            if previous == (UInt8(ascii: "%"), UInt8(ascii: "0")), byte == UInt8(ascii: "0") { return true }
            previous = (previous.1, byte)
        }
        return false
    }

    private func hasBody(_ request: HTTPRequest) -> Bool {
        if let length = request.headers["Content-Length"] { return length != "0" }
        return request.headers["Transfer-Encoding"] != nil
    }

    /// `application/json` or `application/*+json` (such as RFC 7396's `merge-patch+json`), in
    /// UTF-8: a `charset` other than UTF-8 is refused, not misread.
    private func isJSON(_ contentType: String?) -> Bool {
        if contentType == "application/json" { return true }  // what nearly every client sends
        guard let contentType, let mediaType = mediaType(contentType),
            mediaType == "application/json" || (mediaType.hasPrefix("application/") && mediaType.hasSuffix("+json"))
        else { return false }
        for parameter in contentType.split(separator: ";").dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            if pair.first == "charset", pair.count == 2, !["utf-8", "\"utf-8\""].contains(pair[1]) { return false }
        }
        return true
    }

    private func mediaType(_ contentType: String?) -> String? {
        guard let contentType, let first = contentType.split(separator: ";", maxSplits: 1).first else { return nil }
        return first.trimmingCharacters(in: .whitespaces).lowercased()
    }
}
