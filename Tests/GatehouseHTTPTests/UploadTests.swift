import Dispatch
import Foundation
import GatehouseCrypto
import GatehouseHTTP
import GatehouseTesting
import Synchronization
import Testing

/// Streamed `multipart/form-data` uploads (`HeadDecision.readMultipart`) against the real server
/// on loopback: `TestResponder`'s `/upload` describes what it received, one line per field or file.
@Suite(.serialized)
struct UploadTests {
    static let boundary = "gatehouse-test-boundary-7MA4YWxkTrZu0gW"

    /// A spool directory of its own, so that a test sees exactly the files its server left.
    final class SpoolDirectory {
        let path: String
        init() throws {
            var template = Array((NSTemporaryDirectory() + "gatehouse-spool-XXXXXX").utf8CString)
            guard mkdtemp(&template) != nil else { throw TestFailure("mkdtemp failed") }
            path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }

        /// The plain files under it (the server writes in a private folder of its own inside).
        var files: [String] {
            ((try? FileManager.default.subpathsOfDirectory(atPath: path)) ?? []).filter { sub in
                var isFolder: ObjCBool = false
                return FileManager.default.fileExists(atPath: path + "/" + sub, isDirectory: &isFolder) && !isFolder.boolValue
            }
        }

        /// The folders directly in it.
        var folders: [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).filter { name in
                var isFolder: ObjCBool = false
                return FileManager.default.fileExists(atPath: path + "/" + name, isDirectory: &isFolder) && isFolder.boolValue
            }
        }

        /// Whether the directory empties within a few seconds (the server removes a spool file
        /// when libmicrohttpd reports the request complete, just after the answer is sent).
        func becomesEmpty() -> Bool {
            for _ in 0..<500 {
                if files.isEmpty { return true }
                usleep(10_000)
            }
            return files.isEmpty
        }
    }

    struct TestFailure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    enum Part {
        case field(String, String)
        case file(String, filename: String, contentType: String, [UInt8])
    }

    static func body(_ parts: [Part], closing: Bool = true) -> [UInt8] {
        var body: [UInt8] = []
        for part in parts {
            body += Array("--\(boundary)\r\n".utf8)
            switch part {
            case .field(let name, let value):
                body += Array("Content-Disposition: form-data; name=\"\(name)\"\r\n\r\n\(value)\r\n".utf8)
            case .file(let name, let filename, let contentType, let bytes):
                body += Array("Content-Disposition: form-data; name=\"\(name)\"; filename=\"\(filename)\"\r\nContent-Type: \(contentType)\r\n\r\n".utf8)
                body += bytes + Array("\r\n".utf8)
            }
        }
        if closing { body += Array("--\(boundary)--\r\n".utf8) }
        return body
    }

    static func head(_ path: String = "/upload", length: Int?, contentType: String = "multipart/form-data; boundary=\(boundary)") -> [UInt8] {
        let framing = length.map { "Content-Length: \($0)" } ?? "Transfer-Encoding: chunked"
        return Array("POST \(path) HTTP/1.1\r\nHost: h\r\nContent-Type: \(contentType)\r\n\(framing)\r\n\r\n".utf8)
    }

    static func post(port: UInt16, _ body: [UInt8], path: String = "/upload") -> RawResponse? {
        guard let connection = RawConnection(port: port) else { return nil }
        connection.send(head(path, length: body.count) + body)
        return connection.readResponse()
    }

    static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    /// SHA-256 by coreutils, not by us.
    static func sha256sum(_ bytes: [UInt8]) throws -> String {
        let path = NSTemporaryDirectory() + "gatehouse-upload-check-\(UUID().uuidString)"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let output = try ExternalProgram.run("/usr/bin/sha256sum", [path])
        return String(output.prefix(64))
    }

    func start(_ spool: SpoolDirectory, uploadLimit: Int = 64 * 1024, offloadThreads: Int = 0) throws -> (HTTPServer, TestResponder) {
        let responder = TestResponder(uploadLimit: uploadLimit)
        let server = try startServer(responder: responder) {
            $0.uploadSpoolDirectory = spool.path
            $0.offloadThreads = offloadThreads
        }
        return (server, responder)
    }

    @Test func aFieldAndAFileArriveWithTheSizeAndSHA256OfTheBytesSent() throws {
        let spool = try SpoolDirectory()
        let (server, responder) = try start(spool, uploadLimit: 1024 * 1024)
        defer { server.shutdown() }
        let data = Self.randomBytes(300_000)
        let response = try #require(Self.post(port: server.port, Self.body([
            .field("visibility", "public"), .file("file", filename: "photo.jpg", contentType: "image/jpeg", data),
        ])))
        #expect(response.status == 200)
        let sha = try Self.sha256sum(data)
        let lines = response.text.split(separator: "\n").map(String.init)
        #expect(lines.first == "field visibility=public")
        let prefix = Digest.hex(data.prefix(4))
        #expect(lines.dropFirst().first == "file file|photo.jpg|image/jpeg|300000|\(sha)|\(sha)|600|\(prefix)")
        #expect(responder.spoolsSeen.withLock { $0.allSatisfy { $0.hasPrefix(spool.path + "/gatehouse-spool-") && $0.contains("/gatehouse-upload-") } })
        #expect(spool.becomesEmpty(), "the spool file goes once the answer is sent")
    }

    /// The server spools in a private 0700 folder of its own, made at start and removed at stop;
    /// a start removes folders left by processes that are gone, once they are stale, and no other.
    @Test func spoolFilesLiveInAPrivateFolderThatTheServerRemoves() throws {
        let spool = try SpoolDirectory()
        func leftBehind(pid: Int32, minutesOld: Double) throws -> String {
            let folder = spool.path + "/gatehouse-spool-\(pid)-abcdef"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
            #expect(FileManager.default.createFile(atPath: folder + "/gatehouse-upload-00", contents: Data([1, 2, 3])))
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -minutesOld * 60)], ofItemAtPath: folder)
            return folder
        }
        // pid 2^22 + 1 is above Linux's largest pid: nobody runs under it.
        let dead = try leftBehind(pid: 4_194_305, minutesOld: 11)
        let deadButFresh = try leftBehind(pid: 4_194_306, minutesOld: 1)
        let alive = try leftBehind(pid: getppid(), minutesOld: 60)
        let (server, _) = try start(spool)
        #expect(!FileManager.default.fileExists(atPath: dead))
        #expect(FileManager.default.fileExists(atPath: deadButFresh) && FileManager.default.fileExists(atPath: alive))
        let own = try #require(spool.folders.first { $0.hasPrefix("gatehouse-spool-\(getpid())-") })
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: spool.path + "/" + own)[.posixPermissions] as? Int)
        #expect(mode == 0o700)
        server.shutdown()
        #expect(!FileManager.default.fileExists(atPath: spool.path + "/" + own))
    }

    @Test func curlsOwnMultipartIsReadAlike() throws {
        // An independent client builds the body (its own boundary, Expect: 100-continue, chunked too).
        let spool = try SpoolDirectory()
        let (server, _) = try start(spool, uploadLimit: 1024 * 1024)
        defer { server.shutdown() }
        let data = Self.randomBytes(400_000)
        let path = spool.path + "-payload.bin"
        try Data(data).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let sha = try Self.sha256sum(data)
        for extra in [[], ["-H", "Transfer-Encoding: chunked"]] {
            let output = try ExternalProgram.run(
                "/usr/bin/curl",
                ["-sS", "-F", "visibility=private", "-F", "file=@\(path);type=image/png;filename=me.png"] + extra
                    + ["http://127.0.0.1:\(server.port)/upload"])
            #expect(output == "field visibility=private\nfile file|me.png|image/png|400000|\(sha)|\(sha)|600|\(Digest.hex(data.prefix(4)))", "\(extra)")
        }
        #expect(spool.becomesEmpty())
    }

    @Test func anEmptyFileIsAcceptedAtThisLayer() throws {
        let spool = try SpoolDirectory()
        let (server, _) = try start(spool)
        defer { server.shutdown() }
        let response = try #require(Self.post(port: server.port, Self.body([.file("file", filename: "empty.txt", contentType: "text/plain", [])])))
        #expect(response.status == 200)
        let emptySHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        #expect(response.text == "file file|empty.txt|text/plain|0|\(emptySHA)|\(emptySHA)|600|")
        #expect(spool.becomesEmpty())
    }

    @Test func anOffloadedUploadStillFindsItsSpoolFile() throws {
        let spool = try SpoolDirectory()
        let (server, _) = try start(spool, offloadThreads: 2)
        defer { server.shutdown() }
        let data = Self.randomBytes(50_000)
        let response = try #require(Self.post(port: server.port, Self.body([.file("file", filename: "a.bin", contentType: "application/octet-stream", data)]), path: "/upload-offloaded"))
        #expect(response.status == 200)
        let sha = try Self.sha256sum(data)
        #expect(response.text.contains("|50000|\(sha)|\(sha)|600|"))
        #expect(spool.becomesEmpty())
    }

    @Test func aFileRenamedAwayByTheHandlerIsKept() throws {
        let spool = try SpoolDirectory()
        let (server, _) = try start(spool)
        defer { server.shutdown() }
        let data = Self.randomBytes(20_000)
        let response = try #require(Self.post(port: server.port, Self.body([.file("file", filename: "k", contentType: "x/y", data)]), path: "/upload-keep"))
        #expect(response.status == 200)
        // Once the request has ended (its spool files dealt with), the kept file must still be there.
        for _ in 0..<500 where server.requestsInFlight > 0 { usleep(10_000) }
        #expect(server.requestsInFlight == 0)
        #expect(spool.files.count == 1)
        #expect(FileManager.default.contents(atPath: response.text).map { Array($0) } == data)
    }

    @Test func aSpoolDirectoryGoneAfterStartIs503NotACrash() throws {
        let spool = try SpoolDirectory()
        let (server, _) = try start(spool)
        defer { server.shutdown() }
        try FileManager.default.removeItem(atPath: spool.path)
        let response = try #require(Self.post(port: server.port, Self.body([.file("file", filename: "f", contentType: "x/y", Array("abc".utf8))])))
        #expect(response.status == 503)
        #expect(response.text.isEmpty, "uploadFailed's default answer, not busy")
    }

    @Test func aServerWithoutAWritableSpoolDirectoryDoesNotStart() throws {
        #expect(throws: HTTPServer.StartError.self) {
            try startServer { $0.uploadSpoolDirectory = "/nonexistent/gatehouse-spool" }
        }
    }

    @Test func aDeclaredContentLengthOverTheLimitIsRefusedBeforeAnyBodyByte() throws {
        let spool = try SpoolDirectory()
        let (server, responder) = try start(spool, uploadLimit: 64 * 1024)
        defer { server.shutdown() }
        let connection = try #require(RawConnection(port: server.port))
        connection.send(Self.head(length: 10 * 1024 * 1024))
        let response = try #require(connection.readResponse())
        #expect(response.status == 413)
        #expect(response.text == "upload over \(MultipartForm(fileFields: ["file"], maxFileBytes: 64 * 1024).maxBodyBytes)")
        #expect(responder.respondCalls.load(ordering: .relaxed) == 0)
        #expect(spool.files.isEmpty)
    }

    @Test func aChunkedUploadGrowingPastTheLimitIsRefusedAndItsSpoolRemoved() throws {
        let spool = try SpoolDirectory()
        let (server, responder) = try start(spool, uploadLimit: 64 * 1024)
        defer { server.shutdown() }
        let connection = try #require(RawConnection(port: server.port))
        connection.send(Self.head(length: nil))
        let body = Self.body([.file("file", filename: "big.bin", contentType: "application/octet-stream", Self.randomBytes(300 * 1024))])
        var offset = 0
        while offset < body.count {
            let end = min(body.count, offset + 16 * 1024)
            connection.send(Array(String(end - offset, radix: 16).utf8) + [13, 10] + body[offset..<end] + [13, 10])
            offset = end
        }
        connection.send("0\r\n\r\n")
        let response = try #require(connection.readResponse())
        #expect(response.status == 413)
        #expect(response.text == "upload over \(64 * 1024)", "the file part passed its limit first")
        #expect(responder.respondCalls.load(ordering: .relaxed) == 0)
        #expect(spool.becomesEmpty())
    }

    @Test func aFileOverItsLimitInsideABodyWithinTheLimitIsRefused() throws {
        let spool = try SpoolDirectory()
        let (server, _) = try start(spool, uploadLimit: 64 * 1024)
        defer { server.shutdown() }
        // 70 KiB: over the file limit, under the body limit (which leaves room for framing).
        let response = try #require(Self.post(port: server.port, Self.body([.file("file", filename: "f", contentType: "x/y", Self.randomBytes(70 * 1024))])))
        #expect(response.status == 413)
        #expect(spool.becomesEmpty())
    }

    @Test func aFileOfExactlyTheLimitIsAccepted() throws {
        let spool = try SpoolDirectory()
        let (server, _) = try start(spool, uploadLimit: 64 * 1024)
        defer { server.shutdown() }
        let response = try #require(Self.post(port: server.port, Self.body([.file("file", filename: "f", contentType: "x/y", Self.randomBytes(64 * 1024))])))
        #expect(response.status == 200)
        #expect(response.text.contains("|65536|"))
    }

    @Test func aClientGoneMidUploadLeavesNoSpoolFile() throws {
        let spool = try SpoolDirectory()
        let (server, responder) = try start(spool, uploadLimit: 1024 * 1024)
        defer { server.shutdown() }
        let body = Self.body([.file("file", filename: "cut.bin", contentType: "application/octet-stream", Self.randomBytes(500_000))])
        do {
            let connection = try #require(RawConnection(port: server.port))
            connection.send(Self.head(length: body.count) + body.prefix(200_000))
            var appeared = false
            for _ in 0..<500 where !appeared {
                appeared = !spool.files.isEmpty
                if !appeared { usleep(10_000) }
            }
            #expect(appeared, "the part is being spooled")
        }  // the connection closes here, mid-body
        #expect(spool.becomesEmpty())
        #expect(responder.respondCalls.load(ordering: .relaxed) == 0)
    }

    @Test func twoPartsForTheFileFieldAreRefused() throws {
        let spool = try SpoolDirectory()
        let (server, responder) = try start(spool)
        defer { server.shutdown() }
        let response = try #require(Self.post(port: server.port, Self.body([
            .file("file", filename: "a.png", contentType: "image/png", Array("first".utf8)),
            .file("file", filename: "b.png", contentType: "image/png", Array("second".utf8)),
        ])))
        #expect(response.status == 400)
        #expect(response.text == "The field \"file\" holds more than one file.")
        #expect(responder.respondCalls.load(ordering: .relaxed) == 0)
        #expect(spool.becomesEmpty())
    }

    @Test func theBoundaryStringInsideTheDataIsData() throws {
        let spool = try SpoolDirectory()
        let (server, _) = try start(spool)
        defer { server.shutdown() }
        // Everything short of CRLF "--" boundary: the boundary without its CRLF, a CRLF "--" and
        // a prefix of the boundary, the closing marker without its CRLF.
        let tricky = Array("a--\(Self.boundary)\r\nb\r\n--\(Self.boundary.dropLast(3))\r\n--x\r\nc--\(Self.boundary)--\r\n\r\n-".utf8)
        let data = Self.randomBytes(10_000) + tricky + Self.randomBytes(10_000) + tricky
        let response = try #require(Self.post(port: server.port, Self.body([.file("file", filename: "t.bin", contentType: "application/octet-stream", data)])))
        #expect(response.status == 200)
        let sha = try Self.sha256sum(data)
        #expect(response.text.contains("|\(data.count)|\(sha)|\(sha)|"))
    }

    @Test func aBodyWithoutItsClosingBoundaryIsRefused() throws {
        let spool = try SpoolDirectory()
        let (server, responder) = try start(spool)
        defer { server.shutdown() }
        let response = try #require(Self.post(port: server.port, Self.body([.file("file", filename: "a", contentType: "x/y", Self.randomBytes(5000))], closing: false)))
        #expect(response.status == 400)
        #expect(response.text == "The multipart body ends before its closing boundary.")
        #expect(responder.respondCalls.load(ordering: .relaxed) == 0)
        #expect(spool.becomesEmpty())

        let noBoundaryAtAll = try #require(Self.post(port: server.port, Array("just some bytes".utf8)))
        #expect(noBoundaryAtAll.status == 400)
    }

    @Test func aOneMebibytePartHeaderIsRefusedNotACrash() throws {
        let spool = try SpoolDirectory()
        let (server, _) = try start(spool, uploadLimit: 4 * 1024 * 1024)
        defer { server.shutdown() }
        var body = Array("--\(Self.boundary)\r\nContent-Disposition: form-data; name=\"file\"; filename=\"".utf8)
        body += Array(repeating: UInt8(ascii: "a"), count: 1024 * 1024)
        body += Array("\"\r\n\r\ndata\r\n--\(Self.boundary)--\r\n".utf8)
        let response = try #require(Self.post(port: server.port, body))
        #expect(response.status == 400)
        #expect(response.text == "The multipart body is malformed.", "the post processor refused it, not the size limit")
        #expect(spool.becomesEmpty())
        #expect(try #require(get(port: server.port, "/hello")).status == 200, "the server is still up")
    }

    @Test func anotherContentTypeIsRefusedWith415() throws {
        let spool = try SpoolDirectory()
        let (server, responder) = try start(spool)
        defer { server.shutdown() }
        for contentType in ["application/json", "multipart/mixed; boundary=x", "application/x-www-form-urlencoded", "multipart/form-datax; boundary=x"] {
            let connection = try #require(RawConnection(port: server.port))
            connection.send(Self.head(length: 2, contentType: contentType) + Array("{}".utf8))
            let response = try #require(connection.readResponse())
            #expect(response.status == 415, "\(contentType)")
            #expect(response.text == "send multipart/form-data")
        }
        let missing = try #require(exchange(port: server.port, "POST /upload HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}"))
        #expect(missing.status == 415)
        let connection = try #require(RawConnection(port: server.port))
        connection.send(Self.head(length: 1, contentType: "multipart/form-data") + [UInt8(ascii: "x")])
        let noBoundary = try #require(connection.readResponse())
        #expect(noBoundary.status == 400)
        #expect(responder.respondCalls.load(ordering: .relaxed) == 0)
    }

    @Test func aFilenameWithDotDotIsJustDataHere() throws {
        let spool = try SpoolDirectory()
        let (server, _) = try start(spool)
        defer { server.shutdown() }
        let response = try #require(Self.post(port: server.port, Self.body([.file("file", filename: "../../etc/passwd", contentType: "text/plain", Array("root".utf8))])))
        #expect(response.status == 200)
        #expect(response.text.hasPrefix("file file|../../etc/passwd|text/plain|4|"))
        #expect(spool.becomesEmpty())
        #expect(FileManager.default.fileExists(atPath: "/etc/passwd"))
    }

    @Test func textFieldsAreCappedInSizeAndCount() throws {
        let spool = try SpoolDirectory()
        let (server, _) = try start(spool)
        defer { server.shutdown() }
        let long = try #require(Self.post(port: server.port, Self.body([.field("visibility", String(repeating: "p", count: 1025))])))
        #expect(long.status == 400)
        #expect(long.text == "The field \"visibility\" is longer than 1024 bytes.")
        let many = try #require(Self.post(port: server.port, Self.body((0..<17).map { .field("f\($0)", "v") })))
        #expect(many.status == 400)
        let twice = try #require(Self.post(port: server.port, Self.body([.field("a", "1"), .field("a", "2")])))
        #expect(twice.status == 400)
        let fine = try #require(Self.post(port: server.port, Self.body([.field("a", "1"), .field("b", "")])))
        #expect(fine.status == 200)
        #expect(fine.text == "field a=1\nfield b=")
    }

    @Test func manyConcurrentUploadsLeaveNoSpoolFiles() throws {
        let spool = try SpoolDirectory()
        let (server, _) = try start(spool, uploadLimit: 1024 * 1024)
        defer { server.shutdown() }
        let port = server.port
        let data = Self.randomBytes(200_000)
        let body = Self.body([.file("file", filename: "c.bin", contentType: "application/octet-stream", data)])
        let statuses = Mutex<[Int]>([])
        DispatchQueue.concurrentPerform(iterations: 48) { index in
            // Every third client gives up half-way.
            if index % 3 == 2 {
                let connection = RawConnection(port: port)
                connection?.send(Self.head(length: body.count) + body.prefix(100_000))
                return
            }
            let status = Self.post(port: port, body)?.status ?? 0
            statuses.withLock { $0.append(status) }
        }
        #expect(statuses.withLock { $0 } == Array(repeating: 200, count: 32))
        #expect(spool.becomesEmpty())
    }
}

/// Raw bodies spooled to a file while they arrive (`HeadDecision.spoolBody`, the NDJSON import):
/// `TestResponder`'s `/spool` describes the file as `/upload` describes a file part.
@Suite(.serialized)
struct SpooledBodyTests {
    typealias Spool = UploadTests.SpoolDirectory

    func start(_ spool: Spool, limit: Int, offloadThreads: Int = 0) throws -> (HTTPServer, TestResponder) {
        let responder = TestResponder(uploadLimit: limit)
        let server = try startServer(responder: responder) {
            $0.uploadSpoolDirectory = spool.path
            $0.offloadThreads = offloadThreads
        }
        return (server, responder)
    }

    static func head(_ path: String, length: Int?) -> [UInt8] {
        UploadTests.head(path, length: length, contentType: "application/x-ndjson")
    }

    @Test(arguments: ["/spool", "/spool-offloaded"])
    func theBodyIsWrittenToASpoolFileNotKeptInMemoryAndRemovedAfterTheAnswer(path: String) throws {
        let spool = try Spool()
        let (server, responder) = try start(spool, limit: 4 * 1024 * 1024, offloadThreads: 2)
        defer { server.shutdown() }
        let data = UploadTests.randomBytes(3_000_000)
        let connection = try #require(RawConnection(port: server.port))
        connection.send(Self.head(path, length: data.count) + data)
        let response = try #require(connection.readResponse())
        #expect(response.status == 200)
        let sha = try UploadTests.sha256sum(data)
        #expect(response.text == "file |-|application/x-ndjson|3000000|\(sha)|\(sha)|600|\(Digest.hex(data.prefix(4)))")
        #expect(responder.spoolsSeen.withLock { $0.count == 1 && $0.allSatisfy { $0.hasPrefix(spool.path + "/gatehouse-spool-") } })
        #expect(spool.becomesEmpty(), "the spool file goes once the answer is sent")
    }

    @Test func aChunkedBodyIsSpooledToo() throws {
        let spool = try Spool()
        let (server, _) = try start(spool, limit: 1024 * 1024)
        defer { server.shutdown() }
        let data = UploadTests.randomBytes(200_000)
        let connection = try #require(RawConnection(port: server.port))
        connection.send(Self.head("/spool", length: nil))
        var offset = 0
        while offset < data.count {
            let end = min(data.count, offset + 16 * 1024)
            connection.send(Array(String(end - offset, radix: 16).utf8) + [13, 10] + data[offset..<end] + [13, 10])
            offset = end
        }
        connection.send("0\r\n\r\n")
        let response = try #require(connection.readResponse())
        #expect(response.status == 200)
        #expect(response.text.contains("|200000|\(try UploadTests.sha256sum(data))|"))
        #expect(spool.becomesEmpty())
    }

    @Test func aDeclaredContentLengthOverTheLimitIs413BeforeAnyBodyByte() throws {
        let spool = try Spool()
        let (server, responder) = try start(spool, limit: 64 * 1024)
        defer { server.shutdown() }
        let connection = try #require(RawConnection(port: server.port))
        connection.send(Self.head("/spool", length: 64 * 1024 + 1))
        let response = try #require(connection.readResponse())
        #expect(response.status == 413)
        #expect(response.text == "upload over \(64 * 1024)")
        #expect(responder.respondCalls.load(ordering: .relaxed) == 0)
        #expect(spool.files.isEmpty)
    }

    @Test func aChunkedBodyGrowingPastTheLimitIs413AndItsSpoolRemoved() throws {
        let spool = try Spool()
        let (server, responder) = try start(spool, limit: 64 * 1024)
        defer { server.shutdown() }
        let connection = try #require(RawConnection(port: server.port))
        connection.send(Self.head("/spool", length: nil))
        let data = UploadTests.randomBytes(300 * 1024)
        var offset = 0
        while offset < data.count {
            let end = min(data.count, offset + 16 * 1024)
            connection.send(Array(String(end - offset, radix: 16).utf8) + [13, 10] + data[offset..<end] + [13, 10])
            offset = end
        }
        connection.send("0\r\n\r\n")
        let response = try #require(connection.readResponse())
        #expect(response.status == 413)
        #expect(response.text == "upload over \(64 * 1024)")
        #expect(responder.respondCalls.load(ordering: .relaxed) == 0)
        #expect(spool.becomesEmpty())
    }

    @Test func aBodyOfExactlyTheLimitAndAnEmptyBodyAreAccepted() throws {
        let spool = try Spool()
        let (server, _) = try start(spool, limit: 64 * 1024)
        defer { server.shutdown() }
        for size in [64 * 1024, 0] {
            let connection = try #require(RawConnection(port: server.port))
            connection.send(Self.head("/spool", length: size) + UploadTests.randomBytes(size))
            let response = try #require(connection.readResponse())
            #expect(response.status == 200)
            #expect(response.text.contains("|\(size)|"))
        }
        #expect(spool.becomesEmpty())
    }

    @Test func aClientGoneMidBodyLeavesNoSpoolFile() throws {
        let spool = try Spool()
        let (server, responder) = try start(spool, limit: 1024 * 1024)
        defer { server.shutdown() }
        do {
            let connection = try #require(RawConnection(port: server.port))
            connection.send(Self.head("/spool", length: 500_000) + UploadTests.randomBytes(200_000))
            var appeared = false
            for _ in 0..<500 where !appeared {
                appeared = !spool.files.isEmpty
                if !appeared { usleep(10_000) }
            }
            #expect(appeared, "the body is being spooled")
        }
        #expect(spool.becomesEmpty())
        #expect(responder.respondCalls.load(ordering: .relaxed) == 0)
    }
}
