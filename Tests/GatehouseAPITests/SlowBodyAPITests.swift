import Foundation
import GatehouseCore
import GatehouseTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Slow bodies through the whole server (API.md, "Tenants share one server safely"): a JSON body
/// late past its deadline, and an upload under the minimum rate after its grace, are answered 408
/// `request/timeout` as problem+json and their connection is closed. Limits scaled to 1 s.
@Suite("Slow request bodies")
struct SlowBodyAPITests {
    /// A loopback connection that sends what it is given and reads until the server closes.
    final class Wire {
        let fd: Int32

        init(port: UInt16) throws {
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else { throw CocoaError(.fileReadUnknown) }
        }

        deinit { close(fd) }

        @discardableResult
        func send(_ bytes: [UInt8]) -> Bool {
            bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count
        }

        func readable(within seconds: Double) -> Bool {
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            return poll(&descriptor, 1, Int32(seconds * 1000)) > 0
        }

        /// Everything the server sends until it closes (or 10 s pass).
        func readToEnd() -> String {
            var all: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let received = recv(fd, &chunk, chunk.count, 0)
                guard received > 0 else { break }
                all += chunk[..<received]
            }
            return String(decoding: all, as: UTF8.self)
        }

        /// Sends `bytes` in pieces every `pause` s until the server answers; the seconds that took, or nil.
        func trickle(_ bytes: [UInt8], piece: Int, pause: Double) -> Double? {
            let started = Date()
            var offset = 0
            while offset < bytes.count {
                let end = min(bytes.count, offset + piece)
                guard send(Array(bytes[offset..<end])) else { return Date().timeIntervalSince(started) }
                offset = end
                if offset < bytes.count, readable(within: pause) { return Date().timeIntervalSince(started) }
            }
            return nil
        }
    }

    func port(_ server: TestServer) throws -> UInt16 {
        try #require(UInt16(server.baseURL.split(separator: ":").last ?? ""))
    }

    func expectTimeoutProblem(_ answer: String) {
        #expect(answer.hasPrefix("HTTP/1.1 408 "), "\(answer.prefix(200))")
        #expect(answer.contains("Content-Type: application/problem+json"))
        #expect(answer.contains("Connection: close"))
        #expect(answer.contains("\"code\":\"request/timeout\"") || answer.contains("\"code\": \"request/timeout\""), "\(answer)")
    }

    @Test(arguments: TestDatabase.kinds)
    func aTrickledJSONBodyIsAnswered408RequestTimeout(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind) { $0.jsonBodyTimeoutSeconds = 1 }
        defer { server.stop() }
        let app = try server.createApp()
        let wire = try Wire(port: try port(server))
        let json = Array(#"{"email": "slow@example.com", "password": "correct horse battery"}"#.utf8)
        wire.send(Array("POST /v1/auth/signin HTTP/1.1\r\nHost: h\r\nX-App-Key: \(app.appKey)\r\nContent-Type: application/json\r\nContent-Length: \(json.count)\r\n\r\n".utf8))
        let waited = try #require(wire.trickle(json, piece: 1, pause: 0.1), "the whole body was taken")
        #expect(waited >= 0.9 && waited < 3, "answered after \(waited) s")
        expectTimeoutProblem(wire.readToEnd())
        // A prompt request is answered as ever.
        #expect(try server.request("GET", "/v1/app", appKey: app.appKey).status == 200)
    }

    @Test(arguments: TestDatabase.kinds)
    func anUploadUnderTheMinimumRateIsAnswered408RequestTimeout(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind) {
            $0.uploadGraceSeconds = 1
            $0.uploadMinimumBytesPerSecond = 16 * 1024
        }
        defer { server.stop() }
        let app = try server.createApp()
        let session = try server.signUp(app)
        let token = try #require(session["access_token"]?.stringValue)
        let boundary = "gatehouse-slow-boundary"
        let body = Array("--\(boundary)\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n".utf8)
            + [UInt8](repeating: 0x41, count: 200 * 1024) + Array("\r\n--\(boundary)--\r\n".utf8)
        let wire = try Wire(port: try port(server))
        wire.send(Array((
            "POST /v1/files HTTP/1.1\r\nHost: h\r\nX-App-Key: \(app.appKey)\r\nAuthorization: Bearer \(token)\r\n"
                + "Content-Type: multipart/form-data; boundary=\(boundary)\r\nContent-Length: \(body.count)\r\n\r\n").utf8))
        let waited = try #require(wire.trickle(body, piece: 1024, pause: 0.1), "the whole upload was taken")
        #expect(waited >= 0.9 && waited < 3, "answered after \(waited) s")
        expectTimeoutProblem(wire.readToEnd())
    }
}
