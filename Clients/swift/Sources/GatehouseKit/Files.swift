import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Who can read a file: its owner only (`private`, the default), or anyone with its URL (`public`,
/// images only, by their bytes: the app's `files.public_types`).
public enum FileVisibility: String, Codable, Sendable, Hashable {
    case `private`
    case `public`
}

/// A file of the user (`GET /v1/files/{id}`), as gatehouse-js's `StoredFile`.
public struct StoredFile: Decodable, Sendable, Equatable {
    public let id: String
    /// The last path component of the name it was uploaded under, cleaned by the server.
    public let name: String
    /// Sniffed from the bytes (JPEG, PNG, GIF, WebP), else `application/octet-stream`; never the
    /// name's or the client's word.
    public let contentType: String
    public let size: Int64
    /// The content's SHA-256, hex.
    public let sha256: String
    public let visibility: FileVisibility
    /// Public files only: where anyone can fetch the content, byte for byte, without a key.
    public let url: URL?
    public let createdAt: Date

    enum CodingKeys: String, CodingKey {
        case id, name, size, sha256, visibility, url
        case contentType = "content_type"
        case createdAt = "created_at"
    }
}

/// One page of ``GatehouseClient/listFiles(limit:cursor:)``, newest first.
public struct FilePage: Sendable, Equatable {
    public let files: [StoredFile]
    /// For the next page; `nil` on the last.
    public let nextCursor: String?
}

/// A file's bytes (``GatehouseClient/getFileContent(id:range:)``).
public struct FileContent: Sendable, Equatable {
    public let data: Data
    /// The sniffed content type the server answered with.
    public let contentType: String
}

/// A part of a file: inclusive byte offsets, `end` `nil` for the rest (`Range: bytes=start-end`).
public struct ByteRange: Sendable, Hashable {
    public let start: Int64
    public let end: Int64?

    /// `start` ≥ 0 and `end` ≥ `start`, as a `ClosedRange`'s bounds must be (a programmer's error otherwise).
    public init(start: Int64, end: Int64? = nil) {
        precondition(start >= 0 && (end.map { $0 >= start } ?? true), "ByteRange: start >= 0 and end >= start")
        self.start = start
        self.end = end
    }

    var header: String { "bytes=\(start)-\(end.map(String.init) ?? "")" }
}

extension GatehouseClient {
    // MARK: - Files (the names of gatehouse-js's Files API)

    /// `POST /v1/files` (multipart): uploads `data` under `filename` (only its last path
    /// component is kept), `private` by default. A `public` file must be one of the app's
    /// `files.public_types` by its bytes (else `files/unsupported-type`) and is served byte for
    /// byte at its ``StoredFile/url``. Over the size limit: `request/payload-too-large`; over the
    /// user's quota: `files/quota-exceeded`.
    public func uploadFile(_ data: Data, filename: String = "file", visibility: FileVisibility = .private) async throws -> StoredFile {
        let boundary = "gatehousekit-" + SecureRandom.token(byteCount: 12)
        let safeName = String(filename.filter { $0 != "\"" && $0 != "\r" && $0 != "\n" })
        var body = Data("--\(boundary)\r\nContent-Disposition: form-data; name=\"file\"; filename=\"\(safeName)\"\r\n".utf8)
        body.append(Data("Content-Type: application/octet-stream\r\n\r\n".utf8))
        body.append(data)
        body.append(Data("\r\n--\(boundary)\r\nContent-Disposition: form-data; name=\"visibility\"\r\n\r\n\(visibility.rawValue)".utf8))
        body.append(Data("\r\n--\(boundary)--\r\n".utf8))
        return try Transport.decode(StoredFile.self, from: try await authorized("POST", "/v1/files", body: .multipart(body, boundary: boundary)))
    }

    /// `GET /v1/files`: one page of the user's files, newest first (`limit` 1–100, the server's
    /// default when `nil`); pass ``FilePage/nextCursor`` for the next.
    public func listFiles(limit: Int? = nil, cursor: String? = nil) async throws -> FilePage {
        struct Page: Decodable {
            let data: [StoredFile]
            let next_cursor: String?
        }
        var query: [URLQueryItem] = []
        if let limit { query.append(URLQueryItem(name: "limit", value: String(limit))) }
        if let cursor { query.append(URLQueryItem(name: "cursor", value: cursor)) }
        let answer = try await authorized("GET", "/v1/files", query: query)
        try Transport.check(answer)
        guard let page = try? Transport.decoder.decode(Page.self, from: answer.body) else {
            throw GatehouseError.unexpectedResponse(status: answer.status)
        }
        return FilePage(files: page.data, nextCursor: page.next_cursor)
    }

    /// `GET /v1/files/{id}`: the file's metadata. Another user's id is `request/not-found`.
    public func getFile(id: String) async throws -> StoredFile {
        try Transport.decode(StoredFile.self, from: try await authorized("GET", "/v1/files/\(pathSegment(id))"))
    }

    /// `GET /v1/files/{id}/content`: the bytes and their sniffed type; `range` asks for a part
    /// (206; one the file cannot satisfy is `http/416`).
    public func getFileContent(id: String, range: ByteRange? = nil) async throws -> FileContent {
        var headers = ["Accept": "*/*"]
        if let range { headers["Range"] = range.header }
        let answer = try await authorized("GET", "/v1/files/\(pathSegment(id))/content", headers: headers)
        try Transport.check(answer)
        return FileContent(data: answer.body, contentType: answer.contentType ?? "application/octet-stream")
    }

    /// `DELETE /v1/files/{id}` (and the photo, if it was made from it).
    public func deleteFile(id: String) async throws {
        try Transport.check(try await authorized("DELETE", "/v1/files/\(pathSegment(id))"))
    }
}
