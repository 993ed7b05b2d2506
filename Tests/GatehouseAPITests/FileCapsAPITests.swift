import Dispatch
import Foundation
import GatehouseCore
import GatehouseCrypto
import GatehouseImaging
import GatehouseTesting
import Synchronization
import Testing

/// API.md "Tenants share one server safely": per-app upload caps (rate, quotas, public types), and
/// photos decoded and encoded anew before they are stored.
extension FilesAPITests {
    /// The bytes behind a public URL.
    static func publicBytes(_ world: World, _ url: String) throws -> TestResponse {
        try world.get(String(url.dropFirst(TestServer.publicURL.count)), appKey: false)
    }

    @Test(arguments: TestDatabase.kinds)
    func photosAreDecodedStrippedAndShrunkBeforeTheyAreStored(_ kind: TestDatabaseKind) throws {
        let world = try World(kind, blobs: .database)
        defer { world.server.stop() }

        // A PNG that declares 50,000 × 50,000 pixels: refused from its header.
        let bomb = TinyImages.png(width: 50_000, height: 50_000)
        #expect(ContentSniffer.sniff(bomb) == "image/png", "the sniffer lets it through: the decoder must refuse it")
        let refused = try world.upload("/v1/me/photo", files: [("photo", "bomb.png", bomb)])
        #expect(refused.status == 415 && refused.problemCode == "files/unsupported-type")
        #expect(try world.get("/v1/me").data?["photo_url"] == .null)

        // A JPEG with EXIF (GPS, camera) and a comment comes back without any of it.
        let marker = "GATEHOUSE-SECRET-PLACE-51.5N"
        let tagged = TinyImages.withEXIF(TinyImages.image(width: 64, height: 48, type: "image/jpeg"), marker: marker)
        #expect(tagged.contains(subsequence: Array("Exif".utf8)) && tagged.contains(subsequence: Array(marker.utf8)))
        let jpeg = try world.upload("/v1/me/photo", files: [("photo", "me.jpg", tagged)])
        #expect(jpeg.status == 200)
        let served = try Self.publicBytes(world, try #require(jpeg.data?["photo_url"]?.stringValue))
        #expect(served.status == 200 && served.header("Content-Type") == "image/jpeg")
        #expect(!served.body.contains(subsequence: Array("Exif".utf8)), "no EXIF")
        #expect(!served.body.contains(subsequence: Array(marker.utf8)), "no description, no comment")
        #expect(!served.body.contains(subsequence: Array("GatehouseCam".utf8)))
        #expect(PhotoCodec.dimensions(served.body).map { [$0.width, $0.height] } == [64, 48], "small photos keep their size")

        // A 3000 × 2000 PNG comes back 1024 × 683, still a PNG; its stored type and hash are the new image's.
        let large = TinyImages.image(width: 3000, height: 2000, type: "image/png")
        let png = try world.upload("/v1/me/photo", files: [("photo", "big.png", large)])
        let url = try #require(png.data?["photo_url"]?.stringValue)
        let shrunk = try Self.publicBytes(world, url)
        #expect(shrunk.header("Content-Type") == "image/png")
        #expect(PhotoCodec.dimensions(shrunk.body).map { [$0.width, $0.height] } == [1024, 683])
        #expect(url.hasSuffix("/" + Digest.hex(Digest.sha256(shrunk.body)).prefix(FilesService.urlVersionLength)), "the URL names what is served")
        #expect(shrunk.body != large)

        // A tall WebP: its longest side is the height.
        let webp = try world.upload("/v1/me/photo", files: [("photo", "tall.webp", TinyImages.image(width: 600, height: 2400, type: "image/webp"))])
        let tall = try Self.publicBytes(world, try #require(webp.data?["photo_url"]?.stringValue))
        #expect(tall.header("Content-Type") == "image/webp")
        #expect(PhotoCodec.dimensions(tall.body).map { [$0.width, $0.height] } == [256, 1024])

        // A GIF becomes a PNG.
        let gif = try world.upload("/v1/me/photo", files: [("photo", "me.gif", TinyImages.gif)])
        let converted = try Self.publicBytes(world, try #require(gif.data?["photo_url"]?.stringValue))
        #expect(converted.header("Content-Type") == "image/png" && PhotoCodec.dimensions(converted.body).map { [$0.width, $0.height] } == [1, 1])

        // A JPEG cut short after its header (but with an end marker, so the sniffer takes it) does not decode.
        let broken = Array(tagged.prefix(tagged.count / 2)) + [0xFF, 0xD9]
        #expect(try world.upload("/v1/me/photo", files: [("photo", "broken.jpg", broken)]).problemCode == "files/unsupported-type")
    }

    @Test(arguments: TestDatabase.kinds)
    func uploadsAnHourAreCappedPerUser(_ kind: TestDatabaseKind) throws {
        let world = try World(
            kind, blobs: .database,
            settings: ["rate_limits": ["auth_per_minute_per_ip": 1000, "uploads_per_hour_per_user": 4], "files": ["max_bytes": 2048]])
        defer { world.server.stop() }
        let image = try #require(try world.upload("/v1/files", files: [("file", "a.png", TinyImages.png())]).data?["id"]?.stringValue)
        #expect(try world.upload("/v1/files", files: [("file", "b", [])]).status == 400, "a refused upload counts too")
        #expect(try world.upload("/v1/files", files: [("file", "big", Array(repeating: 7, count: 3000))]).status == 413, "and one too large")
        #expect(try world.upload("/v1/me/photo", files: [("photo", "p.png", TinyImages.png())]).status == 200)
        for (path, field) in [("/v1/files", "file"), ("/v1/me/photo", "photo")] {
            let capped = try world.upload(path, files: [(field, "c.png", TinyImages.png())])
            #expect(capped.status == 429 && capped.problemCode == "auth/too-many-requests")
            let retryAfter = try #require(capped.header("Retry-After").flatMap { Int($0) })
            #expect((1...3600).contains(retryAfter) && capped.json?["retry_after"] == .int(Int64(retryAfter)))
        }
        // A file chosen as the photo is decoded as an upload is, and counted as one.
        let chosen = try world.server.request("PATCH", "/v1/me", appKey: world.app.appKey, bearer: world.token, json: ["photo_file_id": .string(image)])
        #expect(chosen.status == 429 && chosen.problemCode == "auth/too-many-requests")
        // Another user of the app has their own hour.
        let other = try world.server.signUp(world.app, email: "grace@example.com")
        #expect(try world.upload("/v1/files", files: [("file", "a", [1])], token: other["access_token"]?.stringValue).status == 201)
        #expect(try world.get("/v1/files").data?.arrayValue?.count == 1)
    }

    @Test(arguments: TestDatabase.kinds)
    func quotasCapEachUsersFilesAndBytes(_ kind: TestDatabaseKind) throws {
        let world = try World(kind, blobs: .database, settings: ["files": ["max_files_per_user": 3, "max_bytes_per_user": 8192]])
        defer { world.server.stop() }
        let first = try #require(try world.upload("/v1/files", files: [("file", "a", Array(repeating: 1, count: 4000))]).data?["id"]?.stringValue)
        let bytes = try world.upload("/v1/files", files: [("file", "b", Array(repeating: 2, count: 4200))])
        #expect(bytes.status == 403 && bytes.problemCode == "files/quota-exceeded", "4000 + 4200 > 8192")
        #expect(try world.upload("/v1/files", files: [("file", "b", Array(repeating: 2, count: 4000))]).status == 201)
        #expect(try world.upload("/v1/me/photo", files: [("photo", "p.png", TinyImages.png())]).status == 200, "the photo is the third file")
        #expect(try world.upload("/v1/me/photo", files: [("photo", "q.png", TinyImages.png(width: 2, height: 2))]).status == 200, "a new photo replaces it")
        let count = try world.upload("/v1/files", files: [("file", "c", [3])])
        #expect(count.status == 403 && count.problemCode == "files/quota-exceeded")
        #expect(try world.get("/v1/files").data?.arrayValue?.count == 2, "nothing stored")
        // Room is made by deleting.
        #expect(try world.server.request("DELETE", "/v1/files/\(first)", appKey: world.app.appKey, bearer: world.token).status == 204)
        #expect(try world.upload("/v1/files", files: [("file", "c", [3])]).status == 201)
        // Another user has a quota of their own.
        let other = try world.server.signUp(world.app, email: "grace@example.com")
        #expect(try world.upload("/v1/files", files: [("file", "d", [4])], token: other["access_token"]?.stringValue).status == 201)
    }

    @Test(arguments: TestDatabase.kinds)
    func concurrentUploadsDoNotRacePastTheQuota(_ kind: TestDatabaseKind) throws {
        let world = try World(kind, blobs: .database, settings: ["files": ["max_files_per_user": 3]])
        defer { world.server.stop() }
        let statuses = Mutex<[Int]>([])
        DispatchQueue.concurrentPerform(iterations: 10) { index in
            let status = (try? world.upload("/v1/files", files: [("file", "f\(index)", [UInt8(index)])]).status) ?? 0
            statuses.withLock { $0.append(status) }
        }
        let all = statuses.withLock { $0 }
        #expect(all.filter { $0 == 201 }.count == 3 && all.filter { $0 == 403 }.count == 7, "\(all)")
        #expect(try world.server.gatehouse.database.query("SELECT id FROM files").count == 3)
    }

    @Test(arguments: TestDatabase.kinds)
    func publicFilesAreImagesOfThePublicTypes(_ kind: TestDatabaseKind) throws {
        let world = try World(kind, blobs: .database)
        defer { world.server.stop() }
        let text = try world.upload("/v1/files", fields: [("visibility", "public")], files: [("file", "page.png", Array("<html>".utf8))])
        #expect(text.status == 415 && text.problemCode == "files/unsupported-type")
        #expect(try world.upload("/v1/files", files: [("file", "page.html", Array("<html>".utf8))]).status == 201, "private: any type")
        #expect(try world.upload("/v1/files", fields: [("visibility", "public")], files: [("file", "a.gif", TinyImages.gif)]).status == 201)
        #expect(try world.server.request("PATCH", "/v1/admin/app", bearer: world.app.secretKey, json: ["files": ["public_types": ["image/png"]]]).status == 200)
        #expect(try world.upload("/v1/files", fields: [("visibility", "public")], files: [("file", "a.gif", TinyImages.gif)]).problemCode == "files/unsupported-type")
        #expect(try world.upload("/v1/files", fields: [("visibility", "public")], files: [("file", "a.png", TinyImages.png())]).status == 201)
        // Nor does choosing a private GIF as the photo make it public: the photo is a PNG made from it.
        let gif = try #require(try world.upload("/v1/files", files: [("file", "a.gif", TinyImages.gif)]).data?["id"]?.stringValue)
        let chosen = try world.server.request("PATCH", "/v1/me", appKey: world.app.appKey, bearer: world.token, json: ["photo_file_id": .string(gif)])
        #expect(chosen.status == 200)
        #expect(try world.get("/v1/files/\(gif)").data?["visibility"] == "private")
        #expect(try Self.publicBytes(world, try #require(chosen.data?["photo_url"]?.stringValue)).header("Content-Type") == "image/png")
    }

    /// A file chosen as the photo (`PATCH /v1/me` `photo_file_id`) is decoded as an uploaded photo
    /// is: the photo is a new image without metadata, at most 1024 px; the file stays as it was.
    @Test(arguments: TestDatabase.kinds)
    func aFileChosenAsThePhotoIsDecodedAndLeftAsItWas(_ kind: TestDatabaseKind) throws {
        let world = try World(kind, blobs: .database)
        defer { world.server.stop() }
        let marker = "GATEHOUSE-SECRET-PLACE-51.5N"
        let tagged = TinyImages.withEXIF(TinyImages.image(width: 2000, height: 1500, type: "image/jpeg"), marker: marker)
        let file = try #require(try world.upload("/v1/files", files: [("file", "holiday.jpg", tagged)]).data)
        let id = try #require(file["id"]?.stringValue)
        #expect(file["visibility"] == "private")

        func choose(_ id: String) throws -> TestResponse {
            try world.server.request("PATCH", "/v1/me", appKey: world.app.appKey, bearer: world.token, json: ["photo_file_id": .string(id)])
        }
        let chosen = try choose(id)
        #expect(chosen.status == 200 && chosen.data?["email"] != nil)
        let url = try #require(chosen.data?["photo_url"]?.stringValue)
        #expect(!url.contains(id), "the photo is a file of its own")
        let served = try Self.publicBytes(world, url)
        #expect(served.status == 200 && served.header("Content-Type") == "image/jpeg")
        #expect(!served.body.contains(subsequence: Array("Exif".utf8)), "no EXIF")
        #expect(!served.body.contains(subsequence: Array(marker.utf8)), "no description, no comment")
        #expect(!served.body.contains(subsequence: Array("GatehouseCam".utf8)))
        #expect(PhotoCodec.dimensions(served.body).map { [$0.width, $0.height] } == [1024, 768])

        // The chosen file is unchanged and still private; the photo is not listed among the files.
        let kept = try world.get("/v1/files/\(id)")
        #expect(kept.data?["visibility"] == "private" && kept.data?["url"] == nil && kept.data?["size"] == .int(Int64(tagged.count)))
        #expect(try world.get("/v1/files/\(id)/content").body == tagged)
        #expect(try world.get("/v1/files").data?.arrayValue?.compactMap { $0["id"]?.stringValue } == [id])

        // Choosing again replaces the photo made before; an image over 40 megapixels is refused.
        #expect(try choose(id).status == 200)
        #expect(try Self.publicBytes(world, url).status == 404)
        let bomb = try #require(try world.upload("/v1/files", files: [("file", "bomb.png", TinyImages.png(width: 50_000, height: 50_000))]).data?["id"]?.stringValue)
        let refused = try choose(bomb)
        #expect(refused.status == 415 && refused.problemCode == "files/unsupported-type")
    }

    /// The caps are app settings with their defaults, each bounded by the platform's ceiling.
    @Test(arguments: TestDatabase.kinds)
    func fileCapsAreSettingsBoundedByThePlatform(_ kind: TestDatabaseKind) throws {
        let world = try World(kind, blobs: .database)
        defer { world.server.stop() }
        let settings = try #require(try world.server.request("GET", "/v1/admin/app", bearer: world.app.secretKey).data)
        #expect(settings["rate_limits"]?["uploads_per_hour_per_user"] == 60)
        #expect(settings["files"]?["max_files_per_user"] == 200 && settings["files"]?["max_bytes_per_user"] == 104_857_600)
        #expect(settings["files"]?["public_types"] == .array(AppSettings.Files.allPhotoTypes.map { .string($0) }))
        let caps = world.server.gatehouse.configuration.platformCaps
        for (patch, field) in [
            (["rate_limits": ["uploads_per_hour_per_user": .int(caps.uploadsPerHourPerUser + 1)]] as JSON, "rate_limits.uploads_per_hour_per_user"),
            (["files": ["max_files_per_user": .int(caps.filesPerUser + 1)]], "files.max_files_per_user"),
            (["files": ["max_bytes_per_user": .int(caps.bytesPerUser + 1)]], "files.max_bytes_per_user"),
            (["files": ["public_types": ["text/html"]]], "files.public_types"),
            (["files": ["max_files": 3]], "files.max_files"),
        ] {
            let refused = try world.server.request("PATCH", "/v1/admin/app", bearer: world.app.secretKey, json: patch)
            #expect(refused.status == 400 && refused.problemCode == "request/validation-failed", "\(field)")
            #expect(refused.json?["errors"]?.arrayValue?.contains { $0["field"]?.stringValue == field } == true, "\(field): \(refused.json ?? .null)")
        }
        let accepted = try world.server.request(
            "PATCH", "/v1/admin/app", bearer: world.app.secretKey,
            json: ["rate_limits": ["uploads_per_hour_per_user": .int(caps.uploadsPerHourPerUser)], "files": ["max_files_per_user": 5]])
        #expect(accepted.status == 200)
        // The ceilings come from the environment, checked at start.
        #expect(AppSettings.PlatformCaps.read(["GATEHOUSE_MAX_FILES_PER_USER": "50"]).caps.filesPerUser == 50)
        do {
            _ = try Configuration.fromEnvironment(["GATEHOUSE_MAX_BYTES_PER_USER": "lots"])
            Issue.record("a ceiling that is not a number is refused")
        } catch {
            #expect(error.problems.contains { $0.hasPrefix("GATEHOUSE_MAX_BYTES_PER_USER must be") }, "\(error.problems)")
        }
    }
}

extension FilesAPITests {
    /// Decoding runs on the processor's own threads with a bounded queue: past it, 503
    /// `server/busy` at once. Two photos are held by named pipes nobody writes to yet (one on the
    /// photo thread, one waiting), so the third finds the queue full whatever the machine's speed.
    @Test func photosBeyondTheQueueAreRefusedBusyAtOnce() throws {
        let processor = PhotoProcessor(threads: 1, maxQueued: 1)
        defer { processor.shutdown() }
        let folder = NSTemporaryDirectory() + "gh-photo-\(UInt64.random(in: 0...UInt64.max))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let pipes = ["\(folder)/a", "\(folder)/b"]
        for pipe in pipes { #expect(mkfifo(pipe, 0o600) == 0) }
        let answers = Mutex<[String]>([])
        let group = DispatchGroup()
        for pipe in pipes {
            DispatchQueue.global().async(group: group) {
                let answer: String
                do { _ = try processor.process(path: pipe); answer = "stored" } catch let error as GatehouseError { answer = error.code.rawValue } catch { answer = "\(error)" }
                answers.withLock { $0.append(answer) }
            }
        }
        let deadline = Date().addingTimeInterval(30)
        while processor.inFlight < 2, Date() < deadline { usleep(1000) }
        #expect(processor.inFlight == 2)

        let photo = NSTemporaryDirectory() + "gh-photo-\(UInt64.random(in: 0...UInt64.max)).png"
        #expect(FileManager.default.createFile(atPath: photo, contents: Data(TinyImages.png())))
        defer { try? FileManager.default.removeItem(atPath: photo) }
        do {
            _ = try processor.process(path: photo)
            Issue.record("a third photo was admitted")
        } catch let error as GatehouseError {
            #expect(error.code == .busy && error.retryAfter == 1)
        }

        // Let the two go (empty: not images), then the queue has room again.
        for pipe in pipes {
            // Each on its own thread: opening a pipe to write waits for its reader, whichever goes first.
            DispatchQueue.global().async(group: group) {
                let fd = open(pipe, O_WRONLY)
                if fd >= 0 { close(fd) }
            }
        }
        #expect(group.wait(timeout: .now() + 30) == .success)
        #expect(answers.withLock { $0 } == ["files/unsupported-type", "files/unsupported-type"])
        #expect(try processor.process(path: photo).contentType == "image/png")
    }
}

extension Array where Element == UInt8 {
    func contains(subsequence needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= count else { return false }
        return (0...(count - needle.count)).contains { self[$0..<($0 + needle.count)].elementsEqual(needle) }
    }
}
