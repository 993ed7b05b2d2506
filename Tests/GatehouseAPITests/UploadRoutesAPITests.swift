import Foundation
import GatehouseAPI
import GatehouseApp
import GatehouseCore
import GatehouseCrypto
import GatehouseHTTP
import GatehouseTesting
import Testing

/// A `.multipart` route of the API layer, end to end: the limit is the calling app's
/// `files.max_bytes`, refusals are the contract's problem+json. The route is a test-only echo;
/// the database plays no part in what is checked, so SQLite alone runs it.
@Suite struct UploadRoutesAPITests {
    static let boundary = "api-upload-boundary-3fa1"

    static func startServer() throws -> TestServer {
        try TestServer(.sqlite) { _ in
        } extraRoutes: { routes in
            routes.post("/test/upload", body: .multipart(fileFields: ["file"])) { request in
                let file = try request.uploadedFile("file")
                return .data([
                    "visibility": request.upload?.fields["visibility"].map { .string($0) } ?? .null,
                    "filename": file.filename.map { .string($0) } ?? .null, "size": .int(Int64(file.size)),
                    "sha256": .string(Digest.hex(file.sha256)),
                ])
            }
        }
    }

    static func multipart(_ data: [UInt8], field: String = "file", extra: String = "") -> [UInt8] {
        Array("--\(boundary)\r\n\(extra)Content-Disposition: form-data; name=\"\(field)\"; filename=\"a.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n".utf8)
            + data + Array("\r\n--\(boundary)--\r\n".utf8)
    }

    static func upload(_ server: TestServer, appKey: String?, body: [UInt8], contentType: String = "multipart/form-data; boundary=\(boundary)")
        throws -> TestResponse
    {
        try server.request("POST", "/test/upload", appKey: appKey, headers: [("Content-Type", contentType)], body: body)
    }

    @Test func anUploadWithinTheAppsLimitReachesTheHandler() throws {
        let server = try Self.startServer()
        defer { server.stop() }
        let app = try server.createApp(["name": "Uploads", "files": ["max_bytes": 4096]])
        let data = (0..<4096).map { UInt8(truncatingIfNeeded: $0 * 7) }
        let response = try Self.upload(server, appKey: app.appKey, body: Self.multipart(data))
        #expect(response.status == 200)
        #expect(response.data?["size"] == 4096)
        #expect(response.data?["sha256"]?.stringValue == Digest.hex(Digest.sha256(data)))
        #expect(response.data?["filename"] == "a.bin")
    }

    @Test func anUploadOverTheAppsLimitIs413PayloadTooLarge() throws {
        let server = try Self.startServer()
        defer { server.stop() }
        let app = try server.createApp(["name": "Small files", "files": ["max_bytes": 2048]])
        // Over the file limit but within the body's room for framing: refused while reading.
        let overFile = try Self.upload(server, appKey: app.appKey, body: Self.multipart(Array(repeating: 1, count: 3000)))
        #expect(overFile.status == 413)
        #expect(overFile.problemCode == "request/payload-too-large")
        #expect(overFile.json?["detail"] == "Files may be at most 2 KiB.")
        #expect(overFile.header("Content-Type")?.hasPrefix("application/problem+json") == true)
        // Declared over the body limit: refused before reading.
        let overBody = try Self.upload(server, appKey: app.appKey, body: Self.multipart(Array(repeating: 1, count: 200_000)))
        #expect(overBody.status == 413)
        #expect(overBody.problemCode == "request/payload-too-large")
    }

    @Test func withoutAKnownAppTheCeilingAppliesAndTheHandlerAnswers() throws {
        let server = try Self.startServer()
        defer { server.stop() }
        let response = try Self.upload(server, appKey: "no-such-app-key", body: Self.multipart(Array(repeating: 2, count: 10_000)))
        #expect(response.status == 200, "the echo route checks no app; a real one answers 401 for the key")
        #expect(response.data?["size"] == 10_000)
    }

    @Test func otherContentTypesAre415AndBrokenMultipartIs400() throws {
        let server = try Self.startServer()
        defer { server.stop() }
        let app = try server.createApp()
        let json = try Self.upload(server, appKey: app.appKey, body: Array("{}".utf8), contentType: "application/json")
        #expect(json.status == 415)
        #expect(json.problemCode == "request/unsupported-media-type")
        #expect(json.json?["detail"] == "Send the body as multipart/form-data.")

        var cut = Self.multipart(Array(repeating: 3, count: 100))
        cut.removeLast(8)
        let broken = try Self.upload(server, appKey: app.appKey, body: cut)
        #expect(broken.status == 400)
        #expect(broken.problemCode == "request/malformed")

        let noFile = try Self.upload(server, appKey: app.appKey, body: Self.multipart(Array("x".utf8), field: "other"))
        #expect(noFile.status == 400)
        #expect(noFile.problemCode == "request/validation-failed")
    }
}
