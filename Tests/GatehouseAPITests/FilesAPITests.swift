import Foundation
import GatehouseCore
import GatehouseCrypto
@testable import GatehouseAPI
import GatehouseApp
import GatehouseTesting
import Testing

/// API.md's Files section and the photo rows over real HTTP, on both databases and both blob
/// stores: uploads streamed as multipart, types from the bytes, public URLs cached for a year.
@Suite("Files and photos over HTTP")
struct FilesAPITests {
    static let boundary = "gh-test-boundary-7MA4YWxkTrZu0gW"

    /// A `multipart/form-data` body: text fields, then file parts `(field, filename, bytes)`.
    static func multipart(fields: [(String, String)] = [], files: [(String, String, [UInt8])]) -> [UInt8] {
        var body: [UInt8] = []
        for (name, value) in fields {
            body += Array("--\(boundary)\r\nContent-Disposition: form-data; name=\"\(name)\"\r\n\r\n\(value)\r\n".utf8)
        }
        for (name, filename, bytes) in files {
            body += Array("--\(boundary)\r\nContent-Disposition: form-data; name=\"\(name)\"; filename=\"\(filename)\"\r\nContent-Type: text/plain\r\n\r\n".utf8)
            body += bytes + Array("\r\n".utf8)
        }
        return body + Array("--\(boundary)--\r\n".utf8)
    }

    struct World {
        let server: TestServer
        let app: TestServer.CreatedApp
        let session: JSON
        var token: String { session["access_token"]?.stringValue ?? "" }

        init(_ kind: TestDatabaseKind, blobs: BlobStoreTests.Kind, settings: [String: JSON] = [:]) throws {
            server = try TestServer(kind, configure: BlobStoreTests.configure(blobs))
            var all: [String: JSON] = ["name": "Files", "rate_limits": ["auth_per_minute_per_ip": 1000]]
            for (key, value) in settings { all[key] = value }
            app = try server.createApp(.object(all))
            session = try server.signUp(app, email: "ada@example.com")
        }

        func upload(_ path: String, fields: [(String, String)] = [], files: [(String, String, [UInt8])], token: String? = nil) throws -> TestResponse {
            try server.request(
                "POST", path, appKey: app.appKey, bearer: token ?? self.token,
                headers: [("Content-Type", "multipart/form-data; boundary=\(FilesAPITests.boundary)")],
                body: FilesAPITests.multipart(fields: fields, files: files))
        }

        func get(_ path: String, headers: [(String, String)] = [], token: String? = nil, appKey: Bool = true) throws -> TestResponse {
            try server.request("GET", path, appKey: appKey ? app.appKey : nil, bearer: appKey ? (token ?? self.token) : nil, headers: headers)
        }
    }

    @Test(arguments: BlobStoreTests.cases)
    func everyFilesRowBehavesAsWritten(_ kind: TestDatabaseKind, _ blobs: BlobStoreTests.Kind) throws {
        let world = try World(kind, blobs: blobs)
        defer { world.server.stop() }
        let text = Array("hello, files\n".utf8)
        let created = try world.upload("/v1/files", files: [("file", "../../notes.txt", text)])
        #expect(created.status == 201)
        let file = try #require(created.data)
        let id = try #require(file["id"]?.stringValue)
        #expect(file["name"] == "notes.txt", "no path")
        #expect(file["content_type"] == "application/octet-stream", "from the bytes, not the name or the part's type")
        #expect(file["size"] == .int(Int64(text.count)))
        #expect(file["sha256"]?.stringValue == Digest.hex(Digest.sha256(text)))
        #expect(file["visibility"] == "private" && file["url"] == nil)

        #expect(try world.get("/v1/files").data?.arrayValue?.compactMap { $0["id"]?.stringValue } == [id])
        #expect(try world.get("/v1/files/\(id)").data?["id"]?.stringValue == id)
        let content = try world.get("/v1/files/\(id)/content")
        #expect(content.status == 200 && content.body == text)
        #expect(content.header("Cache-Control") == "private, no-store" && content.header("X-Content-Type-Options") == "nosniff")
        #expect(content.header("Content-Disposition")?.hasPrefix("attachment; filename=\"notes.txt\"") == true)
        #expect(content.header("ETag") == "\"\(Digest.hex(Digest.sha256(text)))\"")
        #expect(try world.get("/v1/files/\(id)/content", headers: [("If-None-Match", content.header("ETag")!)]).status == 304)
        let partial = try world.get("/v1/files/\(id)/content", headers: [("Range", "bytes=0-4")])
        #expect(partial.status == 206 && partial.body == Array("hello".utf8) && partial.header("Content-Range") == "bytes 0-4/\(text.count)")
        #expect(try world.get("/v1/files/\(id)/content", headers: [("Range", "bytes=999-")]).status == 416)

        // Another user, another app: 404, never 403.
        let other = try world.server.signUp(world.app, email: "grace@example.com")
        let otherToken = try #require(other["access_token"]?.stringValue)
        #expect(try world.get("/v1/files/\(id)", token: otherToken).status == 404)
        #expect(try world.get("/v1/files/\(id)/content", token: otherToken).status == 404)
        #expect(try world.server.request("DELETE", "/v1/files/\(id)", appKey: world.app.appKey, bearer: otherToken).status == 404)
        let otherApp = try world.server.createApp(["name": "Elsewhere"])
        let stranger = try world.server.signUp(otherApp, email: "ada@example.com")
        #expect(try world.server.request("GET", "/v1/files/\(id)", appKey: otherApp.appKey, bearer: stranger["access_token"]?.stringValue).status == 404)

        // Public: a stable URL on the public URL, cached for a year, no key needed.
        let png = TinyImages.png()
        let shared = try #require(try world.upload("/v1/files", fields: [("visibility", "public")], files: [("file", "pic.txt", png)]).data)
        #expect(shared["content_type"] == "image/png")
        let url = try #require(shared["url"]?.stringValue)
        #expect(url.hasPrefix(TestServer.publicURL + "/v1/apps/\(world.app.id)/files/"))
        let path = String(url.dropFirst(TestServer.publicURL.count))
        let served = try world.get(path, appKey: false)
        #expect(served.status == 200 && served.body == png && served.header("Content-Type") == "image/png")
        #expect(served.header("Cache-Control") == "public, max-age=31536000, immutable")
        #expect(try world.get(path, headers: [("If-None-Match", served.header("ETag")!)], appKey: false).status == 304)
        #expect(try world.server.request("HEAD", path).status == 200)
        #expect(try world.get(String(path.dropLast(2)) + "00", appKey: false).status == 404, "another version")
        #expect(try world.get("/v1/apps/\(world.app.id)/files/\(id)/" + Digest.hex(Digest.sha256(text)).prefix(16), appKey: false).status == 404, "private")

        #expect(try world.server.request("DELETE", "/v1/files/\(id)", appKey: world.app.appKey, bearer: world.token).status == 204)
        #expect(try world.get("/v1/files/\(id)").status == 404)
    }

    @Test(arguments: BlobStoreTests.cases)
    func badUploadsAreClearAndStoreNothing(_ kind: TestDatabaseKind, _ blobs: BlobStoreTests.Kind) throws {
        let world = try World(kind, blobs: blobs, settings: ["files": ["max_bytes": 2048]])
        defer { world.server.stop() }
        #expect(try world.upload("/v1/files", files: [("file", "empty.txt", [])]).problemCode == "request/validation-failed")
        #expect(try world.upload("/v1/files", files: [("file", "big.bin", Array(repeating: 7, count: 4096))]).status == 413)
        #expect(try world.upload("/v1/files", files: [("file", "a", [1]), ("file", "b", [2])]).status == 400)
        #expect(try world.upload("/v1/files", fields: [("visibility", "everyone")], files: [("file", "a", [1])]).problemCode == "request/validation-failed")
        #expect(try world.upload("/v1/files", fields: [("colour", "red")], files: [("file", "a", [1])]).problemCode == "request/validation-failed")
        #expect(try world.upload("/v1/files", files: [("other", "a", [1])]).problemCode == "request/validation-failed")
        let json = try world.server.request("POST", "/v1/files", appKey: world.app.appKey, bearer: world.token, json: ["file": "x"])
        #expect(json.status == 415)
        let weird = try world.upload("/v1/files", files: [("file", "a\u{0}b\u{202E}gpj.exe" + String(repeating: "n", count: 10_000), [1, 2, 3])])
        #expect(weird.status == 201)
        let name = try #require(weird.data?["name"]?.stringValue)
        #expect(name.utf8.count <= 255 && !name.contains("\u{0}") && !name.contains("\u{202E}"))
        #expect(try world.get("/v1/files").data?.arrayValue?.count == 1, "only the good one")
        #expect(try world.upload("/v1/files", files: [("file", "a", [1])], token: "not-a-token").status == 401)
    }

    @Test(arguments: BlobStoreTests.cases)
    func photosByContentWithANewURLEachTimeAndThePictureClaim(_ kind: TestDatabaseKind, _ blobs: BlobStoreTests.Kind) throws {
        let world = try World(kind, blobs: blobs)
        defer { world.server.stop() }
        // A polyglot: a GIF header, then HTML. Decoded and stored as a PNG: the HTML is gone.
        let polyglot = TinyImages.gif + Array("<html><script>alert(1)</script></html>".utf8)
        let first = try world.upload("/v1/me/photo", files: [("photo", "me.html", polyglot)])
        #expect(first.status == 200)
        let firstURL = try #require(first.data?["photo_url"]?.stringValue)
        let served = try world.get(String(firstURL.dropFirst(TestServer.publicURL.count)), appKey: false)
        #expect(served.header("Content-Type") == "image/png" && served.header("X-Content-Type-Options") == "nosniff")
        #expect(!served.body.contains(subsequence: Array("<html>".utf8)))
        #expect(served.header("Content-Disposition")?.hasPrefix("inline") == true)

        let second = try world.upload("/v1/me/photo", files: [("photo", "me.png", TinyImages.png())])
        let secondURL = try #require(second.data?["photo_url"]?.stringValue)
        #expect(secondURL != firstURL, "new content, new URL")
        #expect(try world.get(String(firstURL.dropFirst(TestServer.publicURL.count)), appKey: false).status == 404, "the replaced photo is gone")
        // The picture claim of tokens issued after the change.
        let signIn = try world.server.request("POST", "/v1/auth/signin", appKey: world.app.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"])
        let claims = try JSON.parse(JWT.parse(try #require(signIn.data?["access_token"]?.stringValue)).payload)
        #expect(claims["picture"]?.stringValue == secondURL)

        #expect(try world.upload("/v1/me/photo", files: [("photo", "me.png", Array("not an image".utf8))]).problemCode == "files/unsupported-type")
        #expect(try world.upload("/v1/me/photo", files: [("photo", "me.png", Array(TinyImages.png().dropLast(12)))]).problemCode == "files/unsupported-type")

        // photo_file_id: one of the user's own image files; another user's is 404; a non-image 415.
        let own = try #require(try world.upload("/v1/files", files: [("file", "p.jpg", TinyImages.jpeg)]).data?["id"]?.stringValue)
        let set = try world.server.request("PATCH", "/v1/me", appKey: world.app.appKey, bearer: world.token, json: ["photo_file_id": .string(own), "first_name": "Ada"])
        #expect(set.status == 200 && set.data?["first_name"] == "Ada" && set.data?["photo_url"]?.stringValue?.hasPrefix(TestServer.publicURL) == true)
        #expect(set.data?["photo_url"]?.stringValue?.contains(own) == false, "the photo is made from the file, not the file")
        let textFile = try #require(try world.upload("/v1/files", files: [("file", "t.txt", [65])]).data?["id"]?.stringValue)
        #expect(try world.server.request("PATCH", "/v1/me", appKey: world.app.appKey, bearer: world.token, json: ["photo_file_id": .string(textFile)]).status == 415)
        let other = try world.server.signUp(world.app, email: "grace@example.com")
        #expect(try world.server.request("PATCH", "/v1/me", appKey: world.app.appKey, bearer: other["access_token"]?.stringValue, json: ["photo_file_id": .string(own)]).status == 404)
        // Names are checked before the photo changes: a bad name changes nothing.
        let before = try world.get("/v1/me").data?["photo_url"]
        #expect(try world.server.request("PATCH", "/v1/me", appKey: world.app.appKey, bearer: world.token, json: ["photo_file_id": nil, "last_name": .string(String(repeating: "x", count: 60))]).status == 400)
        #expect(try world.get("/v1/me").data?["photo_url"] == before)

        let removed = try world.server.request("DELETE", "/v1/me/photo", appKey: world.app.appKey, bearer: world.token)
        #expect(removed.status == 200 && removed.data?["photo_url"] == .null)
        #expect(try world.get("/v1/files/\(own)").status == 200, "a file chosen as the photo stays a file")
    }

    @Test(arguments: TestDatabase.kinds)
    func anUnverifiedEmailIsRefusedFilesWhenTheAppSaysSo(_ kind: TestDatabaseKind) throws {
        let world = try World(kind, blobs: .database, settings: ["require_verified_email": true])
        defer { world.server.stop() }
        #expect(try world.upload("/v1/files", files: [("file", "a", [1])]).problemCode == "auth/email-not-verified")
        #expect(try world.upload("/v1/me/photo", files: [("photo", "a", TinyImages.png())]).problemCode == "auth/email-not-verified")
        #expect(try world.get("/v1/files").problemCode == "auth/email-not-verified")
        #expect(try world.get("/v1/me").status == 200, "the account itself keeps working")
    }
}

extension FilesAPITests {
    /// Deleting the account takes its files and photo with it: their public URLs answer 404 at once.
    @Test(arguments: TestDatabase.kinds)
    func deletingTheAccountRemovesItsFilesAndPhoto(_ kind: TestDatabaseKind) throws {
        let world = try World(kind, blobs: .database)
        defer { world.server.stop() }
        let photo = try #require(try world.upload("/v1/me/photo", files: [("photo", "me.png", TinyImages.png())]).data?["photo_url"]?.stringValue)
        let shared = try #require(try world.upload("/v1/files", fields: [("visibility", "public")], files: [("file", "a.gif", TinyImages.gif)]).data?["url"]?.stringValue)
        for url in [photo, shared] { #expect(try world.get(String(url.dropFirst(TestServer.publicURL.count)), appKey: false).status == 200) }
        #expect(try world.server.request("DELETE", "/v1/me", appKey: world.app.appKey, bearer: world.token).status == 204)
        for url in [photo, shared] { #expect(try world.get(String(url.dropFirst(TestServer.publicURL.count)), appKey: false).status == 404) }
        #expect(try world.server.gatehouse.database.query("SELECT 1 AS found FROM files").isEmpty)
        // The contents go through the outbox (blob_delete), after the deletion's commit.
        world.server.gatehouse.stopBackgroundWork()
        while try world.server.gatehouse.outboxWorker.runOnce() > 0 {}
        #expect(try world.server.gatehouse.database.query("SELECT 1 AS found FROM blob_chunks").isEmpty)
    }
}

extension FilesAPITests {
    /// An upload is refused on its headers — no key, a bad token, an unverified email where the app
    /// requires one — before any of its body is read: nobody else can fill the spool.
    @Test(arguments: TestDatabase.kinds)
    func uploadsAreRefusedBeforeTheirBodyUnlessTheUserMayUpload(_ kind: TestDatabaseKind) throws {
        let world = try World(kind, blobs: .database, settings: ["require_verified_email": true])
        defer { world.server.stop() }
        let body = FilesAPITests.multipart(files: [("file", "a", Array(repeating: 1, count: 1000))])
        let multipart = [("Content-Type", "multipart/form-data; boundary=\(FilesAPITests.boundary)")]
        let noKey = try world.server.request("POST", "/v1/files", bearer: world.token, headers: multipart, body: body)
        #expect(noKey.status == 401 && noKey.problemCode == "app/missing-key")
        let badToken = try world.server.request("POST", "/v1/files", appKey: world.app.appKey, bearer: "x.y.z", headers: multipart, body: body)
        #expect(badToken.status == 401)
        #expect(try world.upload("/v1/me/photo", files: [("photo", "p.png", TinyImages.png())]).problemCode == "auth/email-not-verified")
        // PATCH /v1/me keeps working for an unverified email, the photo's removal included.
        let patched = try world.server.request("PATCH", "/v1/me", appKey: world.app.appKey, bearer: world.token, json: ["photo_file_id": nil, "first_name": "Ada"])
        #expect(patched.status == 200 && patched.data?["first_name"] == "Ada")
    }

    @Test func rangesNotOfTheSupportedFormAreIgnoredAndUnsatisfiableOnes416() {
        #expect(FilesController.byteRange("bytes=0-4", size: 10) == .some(0..<5))
        #expect(FilesController.byteRange("bytes=5-", size: 10) == .some(5..<10))
        #expect(FilesController.byteRange("bytes=-3", size: 10) == .some(7..<10))
        #expect(FilesController.byteRange("bytes=2-99999999999999999999999", size: 10) == .some(2..<10))
        #expect(FilesController.byteRange("bytes=10-", size: 10) == .some(nil))
        #expect(FilesController.byteRange("bytes=-0", size: 10) == .some(nil))
        for ignored in ["items=0-1", "bytes=0-1,3-4", "bytes=x-1", "bytes=5-3", "bytes=-", "bytes=--1"] {
            #expect(FilesController.byteRange(ignored, size: 10) == nil, "\(ignored)")
        }
    }
}

extension FilesAPITests {
    /// A file of several chunks is streamed out whole, in ranges across chunk boundaries, and its
    /// HEAD says its length without a body.
    @Test(arguments: BlobStoreTests.cases)
    func largeContentIsStreamedWholeAndInRanges(_ kind: TestDatabaseKind, _ blobs: BlobStoreTests.Kind) throws {
        let world = try World(kind, blobs: blobs, settings: ["files": ["max_bytes": 4_194_304]])
        defer { world.server.stop() }
        let bytes = (0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 2654435761 >> 13) }
        let file = try #require(try world.upload("/v1/files", files: [("file", "big.bin", bytes)]).data)
        let id = try #require(file["id"]?.stringValue)
        let whole = try world.get("/v1/files/\(id)/content")
        #expect(whole.status == 200 && whole.body.count == bytes.count && whole.body == bytes)
        #expect(whole.header("Content-Length") == String(bytes.count))
        let start = 256 * 1024 - 10
        let middle = try world.get("/v1/files/\(id)/content", headers: [("Range", "bytes=\(start)-\(start + 300_000)")])
        #expect(middle.status == 206 && middle.body == Array(bytes[start...(start + 300_000)]))
        let head = try world.server.request("HEAD", "/v1/files/\(id)/content", appKey: world.app.appKey, bearer: world.token)
        #expect(head.status == 200 && head.body.isEmpty && head.header("Content-Length") == String(bytes.count))
    }
}
