import GatehouseConsole
import GatehouseCore
import GatehouseCrypto
import GatehouseHTTP

/// `/console/`: the web console's files (docs/console.md), from the fixed table of
/// `ConsoleFiles`. The console is a client of the admin API like any other; these routes serve
/// files and nothing else, and are not in docs/openapi.json (static files are not operations of
/// the API: docs/console.md says so and DocumentationTests checks it).
struct ConsoleController {
    /// Every answer's policy: only this origin's scripts, styles and API, no inline script or style,
    /// no framing, nothing sent anywhere else.
    static let securityHeaders: [(String, String)] = [
        (
            "Content-Security-Policy",
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'none'; "
                + "frame-ancestors 'none'; base-uri 'none'"
        ),
        ("X-Frame-Options", "DENY"),
        ("Referrer-Policy", "no-referrer"),
        ("Cross-Origin-Opener-Policy", "same-origin"),
        ("Cross-Origin-Resource-Policy", "same-origin"),
    ]

    /// Each file with its entity tag (a hash of its bytes, so a new build is fetched anew).
    private let files: [String: (file: ConsoleFile, etag: String)]

    init(files: [String: ConsoleFile] = ConsoleFiles.all) {
        self.files = files.mapValues { ($0, "\"" + Digest.hex(Digest.sha256($0.bytes).prefix(12)) + "\"") }
    }

    func register(_ routes: inout Routes) {
        routes.get("/console", redirect)
        routes.get("/console/", index)
        routes.get("/console/{file}", file)
    }

    func redirect(_ request: Request) throws -> HTTPResponse {
        HTTPResponse(status: 308, headers: HTTPHeaders([("Location", "/console/")]))
    }

    func index(_ request: Request) throws -> HTTPResponse {
        try serve(ConsoleFiles.index.name, request)
    }

    func file(_ request: Request) throws -> HTTPResponse {
        try serve(request.parameters["file"] ?? "", request)
    }

    /// The named file of the table (no other name is found), or 304 when the browser has it.
    private func serve(_ name: String, _ request: Request) throws -> HTTPResponse {
        guard let (file, etag) = files[name] else { throw GatehouseError(.notFound, "No such file.") }
        var headers = HTTPHeaders(Self.securityHeaders)
        headers.set("ETag", etag)
        // Revalidated on each load: a console from an older build never lingers against a newer API.
        headers.set("Cache-Control", "no-cache")
        if request.header("If-None-Match") == etag { return HTTPResponse(status: 304, headers: headers) }
        headers.set("Content-Type", file.contentType)
        return HTTPResponse(status: 200, headers: headers, body: file.bytes)
    }
}
