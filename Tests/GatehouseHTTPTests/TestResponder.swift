import Dispatch
import GatehouseCrypto
import GatehouseHTTP
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A responder wired like the API layer will be: a router of closures, fixed answers for the
/// size limits, and counters so tests can see what was called.
final class TestResponder: HTTPResponder {
    typealias Handler = @Sendable (HTTPRequest, [String: String]) -> HTTPResponse

    let router: Router<Handler>
    let bodyLimit: Int
    /// `POST /upload` (and `/upload-offloaded`) read `multipart/form-data` with file field `file`.
    let uploadLimit: Int
    /// What `/upload` saw of each spool file while answering: the path and whether it existed.
    let spoolsSeen = Mutex<[String]>([])
    let respondCalls = Atomic<Int>(0)
    /// The request ids `head` saw, in order.
    let headRequestIDs = Mutex<[String]>([])
    let bodyTooLargeCalls = Atomic<Int>(0)
    /// `GET /wait` is offloaded and waits for `gate`; `waiting` counts those that started.
    let gate = DispatchSemaphore(value: 0)
    let waiting = Atomic<Int>(0)

    init(bodyLimit: Int = 1024, uploadLimit: Int = 64 * 1024) {
        self.bodyLimit = bodyLimit
        self.uploadLimit = uploadLimit
        var router = Router<Handler>()
        router.add("GET", "/hello") { _, _ in .text(200, "hello") }
        router.add("GET", "/v1/apps/{app_id}/jwks.json") { _, p in .text(200, "jwks of \(p["app_id"]!)") }
        router.add("DELETE", "/v1/apps/{app_id}/jwks.json") { _, _ in .text(204, "") }
        router.add("GET", "/v1/apps/{app_id}/users/{user_id}") { _, p in
            .text(200, "\(p["app_id"]!)|\(p["user_id"]!)")
        }
        router.add("POST", "/echo") { request, _ in
            var headers = HTTPHeaders()
            headers.set("Content-Type", request.headers["Content-Type"] ?? "application/octet-stream")
            return HTTPResponse(status: 200, headers: headers, body: request.body)
        }
        router.add("GET", "/query") { request, _ in
            .text(200, request.query.map { "\($0.name)=\($0.value)" }.joined(separator: "\n"))
        }
        router.add("GET", "/remote") { request, _ in .text(200, request.remoteAddress) }
        router.add("GET", "/header") { request, _ in .text(200, request.headers["x-test"] ?? "none") }
        router.add("GET", "/slow") { _, _ in
            usleep(300_000)
            return .text(200, "slow done")
        }
        router.add("POST", "/request-id") { request, _ in .text(200, request.requestID) }
        router.add("POST", "/context") { request, _ in .text(200, request.context as? String ?? "no context") }
        router.add("GET", "/unsafe-header") { _, _ in
            var headers = HTTPHeaders()
            headers.add("X-Safe", "yes")
            headers.add("X-Split", "a\r\nInjected: yes")
            headers.add("X-Newline", "a\nb")
            headers.add("Bad Name", "x")
            return HTTPResponse(status: 200, headers: headers, body: Array("ok".utf8))
        }
        self.router = router
    }

    func head(_ request: inout HTTPRequest) -> HeadDecision {
        headRequestIDs.withLock { $0.append(request.requestID) }
        request.context = "seen by head: \(request.method) \(request.path)"
        if request.path == "/forbidden" { return .respond(.text(403, "forbidden early")) }
        if request.path == "/upload" || request.path == "/upload-offloaded" || request.path == "/upload-keep" {
            return .readMultipart(MultipartForm(fileFields: ["file"], maxFileBytes: uploadLimit), offload: request.path == "/upload-offloaded")
        }
        if request.path == "/spool" || request.path == "/spool-offloaded" {
            return .spoolBody(limit: uploadLimit, offload: request.path == "/spool-offloaded")
        }
        return .readBody(limit: bodyLimit, offload: request.path == "/wait")
    }

    func respond(to request: HTTPRequest) -> HTTPResponse {
        respondCalls.add(1, ordering: .relaxed)
        if request.path == "/wait" {
            waiting.add(1, ordering: .relaxed)
            gate.wait()
            return .text(200, "waited")
        }
        if let upload = request.upload {
            if request.path == "/upload-keep" {
                // Keeps each file the way a local blob store would: renamed away.
                for file in upload.files { rename(file.path, file.path + "-kept") }
                return .text(200, upload.files.map { $0.path + "-kept" }.joined(separator: "\n"))
            }
            return describe(upload)
        }
        if let file = request.spooledBody {
            var described = describe(Upload(files: [file]))
            if !request.body.isEmpty { described.body += Array(" and a body in memory".utf8) }
            return described
        }
        switch router.match(method: request.method, path: request.path) {
        case .matched(let handler, let parameters, _):
            return handler(request, parameters)
        case .methodNotAllowed(let allowed):
            return HTTPResponse(status: 405, headers: ["Allow": allowed.joined(separator: ", ")])
        case .notFound:
            return .text(404, "not found")
        }
    }

    /// One line per text field (`field name=value`, sorted) and per file
    /// (`file field|filename|declared type|size|sha256|sha256 read back|mode|first 4 bytes in hex`).
    private func describe(_ upload: Upload) -> HTTPResponse {
        var lines = upload.fields.sorted { $0.key < $1.key }.map { "field \($0.key)=\($0.value)" }
        for file in upload.files {
            var status = stat()
            let mode = stat(file.path, &status) == 0 ? String(status.st_mode & 0o777, radix: 8) : "missing"
            spoolsSeen.withLock { $0.append(file.path) }
            let hasher = SHA256Hasher()
            var readBack = "unreadable"
            if (try? file.forEachChunk(size: 7_000, { hasher.update($0); return true })) != nil { readBack = Digest.hex(hasher.finish()) }
            let prefix = (try? file.prefix(4)).map { Digest.hex($0) } ?? "?"
            lines.append(
                "file \(file.field)|\(file.filename ?? "-")|\(file.declaredContentType ?? "-")|\(file.size)|\(Digest.hex(file.sha256))|\(readBack)|\(mode)|\(prefix)")
        }
        return .text(200, lines.joined(separator: "\n"))
    }

    func uploadTooLarge(_ request: HTTPRequest, limit: Int) -> HTTPResponse {
        .text(413, "upload over \(limit)" + (request.context == nil ? " (no context)" : ""))
    }

    func unsupportedMediaType(_ request: HTTPRequest, expected: String) -> HTTPResponse {
        .text(415, "send \(expected)")
    }

    func malformedBody(_ request: HTTPRequest, reason: String) -> HTTPResponse {
        .text(400, reason)
    }

    func bodyTooLarge(_ request: HTTPRequest) -> HTTPResponse {
        bodyTooLargeCalls.add(1, ordering: .relaxed)
        return .text(413, "body too large")
    }

    func headerTooLarge(_ request: HTTPRequest) -> HTTPResponse {
        .text(431, "{\"type\":\"header-too-large\"}")
    }

    func badRequest(_ request: HTTPRequest, reason: String) -> HTTPResponse {
        .text(400, reason)
    }

    func busy(_ request: HTTPRequest) -> HTTPResponse {
        .text(503, "busy")
    }

    func uriTooLong(_ request: HTTPRequest) -> HTTPResponse {
        .text(414, "{\"type\":\"uri-too-long\"}")
    }
}

extension HTTPResponse {
    static func text(_ status: Int, _ text: String) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "text/plain"], body: Array(text.utf8))
    }
}

/// A started server on an ephemeral loopback port.
func startServer(
    responder: TestResponder = TestResponder(), _ configure: (inout HTTPServer.Configuration) -> Void = { _ in }
) throws -> HTTPServer {
    var configuration = HTTPServer.Configuration()
    configuration.port = 0
    configuration.threadCount = 4
    configuration.connectionTimeoutSeconds = 5
    configure(&configuration)
    let server = HTTPServer(configuration: configuration, responder: responder)
    try server.start()
    return server
}
