import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import GatehouseCore
import GatehouseKit
import GatehouseTesting
import Testing

/// GatehouseKit's Files API (gatehouse-js's names) against the real server: a multipart upload,
/// private and public, pages of the list, the metadata, the content whole and in part, deletion;
/// a user sees only their own files.
@Suite("GatehouseKit files")
struct FilesKitTests {
    static let password = "correct horse battery"

    /// The public content at `url` (on `GATEHOUSE_PUBLIC_URL`), fetched from the test server with
    /// no key and no token.
    static func fetchPublic(_ url: URL, from world: KitWorld) async throws -> (status: Int, body: Data) {
        let path = String(url.absoluteString.dropFirst(TestServer.publicURL.count))
        let (body, response) = try await URLSession(configuration: .ephemeral).data(from: URL(string: world.server.baseURL + path)!)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, body)
    }

    @Test(arguments: TestDatabase.kinds)
    func uploadListGetContentRangeAndDelete(_ kind: TestDatabaseKind) async throws {
        let world = try KitWorld(kind)
        defer { world.stop() }
        let client = world.client()
        _ = try await client.signUp(email: "files@example.com", password: Self.password)

        let text = String(repeating: "hello, files\n", count: 10)
        let notes = try await client.uploadFile(Data(text.utf8), filename: "../notes.txt")
        #expect(notes.id.hasPrefix("fil_"))
        #expect(notes.name == "notes.txt", "only the last path component")
        #expect(notes.contentType == "application/octet-stream", "the type comes from the bytes")
        #expect(notes.size == Int64(text.utf8.count))
        #expect(notes.sha256 == KitWorld.hashHex(text))
        #expect(notes.visibility == .private && notes.url == nil)

        world.clock.advance(seconds: 1)  // the world's clock is manual: "newest first" needs two times
        let png = Data(KitWorld.png)
        let photo = try await client.uploadFile(png, filename: "dot.png", visibility: .public)
        #expect(photo.name == "dot.png" && photo.contentType == "image/png" && photo.visibility == .public)
        let url = try #require(photo.url)
        #expect(url.absoluteString.hasPrefix(TestServer.publicURL))
        let served = try await Self.fetchPublic(url, from: world)
        #expect(served.status == 200 && served.body == png, "public: byte for byte, without a key")

        let notAnImage = await kitError { try await client.uploadFile(Data("not an image".utf8), visibility: .public) }
        #expect(notAnImage?.code == .unsupportedFileType)

        let first = try await client.listFiles(limit: 1)
        #expect(first.files.map(\.id) == [photo.id], "newest first")
        let cursor = try #require(first.nextCursor)
        let second = try await client.listFiles(limit: 1, cursor: cursor)
        #expect(second.files.map(\.id) == [notes.id])
        let all = try await client.listFiles()
        #expect(all.files.map(\.id) == [photo.id, notes.id] && all.nextCursor == nil)
        #expect(all.files == [photo, notes], "the list's entries are the uploads' answers")

        #expect(try await client.getFile(id: notes.id) == notes)
        let content = try await client.getFileContent(id: notes.id)
        #expect(String(decoding: content.data, as: UTF8.self) == text)
        #expect(content.contentType == "application/octet-stream")
        let part = try await client.getFileContent(id: notes.id, range: ByteRange(start: 0, end: 4))
        #expect(String(decoding: part.data, as: UTF8.self) == "hello")
        let rest = try await client.getFileContent(id: notes.id, range: ByteRange(start: Int64(text.utf8.count) - 6))
        #expect(String(decoding: rest.data, as: UTF8.self) == "files\n", "an open end: to the last byte")
        let beyond = await kitError { try await client.getFileContent(id: notes.id, range: ByteRange(start: 10_000)) }
        #expect(beyond?.code == .unknown("http/416"), "a range past the end: 416, no body")
        let image = try await client.getFileContent(id: photo.id)
        #expect(image.contentType == "image/png" && image.data == png)

        try await client.deleteFile(id: notes.id)
        #expect(await kitError { try await client.getFile(id: notes.id) }?.code == .notFound)
        #expect(try await client.listFiles().files.map(\.id) == [photo.id])
        #expect(await kitError { try await client.deleteFile(id: notes.id) }?.code == .notFound, "deleted once")
    }

    @Test
    func anotherUsersFileIsNotFoundAndSignedOutIsNotSignedIn() async throws {
        let world = try KitWorld()
        defer { world.stop() }
        let owner = world.client()
        _ = try await owner.signUp(email: "owner@example.com", password: Self.password)
        let other = world.client()
        _ = try await other.signUp(email: "other@example.com", password: Self.password)
        let file = try await owner.uploadFile(Data("mine".utf8))
        #expect(file.name == "file", "the default name")

        #expect(await kitError { try await other.getFile(id: file.id) }?.code == .notFound)
        #expect(await kitError { try await other.getFileContent(id: file.id) }?.code == .notFound)
        #expect(await kitError { try await other.deleteFile(id: file.id) }?.code == .notFound)
        #expect(try await other.listFiles().files.isEmpty)
        #expect(await kitError { try await owner.getFile(id: "fil_/../\(file.id)") }?.code == .notFound, "an id is one path segment")
        #expect(String(decoding: try await owner.getFileContent(id: file.id).data, as: UTF8.self) == "mine")

        try await owner.signOut()
        #expect(await kitError { try await owner.listFiles() } == .notSignedIn)
        #expect(await kitError { try await owner.uploadFile(Data("more".utf8)) } == .notSignedIn)
    }
}
