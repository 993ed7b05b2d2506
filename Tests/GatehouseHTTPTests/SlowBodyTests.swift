import Foundation
@testable import GatehouseHTTP
import Testing

/// Slow request bodies (API.md, "Tenants share one server safely"): a JSON body must be in within
/// its deadline, an upload must keep a minimum average rate after its grace; otherwise the server
/// writes a 408 and closes the connection. libmicrohttpd's own timeout is an idle one, which a
/// client sending a byte now and then never reaches. The limits are scaled down here (1 s).
@Suite(.serialized)
struct SlowBodyTests {
    /// Sends `bytes` in pieces of `piece` every `pause` seconds until the server says something
    /// (or closes) before the last piece; returns how long that took, or nil if everything was sent.
    func trickle(_ bytes: [UInt8], piece: Int, pause: Double, on connection: RawConnection) -> Double? {
        let started = Date()
        var offset = 0
        while offset < bytes.count {
            let end = min(bytes.count, offset + piece)
            guard connection.send(Array(bytes[offset..<end])) else { return Date().timeIntervalSince(started) }
            offset = end
            if offset < bytes.count, connection.readable(within: pause) { return Date().timeIntervalSince(started) }
        }
        return nil
    }

    @Test func theDefaultsAreTenSecondsAndSixteenKiBPerSecond() {
        let defaults = HTTPServer.Configuration()
        #expect(defaults.jsonBodyTimeoutSeconds == 10)
        #expect(defaults.uploadGraceSeconds == 10)
        #expect(defaults.uploadMinimumBytesPerSecond == 16 * 1024)
        // The rules at those defaults, from the end of the headers (time 0), in milliseconds.
        let json = BodyRule.within(millis: 10_000)
        #expect(!json.isOverdue(since: 0, now: 9_900, bytes: 1))
        #expect(json.isOverdue(since: 0, now: 10_100, bytes: 1_000_000))
        let upload = BodyRule.atLeast(bytesPerSecond: 16 * 1024, graceMillis: 10_000)
        #expect(!upload.isOverdue(since: 0, now: 9_900, bytes: 0), "nothing is asked in the first 10 s")
        #expect(upload.isOverdue(since: 0, now: 10_100, bytes: 150 * 1024), "150 KiB in 10.1 s is under 16 KiB/s")
        #expect(!upload.isOverdue(since: 0, now: 10_100, bytes: 170 * 1024))
        #expect(!upload.isOverdue(since: 0, now: 600_000, bytes: 10 * 1024 * 1024), "a 10 MiB upload may take 10 minutes")
        #expect(upload.isOverdue(since: 0, now: 700_000, bytes: 10 * 1024 * 1024))
    }

    @Test func aTrickledJSONBodyIsAnswered408AndClosedAtItsDeadline() throws {
        // The idle timeout (10 s) is never reached: a byte comes every 0.1 s.
        let server = try startServer { $0.connectionTimeoutSeconds = 10; $0.jsonBodyTimeoutSeconds = 1 }
        defer { server.shutdown() }
        let connection = try #require(RawConnection(port: server.port))
        connection.send("POST /echo HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n")
        let waited = try #require(trickle(Array(repeating: UInt8(ascii: " "), count: 200), piece: 1, pause: 0.1, on: connection), "the whole body was taken")
        #expect(waited >= 0.9 && waited < 3, "answered after \(waited) s")
        let response = try #require(connection.readResponse())
        #expect(response.status == 408)
        #expect(response.header("Connection") == "close")
        #expect(response.header("X-Content-Type-Options") == "nosniff")
        #expect(connection.waitForClose())
        #expect(get(port: server.port, "/hello")?.status == 200, "the server carries on")
    }

    /// The deadline is the body's alone: a body in on time, a request without one and the next
    /// request of a kept-alive connection are not cut.
    @Test func aPromptBodyAndTheNextRequestOnTheConnectionAreNotCut() throws {
        let server = try startServer { $0.connectionTimeoutSeconds = 10; $0.jsonBodyTimeoutSeconds = 1 }
        defer { server.shutdown() }
        let connection = try #require(RawConnection(port: server.port))
        connection.send("POST /echo HTTP/1.1\r\nHost: h\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\nabc")
        usleep(500_000)
        connection.send("def")
        #expect(connection.readResponse()?.text == "abcdef")
        usleep(1_500_000)  // longer than the body deadline, between requests
        connection.send("GET /hello HTTP/1.1\r\nHost: h\r\n\r\n")
        #expect(connection.readResponse()?.status == 200)
        connection.send("POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n")
        #expect(connection.readResponse()?.status == 200)
        #expect(!connection.peerCloses(within: 1.5), "no body is awaited, nothing is cut")
    }

    /// A body allowed over 1 MiB (a bulk route, such as an NDJSON import) is timed like an upload:
    /// past the JSON deadline at a good rate it is taken; under the rate it is cut.
    @Test func aBulkBodyIsTimedLikeAnUpload() throws {
        let server = try startServer(responder: TestResponder(bodyLimit: 4 * 1024 * 1024)) {
            $0.connectionTimeoutSeconds = 10
            $0.jsonBodyTimeoutSeconds = 1
            $0.uploadGraceSeconds = 1
            $0.uploadMinimumBytesPerSecond = 16 * 1024
        }
        defer { server.shutdown() }
        let body = [UInt8](repeating: UInt8(ascii: "x"), count: 100 * 1024)
        let good = try #require(RawConnection(port: server.port))
        good.send("POST /echo HTTP/1.1\r\nHost: h\r\nContent-Type: application/x-ndjson\r\nContent-Length: \(body.count)\r\n\r\n")
        #expect(trickle(body, piece: 4096, pause: 0.1, on: good) == nil, "about 2.5 s at about 40 KiB/s is not cut")
        #expect(good.readResponse()?.body.count == body.count)
        let slow = try #require(RawConnection(port: server.port))
        slow.send("POST /echo HTTP/1.1\r\nHost: h\r\nContent-Type: application/x-ndjson\r\nContent-Length: \(body.count)\r\n\r\n")
        let waited = try #require(trickle(body, piece: 512, pause: 0.1, on: slow), "about 5 KiB/s is cut")
        #expect(waited >= 0.9 && waited < 3, "answered after \(waited) s")
        #expect(slow.readResponse()?.status == 408)
    }

    @Test func anUploadBelowTheMinimumRateIsCutAfterItsGraceAndLeavesNoSpoolFile() throws {
        let spool = try UploadTests.SpoolDirectory()
        let server = try startServer(responder: TestResponder(uploadLimit: 1024 * 1024)) {
            $0.uploadSpoolDirectory = spool.path
            $0.connectionTimeoutSeconds = 10
            $0.uploadGraceSeconds = 1
            $0.uploadMinimumBytesPerSecond = 16 * 1024
        }
        defer { server.shutdown() }
        let body = UploadTests.body([.file("file", filename: "big.bin", contentType: "application/octet-stream", UploadTests.randomBytes(256 * 1024))])
        let connection = try #require(RawConnection(port: server.port))
        connection.send(UploadTests.head(length: body.count))
        // About 10 KiB/s: under the minimum once the grace is over.
        let waited = try #require(trickle(body, piece: 1024, pause: 0.1, on: connection), "the whole upload was taken")
        #expect(waited >= 0.9 && waited < 3, "answered after \(waited) s")
        let response = try #require(connection.readResponse())
        #expect(response.status == 408)
        #expect(connection.waitForClose())
        #expect(spool.becomesEmpty(), "the partial spool file goes with the request")
    }

    @Test func anUploadAtAGoodRatePassesTheGraceAndIsAccepted() throws {
        let spool = try UploadTests.SpoolDirectory()
        let server = try startServer(responder: TestResponder(uploadLimit: 1024 * 1024)) {
            $0.uploadSpoolDirectory = spool.path
            $0.connectionTimeoutSeconds = 10
            $0.uploadGraceSeconds = 1
            $0.uploadMinimumBytesPerSecond = 16 * 1024
        }
        defer { server.shutdown() }
        let data = UploadTests.randomBytes(160 * 1024)
        let body = UploadTests.body([.file("file", filename: "ok.bin", contentType: "application/octet-stream", data)])
        let connection = try #require(RawConnection(port: server.port))
        connection.send(UploadTests.head(length: body.count))
        // About 40 KiB/s for about 4 s: well past the grace, above the minimum.
        let started = Date()
        #expect(trickle(body, piece: 4096, pause: 0.1, on: connection) == nil, "cut while sending at a good rate")
        #expect(Date().timeIntervalSince(started) > 1.5)
        let response = try #require(connection.readResponse())
        #expect(response.status == 200)
        #expect(response.text.contains("|\(data.count)|\(try UploadTests.sha256sum(data))|"))
    }
}
