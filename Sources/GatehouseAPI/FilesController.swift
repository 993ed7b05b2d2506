import GatehouseCore
import GatehouseHTTP

/// `/v1/files*`, the profile photo (`/v1/me/photo`) and public content
/// (`/v1/apps/{app_id}/files/{id}/{version}`): API.md's "Files" and the photo rows of "Account".
struct FilesController {
    let auth: Authenticator
    let files: FilesService

    func register(_ routes: inout Routes) {
        routes.post("/v1/files", body: .multipart(fileFields: ["file"]), beforeBody: mayUpload, upload)
        routes.get("/v1/files", list)
        routes.get("/v1/files/{id}", file)
        routes.get("/v1/files/{id}/content", doesFileIO: true, content)
        routes.delete("/v1/files/{id}", delete)
        routes.post("/v1/me/photo", body: .multipart(fileFields: ["photo"]), beforeBody: mayUpload, uploadPhoto)
        routes.delete("/v1/me/photo", removePhoto)
        routes.get("/v1/apps/{app_id}/files/{id}/{version}", doesFileIO: true, publicContent)
    }

    /// Before an upload's body is read: the app key, the access token, where the app asks for it a
    /// verified email, and an upload left this hour. Nobody else gets to fill the spool.
    func mayUpload(_ request: Request) throws {
        let (app, claims) = try auth.user(request)
        try files.requireVerifiedEmail(app: app, user: claims.userID)
        try files.countUpload(app: app, user: claims.userID)
    }

    func upload(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        let fields = request.http.upload?.fields ?? [:]
        if let unknown = fields.keys.sorted().first(where: { $0 != "visibility" }) {
            throw GatehouseError.validation(unknown, "Unknown field.")
        }
        var visibility = FileVisibility.private
        if let text = fields["visibility"] {
            guard let parsed = FileVisibility(rawValue: text) else { throw GatehouseError.validation("visibility", "Must be private or public.") }
            visibility = parsed
        }
        let stored = try files.upload(
            app: app, user: claims.userID, session: claims.sessionID, file: try incoming(request, "file"), visibility: visibility, origin: request.origin)
        return HTTPResponse.data(json(app.id, stored), status: 201).noStore()
    }

    func list(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        var errors: [FieldError] = []
        let limit = Page.limit(request, errors: &errors)
        let after = KeysetCursor.read(request, tag: "f", errors: &errors) { FileID(parsing: String($0)) }
        if !errors.isEmpty { throw GatehouseError.validation(errors) }
        let (page, next) = try files.list(
            app: app, user: claims.userID, after: after.map { FilesService.Position(createdAt: $0.millis, id: $0.id) }, limit: limit)
        return HTTPResponse.json([
            "data": .array(page.map { json(app.id, $0) }),
            "next_cursor": next.map { .string(KeysetCursor.make(tag: "f", millis: $0.createdAt, id: $0.id.rawValue)) } ?? .null,
        ]).noStore()
    }

    func file(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        return HTTPResponse.data(json(app.id, try files.file(app: app, user: claims.userID, id: request.parameters["id"] ?? ""))).noStore()
    }

    /// The user's own file's bytes: never stored by any cache, the browser's included.
    func content(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        let stored = try files.file(app: app, user: claims.userID, id: request.parameters["id"] ?? "")
        return try serve(request, stored, cacheControl: "private, no-store") { try files.open(stored, range: $0) }
    }

    func delete(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        try files.delete(app: app, user: claims.userID, session: claims.sessionID, id: request.parameters["id"] ?? "", origin: request.origin)
        return .noContent
    }

    func uploadPhoto(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        if let unknown = (request.http.upload?.fields ?? [:]).keys.sorted().first { throw GatehouseError.validation(unknown, "Unknown field.") }
        let (user, identities) = try files.uploadPhoto(app: app, user: claims.userID, session: claims.sessionID, file: try incoming(request, "photo"), origin: request.origin)
        return HTTPResponse.data(UserObject.json(user, identities)).noStore()
    }

    func removePhoto(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        let (user, identities) = try files.removePhoto(app: app, user: claims.userID, session: claims.sessionID, origin: request.origin)
        return HTTPResponse.data(UserObject.json(user, identities)).noStore()
    }

    /// Public content: no app key, no sign-in. The URL changes with the content, so it is cached
    /// for a year by anyone. A disabled app's files are not served.
    func publicContent(_ request: Request) throws -> HTTPResponse {
        guard let app = AppID(parsing: request.parameters["app_id"] ?? ""), try auth.directory.app(id: app)?.isDisabled != true else {
            throw GatehouseError(.notFound, "No such file.")
        }
        let stored = try files.publicFile(app: app, id: request.parameters["id"] ?? "", version: request.parameters["version"] ?? "")
        return try serve(request, stored, cacheControl: "public, max-age=31536000, immutable") { try files.open(stored, range: $0) }
    }

    // MARK: -

    private func incoming(_ request: Request, _ field: String) throws -> IncomingFile {
        let spooled = try request.uploadedFile(field)
        return IncomingFile(path: spooled.path, size: Int64(spooled.size), sha256: spooled.sha256, name: spooled.filename)
    }

    private func json(_ app: AppID, _ file: StoredFile) -> JSON {
        var fields: [String: JSON] = [
            "id": .string(file.id.rawValue), "name": .string(file.name), "content_type": .string(file.contentType), "size": .int(file.size),
            "sha256": .string(file.sha256), "visibility": .string(file.visibility.rawValue), "created_at": .string(rfc3339(millis: file.createdAt)),
        ]
        if let url = files.url(app: app, file) { fields["url"] = .string(url) }
        return .object(fields)
    }

    /// The bytes of `file` with its validators: 304 to a matching `If-None-Match`, 206 to one
    /// satisfiable `Range: bytes=…` (416 otherwise), 200 else. The sniffed type, never the name's,
    /// and a `Content-Disposition` that cannot be abused.
    private func serve(
        _ request: Request, _ file: StoredFile, cacheControl: String, open: (Range<Int64>?) throws -> any BlobReader
    ) throws -> HTTPResponse {
        let etag = "\"\(file.sha256)\""
        var headers = HTTPHeaders()
        headers.set("ETag", etag)
        headers.set("Cache-Control", cacheControl)
        headers.set("Accept-Ranges", "bytes")
        // Should a browser open it as a page anyway: no script, no plugin, no same-origin rights.
        headers.set("Content-Security-Policy", "default-src 'none'; sandbox")
        if let match = request.http.headers["If-None-Match"], match.split(separator: ",").contains(where: { $0.trimmingCharacters(in: .whitespaces) == etag || $0 == "*" }) {
            return HTTPResponse(status: 304, headers: headers)
        }
        headers.set("Content-Type", file.contentType)
        headers.set("Content-Disposition", FileName.contentDisposition(name: file.name, contentType: file.contentType))
        var status = 200
        var range: Range<Int64>?
        if let header = request.http.headers["Range"], request.http.headers["If-Range"].map({ $0 == etag }) ?? true,
            let requested = Self.byteRange(header, size: file.size)  // a Range not of that form is ignored (RFC 9110, 14.2)
        {
            guard let parsed = requested else {
                headers.set("Content-Range", "bytes */\(file.size)")
                headers.set("Cache-Control", "no-store")
                return HTTPResponse(status: 416, headers: headers)
            }
            range = parsed
            status = 206
            headers.set("Content-Range", "bytes \(parsed.lowerBound)-\(parsed.upperBound - 1)/\(file.size)")
        }
        // Streamed (a HEAD reads none of it: libmicrohttpd sends the length alone): the connection pulls a piece at a time, so a large file never sits whole in memory.
        let reader = try open(range)
        return HTTPResponse(status: status, headers: headers, stream: ResponseStream(size: reader.size, read: { try reader.read(upTo: $0) }, close: { reader.close() }))
    }

    /// One range of `bytes=a-b`, `bytes=a-` or `bytes=-n`: nil when the header is not of that
    /// form (ignored: the whole content is sent; several ranges are not served), `.some(nil)`
    /// when it is but cannot be satisfied within `size` (416).
    static func byteRange(_ header: String, size: Int64) -> Range<Int64>?? {
        guard header.hasPrefix("bytes=") else { return nil }
        let spec = header.dropFirst(6)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return nil }
        let first = spec[..<dash].trimmingCharacters(in: .whitespaces)
        let last = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)
        let digits = { (text: String) in !text.isEmpty && text.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }
        if first.isEmpty {
            guard digits(last) else { return nil }
            guard let n = Int64(last), n > 0, size > 0 else { return .some(nil) }
            return max(0, size - n)..<size
        }
        guard digits(first), last.isEmpty || digits(last) else { return nil }
        guard let start = Int64(first), start < size else { return .some(nil) }
        if last.isEmpty { return start..<size }
        guard let end = Int64(last) else { return start..<size }  // past any Int64: to the end
        guard end >= start else { return nil }  // not a valid range: ignored
        return start..<(min(end, size - 1) + 1)
    }
}
