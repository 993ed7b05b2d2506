import Foundation
import GatehouseCore
import GatehouseCrypto
import GatehouseOutbound
import GatehouseProviders
import GatehouseSQL
import GatehouseTesting
import Testing

@Suite("Content sniffing, names and Content-Disposition")
struct ContentChecksTests {
    @Test func imagesAreRecognisedByTheirBytes() {
        #expect(ContentSniffer.sniff(TinyImages.png()) == "image/png")
        #expect(ContentSniffer.sniff(TinyImages.jpeg) == "image/jpeg")
        #expect(ContentSniffer.sniff(TinyImages.gif) == "image/gif")
        #expect(ContentSniffer.sniff(TinyImages.webp()) == "image/webp")
        #expect(ContentSniffer.sniff(Array("<html><script>alert(1)</script></html>".utf8)) == "application/octet-stream")
        #expect(ContentSniffer.sniff([]) == "application/octet-stream")
    }

    @Test func aGIFHeaderBeforeHTMLIsAGIF() {
        let polyglot = Array("GIF89a".utf8) + [1, 0, 1, 0, 0, 0, 0] + Array("<html><script>alert(document.cookie)</script></html>".utf8)
        #expect(ContentSniffer.sniff(polyglot) == "image/gif")
    }

    @Test func truncatedOrBrokenImagesAreNotImages() {
        #expect(ContentSniffer.sniff(Array(TinyImages.png().dropLast(12))) == "application/octet-stream")
        #expect(ContentSniffer.sniff(Array(TinyImages.jpeg.dropLast(2))) == "application/octet-stream")
        #expect(ContentSniffer.sniff(Array(TinyImages.webp().dropLast(1))) == "application/octet-stream")
        #expect(ContentSniffer.sniff(TinyImages.png(width: 0)) == "application/octet-stream")
        #expect(ContentSniffer.sniff(TinyImages.png(width: 1_000_000)) == "application/octet-stream")
        #expect(ContentSniffer.sniff(Array("GIF89a".utf8) + [0, 0, 0, 0, 0, 0, 0]) == "application/octet-stream")
    }

    @Test func namesAreSanitised() {
        #expect(FileName.sanitise("../../etc/passwd") == "passwd")
        #expect(FileName.sanitise("C:\\Users\\ada\\report.pdf") == "report.pdf")
        #expect(FileName.sanitise("a\u{0}b.txt") == "ab.txt")
        #expect(FileName.sanitise("invoice\u{202E}fdp.exe") == "invoicefdp.exe")
        #expect(FileName.sanitise("  ") == "file")
        #expect(FileName.sanitise("") == "file")
        #expect(FileName.sanitise(nil) == "file")
        #expect(FileName.sanitise("..") == "file")
        #expect(FileName.sanitise("dir/") == "file")
        let long = FileName.sanitise(String(repeating: "é", count: 5_000))
        #expect(long.utf8.count <= 255 && long.utf8.count == 254 && long.allSatisfy { $0 == "é" })
        #expect(FileName.sanitise(String(repeating: "x", count: 10_000)).utf8.count == 255)
    }

    @Test func contentDispositionCannotBeAbused() {
        #expect(FileName.contentDisposition(name: "photo.png", contentType: "image/png") == "inline; filename=\"photo.png\"; filename*=UTF-8''photo.png")
        #expect(
            FileName.contentDisposition(name: "a\"b%c.html", contentType: "application/octet-stream")
                == "attachment; filename=\"a_b_c.html\"; filename*=UTF-8''a%22b%25c.html")
        // A backslash is a path separator: only what follows it is the name.
        #expect(FileName.contentDisposition(name: "x\\y.txt", contentType: "text/plain").hasPrefix("attachment; filename=\"y.txt\""))
        #expect(
            FileName.contentDisposition(name: "résumé\r\nSet-Cookie: x=1.pdf", contentType: "application/octet-stream")
                == "attachment; filename=\"r_sum_Set-Cookie: x=1.pdf\"; filename*=UTF-8''r%C3%A9sum%C3%A9Set-Cookie%3A%20x%3D1.pdf")
    }
}

/// The blob stores, all three of them, on both databases.
@Suite("Blob stores")
struct BlobStoreTests {
    enum Kind: String, CaseIterable { case database, filesystem, s3 }

    /// `s3` runs against `GATEHOUSE_TEST_S3_URL` (`scripts/s3-test-server`), a bucket per test;
    /// without it those cases fail, unless `GATEHOUSE_TEST_SKIP_S3=1` leaves them out.
    static var kinds: [Kind] { ProcessInfo.processInfo.environment["GATEHOUSE_TEST_SKIP_S3"] == "1" ? [.database, .filesystem] : Kind.allCases }

    static var cases: [(TestDatabaseKind, Kind)] { TestDatabase.kinds.flatMap { db in kinds.map { (db, $0) } } }

    /// A fresh bucket on the test S3 server; nil (and a recorded issue) when there is none.
    static func s3Bucket() -> Configuration.S3Settings? {
        guard let endpoint = ProcessInfo.processInfo.environment["GATEHOUSE_TEST_S3_URL"], !endpoint.isEmpty else {
            Issue.record("GATEHOUSE_TEST_S3_URL is not set: start one with `export GATEHOUSE_TEST_S3_URL=$(scripts/s3-test-server)` (or set GATEHOUSE_TEST_SKIP_S3=1).")
            return nil
        }
        let settings = Configuration.S3Settings(
            endpoint: endpoint, bucket: "gh-test-" + Digest.hex(SecureRandom.bytes(6)), accessKeyID: "testing", secretAccessKey: "testing-secret")
        do {
            try store(settings).createBucket()
        } catch {
            Issue.record("cannot create a bucket on \(endpoint): \(error)")
            return nil
        }
        return settings
    }

    static func store(_ s3: Configuration.S3Settings) -> S3BlobStore {
        S3BlobStore(endpoint: s3.endpoint, bucket: s3.bucket, region: s3.region, accessKeyID: s3.accessKeyID, secretAccessKey: s3.secretAccessKey)
    }

    /// The keys in a test bucket (the test server does not check signatures, so a plain GET lists it).
    static func s3Keys(_ s3: Configuration.S3Settings) throws -> [String] {
        let response = try OutboundHTTPClient().get("\(s3.endpoint)/\(s3.bucket)?list-type=2")
        let text = String(decoding: response.body, as: UTF8.self)
        return text.components(separatedBy: "<Key>").dropFirst().map { String($0.prefix { $0 != "<" }) }
    }

    /// One folder for this test run's temporary files and filesystem blob stores, emptied when the
    /// run first uses it: what a run leaves behind is gone at the next one, not piled up.
    static let scratch: String = {
        let folder = NSTemporaryDirectory() + "gatehouse-files-tests/"
        try? FileManager.default.removeItem(atPath: folder)
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        return folder
    }()

    static func temporaryFile(_ bytes: [UInt8]) throws -> String {
        let path = scratch + "upload-" + Digest.hex(SecureRandom.bytes(6))
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    static func configure(_ kind: Kind) -> (inout Configuration) -> Void {
        { configuration in
            if kind == .filesystem {
                configuration.blobStorage = .filesystem(directory: scratch + "blobs-" + Digest.hex(SecureRandom.bytes(6)))
            }
            if kind == .s3, let s3 = s3Bucket() {
                configuration.blobStorage = .s3(s3)
            }
        }
    }

    @Test(arguments: cases)
    func putReadRangeAndDelete(database: TestDatabaseKind, kind: Kind) throws {
        let server = try TestServer(database, configure: Self.configure(kind))
        defer { server.stop() }
        let blobs: any BlobStore = kind == .database ? SQLBlobStore(database: server.gatehouse.database, chunkBytes: 1000) : server.gatehouse.blobs
        let bytes = (0..<2_500).map { UInt8(truncatingIfNeeded: $0 * 7) }
        let path = try Self.temporaryFile(bytes)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let key = try #require(BlobKey(parsing: "app_x/fil_y"))
        try blobs.put(key, contentsOf: path)
        let whole = try #require(try blobs.open(key))
        #expect(whole.size == 2_500)
        #expect(try whole.readAll() == bytes)
        whole.close()
        for range: Range<Int64> in [0..<1, 999..<1001, 1_500..<2_500, 2_400..<9_000] {
            let part = try #require(try blobs.open(key, range: range))
            let expected = Array(bytes[Int(range.lowerBound)..<Int(min(range.upperBound, 2_500))])
            #expect(part.size == Int64(expected.count))
            #expect(try part.readAll() == expected, "\(range)")
            part.close()
        }
        // Small reads cross chunk boundaries.
        let small = try #require(try blobs.open(key))
        var pieces: [UInt8] = []
        while case let piece = try small.read(upTo: 333), !piece.isEmpty { pieces += piece }
        #expect(pieces == bytes)
        try blobs.delete(key)
        #expect(try blobs.open(key) == nil)
        try blobs.delete(key)
    }

    /// A missing bucket stops the start; an unreachable store does not (sign-ins do not need it).
    @Test func theBucketIsCheckedAtStart() throws {
        guard Self.kinds.contains(.s3), let s3 = Self.s3Bucket() else { return }
        #expect(Self.store(s3).checkBucket() == .ok)
        var missing = s3
        missing.bucket = "gh-missing-" + Digest.hex(SecureRandom.bytes(6))
        guard case .refused(let reason) = Self.store(missing).checkBucket() else {
            Issue.record("a missing bucket is not refused")
            return
        }
        #expect(reason.contains(missing.bucket))
        #expect(throws: ConfigurationError.self) { try TestServer(.sqlite) { $0.blobStorage = .s3(missing) } }
        var closed = s3
        closed.endpoint = "http://127.0.0.1:9"
        guard case .unreachable = Self.store(closed).checkBucket() else {
            Issue.record("an endpoint nobody listens on is not unreachable")
            return
        }
        let server = try TestServer(.sqlite) { $0.blobStorage = .s3(closed) }
        server.stop()
    }

    /// Against a server that checks every SigV4 signature (`scripts/s3-test-server signed`): the
    /// store's requests are accepted (streamed puts, ranged reads, deletes), and the same
    /// requests signed with a wrong secret are refused.
    @Test func signaturesAreAcceptedByAServerThatChecksThem() throws {
        guard Self.kinds.contains(.s3) else { return }
        guard let signed = ProcessInfo.processInfo.environment["GATEHOUSE_TEST_S3_SIGNED"], case let parts = signed.split(separator: " "), parts.count == 3 else {
            Issue.record("GATEHOUSE_TEST_S3_SIGNED is not set: `export GATEHOUSE_TEST_S3_SIGNED=$(scripts/s3-test-server signed)` (or set GATEHOUSE_TEST_SKIP_S3=1).")
            return
        }
        let bucket = "gh-signed-" + Digest.hex(SecureRandom.bytes(6))
        let store = S3BlobStore(endpoint: String(parts[0]), bucket: bucket, region: "us-east-1", accessKeyID: String(parts[1]), secretAccessKey: String(parts[2]))
        let forged = S3BlobStore(endpoint: String(parts[0]), bucket: bucket, region: "us-east-1", accessKeyID: String(parts[1]), secretAccessKey: "not-the-secret")
        guard case .refused = forged.checkBucket() else {
            Issue.record("a wrong secret is not refused: this server does not check signatures")
            return
        }
        try store.createBucket()
        #expect(store.checkBucket() == .ok)
        let bytes = (0..<1_500_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }  // over 1 MiB: with 100-continue
        let path = try Self.temporaryFile(bytes)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let key = try #require(BlobKey(parsing: "app_signed/fil_one"))
        try store.put(key, contentsOf: path)
        #expect(throws: BlobStoreError.self) { try forged.put(key, contentsOf: path) }
        #expect(throws: BlobStoreError.self) { _ = try forged.open(key) }
        let reader = try #require(try store.open(key, range: 100_000..<1_450_000))
        #expect(try reader.readAll() == Array(bytes[100_000..<1_450_000]))
        reader.close()
        try store.delete(key)
        #expect(try store.open(key) == nil)
    }

    @Test func keysNeverBecomeOtherPaths() {
        for bad in ["", "/etc/passwd", "../x", "a/../b", "a//b", "a/", "A", "a.b", "a b", "a\u{0}b", String(repeating: "a", count: 201)] {
            #expect(BlobKey(parsing: bad) == nil, "\(bad)")
        }
        #expect(BlobKey(parsing: "app_abc/fil_def") != nil)
    }
}

/// FilesService below HTTP, on both databases and both blob stores.
@Suite("Files service")
struct FilesServiceTests {
    struct World {
        let server: TestServer
        let app: AppContext
        let appKey: String
        let user: UserID
        let other: UserID
        var files: FilesService { server.gatehouse.files }
        let origin = RequestOrigin(ip: "127.0.0.1", userAgent: "test")

        init(_ database: TestDatabaseKind, _ kind: BlobStoreTests.Kind, settings: JSON = ["name": "Files"], clock: any Clock = SystemClock()) throws {
            server = try TestServer(database, clock: clock, configure: BlobStoreTests.configure(kind))
            server.gatehouse.stopBackgroundWork()
            let created = try server.createApp(settings)
            appKey = created.appKey
            let appID = try #require(AppID(parsing: created.id))
            app = try #require(try server.gatehouse.directory.current(id: appID))
            user = try Self.userID(try server.signUp(created))
            other = try Self.userID(try server.signUp(created, email: "bob@example.com"))
        }

        static func userID(_ session: JSON) throws -> UserID {
            let raw = try #require(session["user"]?["id"]?.stringValue)
            return try #require(UserID(parsing: raw))
        }

        func incoming(_ bytes: [UInt8], name: String? = "a.bin") throws -> IncomingFile {
            IncomingFile(path: try BlobStoreTests.temporaryFile(bytes), size: Int64(bytes.count), sha256: Digest.sha256(bytes), name: name)
        }

        func upload(_ bytes: [UInt8], name: String? = "a.bin", visibility: FileVisibility = .private, user: UserID? = nil) throws -> StoredFile {
            try files.upload(app: app, user: user ?? self.user, session: nil, file: try incoming(bytes, name: name), visibility: visibility, origin: origin)
        }

        func blobExists(_ file: StoredFile) throws -> Bool { try server.gatehouse.blobs.open(file.blobKey) != nil }

        /// `PATCH /v1/me` `photo_file_id` below HTTP (names too, when given).
        @discardableResult
        func choosePhoto(_ fileID: String?, firstName: String?? = nil) throws -> User {
            try server.gatehouse.accounts.updateProfile(
                app: app, user: user, session: nil, firstName: firstName, lastName: nil, photo: try files.photoChange(app: app, user: user, session: nil, fileID: fileID, origin: origin),
                origin: origin
            ).0
        }
    }

    static func code(_ body: () throws -> Void) -> String? {
        do {
            try body()
            return nil
        } catch let error as GatehouseError {
            return error.code.rawValue
        } catch {
            return "\(error)"
        }
    }

    @Test(arguments: BlobStoreTests.cases)
    func uploadListGetContentAndDelete(database: TestDatabaseKind, kind: BlobStoreTests.Kind) throws {
        let world = try World(database, kind)
        defer { world.server.stop() }
        let gif = try world.upload(TinyImages.gif, name: "../cat.gif", visibility: .public)
        #expect(gif.name == "cat.gif" && gif.contentType == "image/gif" && gif.size == Int64(TinyImages.gif.count))
        #expect(gif.sha256 == Digest.hex(Digest.sha256(TinyImages.gif)))
        let url = try #require(world.files.url(app: world.app.id, gif))
        #expect(url == "\(TestServer.publicURL)/v1/apps/\(world.app.id.rawValue)/files/\(gif.id.rawValue)/\(gif.sha256.prefix(16))")
        let text = try world.upload(Array("hello".utf8), name: "notes.html")
        #expect(text.contentType == "application/octet-stream" && world.files.url(app: world.app.id, text) == nil)

        let (found, reader) = try world.files.content(app: world.app, user: world.user, id: text.id.rawValue)
        #expect(found == text)
        #expect(try reader.readAll() == Array("hello".utf8))
        reader.close()
        let (_, publicReader) = try world.files.publicContent(app: world.app.id, id: gif.id.rawValue, version: String(gif.sha256.prefix(16)))
        #expect(try publicReader.readAll() == TinyImages.gif)
        publicReader.close()
        // Private content is never public, a wrong version finds nothing.
        #expect(Self.code { _ = try world.files.publicContent(app: world.app.id, id: text.id.rawValue, version: String(text.sha256.prefix(16))) } == "request/not-found")
        #expect(Self.code { _ = try world.files.publicContent(app: world.app.id, id: gif.id.rawValue, version: "0000000000000000") } == "request/not-found")

        // Another user's file is 404, never 403.
        #expect(Self.code { _ = try world.files.file(app: world.app, user: world.other, id: text.id.rawValue) } == "request/not-found")
        #expect(Self.code { try world.files.delete(app: world.app, user: world.other, session: nil, id: text.id.rawValue, origin: world.origin) } == "request/not-found")
        #expect(Self.code { _ = try world.files.file(app: world.app, user: world.user, id: "../etc") } == "request/not-found")

        // Keyset pages, newest first.
        var more: [StoredFile] = []
        for index in 0..<3 { more.append(try world.upload([UInt8(index) + 1], name: "f\(index)")) }
        let first = try world.files.list(app: world.app, user: world.user, after: nil, limit: 2)
        let second = try world.files.list(app: world.app, user: world.user, after: first.next, limit: 2)
        let third = try world.files.list(app: world.app, user: world.user, after: second.next, limit: 2)
        let all = (first.files + second.files + third.files).map(\.id)
        #expect(Set(all) == Set(([gif, text] + more).map(\.id)) && all.count == 5)
        #expect(third.next == nil && third.files.count == 1)
        #expect(try world.files.list(app: world.app, user: world.other, after: nil, limit: 10).files.isEmpty)

        try world.files.delete(app: world.app, user: world.user, session: nil, id: text.id.rawValue, origin: world.origin)
        #expect(try !world.blobExists(text))
        #expect(Self.code { _ = try world.files.file(app: world.app, user: world.user, id: text.id.rawValue) } == "request/not-found")
        // The outbox's item finds the blob gone and is delivered all the same.
        try world.server.gatehouse.outboxWorker.runOnce()
        #expect(try world.server.gatehouse.store.outbox.statistics(now: world.server.clock.nowMillis()).queued == 0)
    }

    /// A blob is reserved before it is written and the reservation withdrawn with its row: a node
    /// that dies between the two leaves a blob that the reservation removes once due, not before.
    @Test(arguments: BlobStoreTests.cases)
    func aBlobWhoseRowNeverCommittedIsRemovedByItsReservation(database: TestDatabaseKind, kind: BlobStoreTests.Kind) throws {
        let clock = ManualClock()
        let world = try World(database, kind, clock: clock)
        defer { world.server.stop() }
        let kept = try world.upload(TinyImages.gif)
        while try world.server.gatehouse.outboxWorker.runOnce() > 0 {}  // the sign-ups' mail
        // What a node that died after the blob's write, before the row's commit, leaves behind:
        let key = StoredFile.blobKey(app: world.app.id, file: FileID.generate())
        _ = try world.server.gatehouse.store.app(world.app.id).outbox.enqueue(BlobDeletion.reservation(app: world.app.id, key: key, now: clock.nowMillis()), now: clock.nowMillis())
        try world.server.gatehouse.blobs.put(key, contentsOf: try BlobStoreTests.temporaryFile([1, 2, 3]))
        clock.advance(seconds: BlobDeletion.orphanAfterMillis / 1000 - 60)
        #expect(try world.server.gatehouse.outboxWorker.runOnce() == 0)
        #expect(try world.server.gatehouse.blobs.open(key) != nil)
        clock.advance(seconds: 120)
        #expect(try world.server.gatehouse.outboxWorker.runOnce() == 1, "the orphan's reservation only: the upload's was withdrawn")
        #expect(try world.server.gatehouse.blobs.open(key) == nil)
        #expect(try world.blobExists(kept))
    }

    @Test(arguments: TestDatabase.kinds)
    func badUploadsAreRefusedAndStoreNothing(database: TestDatabaseKind) throws {
        let world = try World(database, .filesystem, settings: ["name": "Files", "files": ["max_bytes": 2048, "photo_types": ["image/png"]]])
        defer { world.server.stop() }
        #expect(Self.code { _ = try world.upload([]) } == "request/validation-failed")
        #expect(Self.code { _ = try world.upload([UInt8](repeating: 1, count: 2049)) } == "request/payload-too-large")
        let photo = { (bytes: [UInt8]) in
            _ = try world.files.uploadPhoto(app: world.app, user: world.user, session: nil, file: try world.incoming(bytes, name: "p"), origin: world.origin)
        }
        #expect(Self.code { try photo(TinyImages.gif) } == "files/unsupported-type")
        #expect(Self.code { try photo(Array(TinyImages.png().dropLast(12))) } == "files/unsupported-type")
        #expect(Self.code { try photo(Array(TinyImages.jpeg.dropLast(2))) } == "files/unsupported-type")
        #expect(Self.code { try photo(Array("<svg onload=alert(1)>".utf8)) } == "files/unsupported-type")
        #expect(try world.files.list(app: world.app, user: world.user, after: nil, limit: 10).files.isEmpty)
        let folder = try #require({ if case .filesystem(let d) = world.server.gatehouse.configuration.blobStorage { d } else { nil } }())
        #expect(((try? FileManager.default.subpathsOfDirectory(atPath: folder)) ?? []).filter { !$0.hasPrefix("app_") || $0.contains("/") }.isEmpty)
    }

    @Test(arguments: BlobStoreTests.cases)
    func aFailedCommitLeavesNoBlob(database: TestDatabaseKind, kind: BlobStoreTests.Kind) throws {
        let world = try World(database, kind)
        defer { world.server.stop() }
        // A user of the app that does not exist: the unit of work throws after the blob was written.
        let ghost = UserID.generate()
        #expect(Self.code { _ = try world.upload(TinyImages.png(), user: ghost) } == "auth/session-revoked")
        let count = try world.server.gatehouse.database.query("SELECT COUNT(*) AS n FROM files").first?.int64("n")
        #expect(count == 0)
        switch world.server.gatehouse.configuration.blobStorage {
        case .database:
            #expect(try world.server.gatehouse.database.query("SELECT COUNT(*) AS n FROM blobs").first?.int64("n") == 0)
            #expect(try world.server.gatehouse.database.query("SELECT COUNT(*) AS n FROM blob_chunks").first?.int64("n") == 0)
        case .filesystem(let folder):
            let left = ((try? FileManager.default.subpathsOfDirectory(atPath: folder)) ?? []).filter { $0.contains("fil_") || $0.contains(".tmp-") }
            #expect(left.isEmpty, "\(left)")
        case .s3(let s3):
            #expect(try BlobStoreTests.s3Keys(s3).isEmpty)
        }
    }

    /// A photo made from a chosen file is written before `PATCH /v1/me`'s unit of work; a change
    /// refused after it (a bad name) leaves neither its row, nor its blob, nor its reservation.
    @Test(arguments: TestDatabase.kinds)
    func aRefusedProfileChangeLeavesNoPhotoMadeFromAFile(database: TestDatabaseKind) throws {
        let world = try World(database, .database)
        defer { world.server.stop() }
        let file = try world.upload(TinyImages.image(width: 40, height: 30, type: "image/png"), name: "me.png")
        func count(_ sql: SQL) throws -> Int64? { try world.server.gatehouse.database.query(sql).first?.int64("n") }
        let blobsBefore = try count("SELECT COUNT(*) AS n FROM blobs")
        let outboxBefore = try count("SELECT COUNT(*) AS n FROM outbox")
        #expect(Self.code { try world.choosePhoto(file.id.rawValue, firstName: "tab\tname") } == "request/validation-failed")
        #expect(try count("SELECT COUNT(*) AS n FROM files") == 1)
        #expect(try count("SELECT COUNT(*) AS n FROM blobs") == blobsBefore)
        #expect(try count("SELECT COUNT(*) AS n FROM outbox") == outboxBefore, "the reservation is withdrawn")
        #expect(try world.server.gatehouse.store.app(world.app.id).users.user(world.user)?.photoURL == nil)
        // The same choice with a good name commits both.
        let chosen = try world.choosePhoto(file.id.rawValue, firstName: "Ada")
        #expect(chosen.firstName == "Ada" && chosen.photoURL != nil)
        #expect(try count("SELECT COUNT(*) AS n FROM files") == 2)
        #expect(try count("SELECT COUNT(*) AS n FROM outbox") == outboxBefore)
    }

    @Test(arguments: TestDatabase.kinds)
    func tenantsAreIsolatedEvenWithCollidingIDs(database: TestDatabaseKind) throws {
        let world = try World(database, .database)
        defer { world.server.stop() }
        let otherApp = try world.server.createApp(["name": "Other"])
        let otherAppID = try #require(AppID(parsing: otherApp.id))
        let otherUser = try World.userID(try world.server.signUp(otherApp))
        let mine = try world.upload(TinyImages.png(), visibility: .public)
        // The same file id in the other app, for its own user.
        var theirs = mine
        theirs.userID = otherUser
        theirs.name = "theirs"
        theirs.blobKey = StoredFile.blobKey(app: otherAppID, file: mine.id)
        try world.server.gatehouse.store.app(otherAppID).files.insert(theirs)
        let scoped = world.server.gatehouse.store.app(otherAppID).files
        #expect(try scoped.file(mine.id, of: world.user) == nil)
        #expect(try scoped.file(mine.id, of: otherUser)?.name == "theirs")
        #expect(try world.server.gatehouse.store.app(world.app.id).files.file(mine.id, of: world.user)?.name == mine.name)
        #expect(try scoped.delete(mine.id, of: world.user) == nil)
        #expect(try scoped.deleteAll(of: world.user).isEmpty)
        #expect(try world.server.gatehouse.store.app(world.app.id).files.publicFile(mine.id)?.userID == world.user)
        // The schema refuses a row naming another app's user.
        var crossing = mine
        crossing.id = FileID.generate()
        crossing.blobKey = StoredFile.blobKey(app: otherAppID, file: crossing.id)
        #expect(throws: (any Error).self) { try scoped.insert(crossing) }
    }

    @Test(arguments: BlobStoreTests.cases)
    func photosReplaceEachOtherAndFilesCanBecomeThePhoto(database: TestDatabaseKind, kind: BlobStoreTests.Kind) throws {
        let world = try World(database, kind)
        defer { world.server.stop() }
        let (first, _) = try world.files.uploadPhoto(
            app: world.app, user: world.user, session: nil, file: try world.incoming(TinyImages.png(), name: nil), origin: world.origin)
        let firstURL = try #require(first.photoURL)
        let (second, _) = try world.files.uploadPhoto(
            app: world.app, user: world.user, session: nil, file: try world.incoming(TinyImages.jpeg, name: "me.jpg"), origin: world.origin)
        let secondURL = try #require(second.photoURL)
        #expect(firstURL != secondURL && secondURL.hasPrefix(TestServer.publicURL + "/v1/apps/"))
        // The first photo's row and blob are gone; photos are not listed as files.
        let firstID = String(firstURL.split(separator: "/").dropLast().last!)
        #expect(Self.code { _ = try world.files.publicContent(app: world.app.id, id: firstID, version: String(firstURL.split(separator: "/").last!)) } == "request/not-found")
        #expect(try world.server.gatehouse.blobs.open(try #require(BlobKey(parsing: world.app.id.rawValue + "/" + firstID))) == nil)
        #expect(try world.files.list(app: world.app, user: world.user, after: nil, limit: 10).files.isEmpty)

        // A private image file of the user gives the (public) photo; a text file cannot.
        let file = try world.upload(TinyImages.image(width: 8, height: 6, type: "image/webp"), name: "pic.webp")
        let text = try world.upload(Array("no".utf8))
        #expect(Self.code { try world.choosePhoto(text.id.rawValue) } == "files/unsupported-type")
        let mine = try world.upload(TinyImages.gif, user: world.other)
        #expect(Self.code { try world.choosePhoto(mine.id.rawValue) } == "request/not-found")
        // Names and photo change in one unit of work: a photo refused leaves the names as they
        // were; a change of both is one `user.updated` naming both.
        #expect(Self.code { try world.choosePhoto(text.id.rawValue, firstName: "Ada") } == "files/unsupported-type")
        #expect(try world.server.gatehouse.store.app(world.app.id).users.user(world.user)?.firstName == nil)
        let third = try world.choosePhoto(file.id.rawValue, firstName: "Ada")
        #expect(third.firstName == "Ada")
        let named = try world.server.gatehouse.database.query("SELECT data FROM events WHERE type = 'user.updated' AND user_id = \(world.user.rawValue)")
            .map { try $0.string("data") }.filter { $0.contains("first_name") }
        #expect(named.count == 1 && named.first?.contains("photo_url") == true)
        // The photo is a photo-purpose file made from it; the file stays private.
        let thirdURL = try #require(third.photoURL)
        let thirdID = String(thirdURL.split(separator: "/").dropLast().last!)
        let made = try #require(try world.files.publicFile(app: world.app.id, id: thirdID, version: String(thirdURL.split(separator: "/").last!)))
        #expect(made.purpose == .photo && made.id != file.id && third.photoURL == world.files.url(app: world.app.id, made))
        #expect(try world.files.file(app: world.app, user: world.user, id: file.id.rawValue).visibility == .private)
        #expect(try world.server.gatehouse.store.app(world.app.id).users.user(world.user)?.photoURL == third.photoURL)

        // Removing the photo deletes the photo made, keeps the chosen file; deleting the chosen
        // file leaves a photo made from it.
        let (cleared, _) = try world.files.removePhoto(app: world.app, user: world.user, session: nil, origin: world.origin)
        #expect(cleared.photoURL == nil)
        #expect(try world.blobExists(file) && !world.blobExists(made))
        let fourth = try world.choosePhoto(file.id.rawValue)
        try world.files.delete(app: world.app, user: world.user, session: nil, id: file.id.rawValue, origin: world.origin)
        #expect(try world.server.gatehouse.store.app(world.app.id).users.user(world.user)?.photoURL == fourth.photoURL)
        #expect(fourth.photoURL != nil)
    }

    /// Public content of an account pending deletion answers 404, and is served again once a
    /// sign-in restores the account.
    @Test(arguments: TestDatabase.kinds)
    func publicContentOfAnAccountPendingDeletionIsNotServed(database: TestDatabaseKind) throws {
        let world = try World(database, .database, settings: ["name": "Files", "deletion_grace_days": 3])
        defer { world.server.stop() }
        let gif = try world.upload(TinyImages.gif, visibility: .public)
        let version = String(gif.sha256.prefix(FilesService.urlVersionLength))
        let others = try world.upload(TinyImages.gif, visibility: .public, user: world.other)
        #expect(try world.files.publicFile(app: world.app.id, id: gif.id.rawValue, version: version) == gif)
        // The user's own deletion (an admin's is final, with no grace period).
        let session = try world.server.request("POST", "/v1/auth/signin", appKey: world.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"])
        let token = try #require(session.data?["access_token"]?.stringValue)
        #expect(try world.server.request("DELETE", "/v1/me", appKey: world.appKey, bearer: token).status == 204)
        #expect(Self.code { _ = try world.files.publicFile(app: world.app.id, id: gif.id.rawValue, version: version) } == "request/not-found")
        #expect(try world.files.publicFile(app: world.app.id, id: others.id.rawValue, version: version) == others, "another user's stays served")
        let restored = try world.server.request(
            "POST", "/v1/auth/signin", appKey: world.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"])
        #expect(restored.data?["is_restored"] == true)
        #expect(try world.files.publicFile(app: world.app.id, id: gif.id.rawValue, version: version) == gif)
    }

    @Test(arguments: TestDatabase.kinds)
    func anUnverifiedEmailIsRefusedWhenTheAppRequiresIt(database: TestDatabaseKind) throws {
        let world = try World(database, .database, settings: ["name": "Files", "require_verified_email": true])
        defer { world.server.stop() }
        #expect(Self.code { _ = try world.upload(TinyImages.png()) } == "auth/email-not-verified")
        #expect(Self.code { _ = try world.files.list(app: world.app, user: world.user, after: nil, limit: 10) } == "auth/email-not-verified")
        #expect(Self.code { _ = try world.files.removePhoto(app: world.app, user: world.user, session: nil, origin: world.origin) } == "auth/email-not-verified")
        #expect(try world.server.gatehouse.database.query("SELECT COUNT(*) AS n FROM files").first?.int64("n") == 0)
    }

    @Test(arguments: BlobStoreTests.cases)
    func deletingTheAccountRemovesItsFilesAndBlobs(database: TestDatabaseKind, kind: BlobStoreTests.Kind) throws {
        let world = try World(database, kind)
        defer { world.server.stop() }
        let file = try world.upload(TinyImages.gif)
        _ = try world.files.uploadPhoto(app: world.app, user: world.user, session: nil, file: try world.incoming(TinyImages.png()), origin: world.origin)
        let kept = try world.upload(Array("bob's".utf8), user: world.other)
        let keys = try world.server.gatehouse.database.query("SELECT blob_key FROM files WHERE user_id = \(world.user.rawValue)").map { try $0.string("blob_key") }
        #expect(keys.count == 2)
        try world.server.gatehouse.deletion.deleteByAdmin(app: world.app, id: world.user.rawValue)
        #expect(try world.server.gatehouse.database.query("SELECT COUNT(*) AS n FROM files WHERE user_id = \(world.user.rawValue)").first?.int64("n") == 0)
        // The rows went in the erasing transaction; the blobs go with the outbox's blob_delete items.
        #expect(try world.blobExists(file))
        while try world.server.gatehouse.outboxWorker.runOnce() > 0 {}
        for key in keys { #expect(try world.server.gatehouse.blobs.open(try #require(BlobKey(parsing: key))) == nil) }
        #expect(try world.blobExists(kept))
    }
}
