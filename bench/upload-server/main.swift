// A server for bench/upload-rss.py only: the HTTP layer as Gatehouse runs it (the same worker
// count), with one streamed upload route and, to compare, the same upload read whole into memory.
//
//   upload-bench-server <port>    POST /streamed: multipart/form-data, field "file", spooled
//                                 POST /buffered: the same body held in memory (readBody)
// Both answer the size and SHA-256 they saw. Runs until stdin closes.
import GatehouseCrypto
import GatehouseHTTP

#if canImport(Glibc)
import Glibc
#endif

final class UploadBenchResponder: HTTPResponder {
    static let limit = 8 * 1024 * 1024

    func head(_ request: inout HTTPRequest) -> HeadDecision {
        switch request.path {
        case "/streamed": .readMultipart(MultipartForm(fileFields: ["file"], maxFileBytes: Self.limit))
        case "/buffered": .readBody(limit: Self.limit + 64 * 1024)
        default: .respond(HTTPResponse(status: 404))
        }
    }

    func respond(to request: HTTPRequest) -> HTTPResponse {
        if let file = request.upload?.file("file") {
            return Self.text("\(file.size) \(Digest.hex(file.sha256))")
        }
        return Self.text("\(request.body.count) \(Digest.hex(Digest.sha256(request.body)))")
    }

    func bodyTooLarge(_ request: HTTPRequest) -> HTTPResponse {
        HTTPResponse(status: 413)
    }

    static func text(_ text: String) -> HTTPResponse {
        HTTPResponse(status: 200, headers: ["Content-Type": "text/plain"], body: Array(text.utf8))
    }
}

var configuration = HTTPServer.Configuration()
configuration.port = CommandLine.arguments.count > 1 ? UInt16(CommandLine.arguments[1]) ?? 0 : 0
configuration.threadCount = max(16, 8 * Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
let server = HTTPServer(configuration: configuration, responder: UploadBenchResponder())
try server.start()
print("listening \(server.port)")
fflush(nil)
while getchar() != EOF {}
server.shutdown()
