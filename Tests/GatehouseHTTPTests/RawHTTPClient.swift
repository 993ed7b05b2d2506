import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A response as read off the wire by `RawConnection`.
struct RawResponse {
    var status: Int
    var headers: [(name: String, value: String)]
    var body: [UInt8]

    func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    var text: String { String(decoding: body, as: UTF8.self) }
}

/// A blocking loopback TCP connection, so tests control every byte sent (malformed requests
/// included). Reads responses framed by Content-Length or chunked encoding only — enough for
/// libmicrohttpd's answers.
final class RawConnection {
    private let fd: Int32
    private var buffer: [UInt8] = []
    private(set) var isClosedByPeer = false

    /// Connects to 127.0.0.1:`port` (from `source`, another loopback address such as
    /// `127.0.0.2`, when given); `nil` if refused.
    ///
    /// `self.fd` is set only once connected: a failable initializer that returns `nil` after
    /// every stored property is set still runs `deinit`, which would close the descriptor a
    /// second time, and by then its number may belong to another test's socket.
    init?(port: UInt16, receiveTimeoutSeconds: Int = 5, source: String? = nil) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(source)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else {
                close(fd)
                return nil
            }
        }
        var timeout = timeval(tv_sec: receiveTimeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(fd)
            return nil
        }
        self.fd = fd
    }

    deinit { close(fd) }

    /// Sends every byte; `false` if the peer is gone.
    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { return false }
            offset += sent
        }
        return true
    }

    @discardableResult
    func send(_ text: String) -> Bool { send(Array(text.utf8)) }

    /// Reads one response; `nil` if the connection closed (or timed out) before a whole one.
    /// `toHead`: the answer to a HEAD, whose framing headers describe a body that is not sent.
    func readResponse(toHead: Bool = false) -> RawResponse? {
        guard let headerEnd = fill(untilFound: [13, 10, 13, 10]) else { return nil }
        let head = String(decoding: buffer[..<headerEnd], as: UTF8.self)
        buffer.removeFirst(headerEnd + 4)
        var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else { return nil }
        let headers = lines.compactMap { line -> (name: String, value: String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingSpaces())
        }
        var response = RawResponse(status: status, headers: headers, body: [])
        if toHead { return response }
        if let length = response.header("Content-Length").flatMap({ Int($0) }) {
            guard fill(count: length) else { return nil }
            response.body = Array(buffer[..<length])
            buffer.removeFirst(length)
        } else if response.header("Transfer-Encoding")?.lowercased() == "chunked" {
            while true {
                guard let lineEnd = fill(untilFound: [13, 10]) else { return nil }
                let sizeText = String(decoding: buffer[..<lineEnd], as: UTF8.self)
                buffer.removeFirst(lineEnd + 2)
                guard let size = Int(sizeText.split(separator: ";").first ?? "", radix: 16) else { return nil }
                guard fill(count: size + 2) else { return nil }
                response.body += buffer[..<size]
                buffer.removeFirst(size + 2)
                if size == 0 { break }
            }
        }
        return response
    }

    /// Whether the peer closes the connection (EOF or reset) within the receive timeout,
    /// discarding anything it sends first.
    func waitForClose() -> Bool {
        while true {
            var chunk = [UInt8](repeating: 0, count: 4096)
            let received = recv(fd, &chunk, chunk.count, 0)
            if received > 0 { continue }
            if received == 0 { return true }
            return errno == ECONNRESET
        }
    }

    /// Whether the peer closes the connection (EOF or reset) within `seconds`; anything it
    /// sends first is discarded. `false` when it is still open then.
    func peerCloses(within seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return false }
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, Int32(left * 1000) + 1) > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let received = recv(fd, &chunk, chunk.count, Int32(MSG_DONTWAIT))
            if received == 0 { return true }
            if received < 0, errno == ECONNRESET { return true }
        }
    }

    /// Whether the peer has sent something (or closed) within `seconds`; nothing is read.
    func readable(within seconds: Double) -> Bool {
        if !buffer.isEmpty { return true }
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, Int32(seconds * 1000)) > 0
    }

    private func fill(untilFound marker: [UInt8]) -> Int? {
        var searchFrom = 0
        while true {
            if buffer.count >= marker.count {
                for start in searchFrom...(buffer.count - marker.count)
                where buffer[start..<start + marker.count].elementsEqual(marker) {
                    return start
                }
                searchFrom = buffer.count - marker.count + 1
            }
            guard receiveMore() else { return nil }
        }
    }

    private func fill(count: Int) -> Bool {
        while buffer.count < count {
            guard receiveMore() else { return false }
        }
        return true
    }

    private func receiveMore() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 16384)
        let received = recv(fd, &chunk, chunk.count, 0)
        guard received > 0 else {
            isClosedByPeer = received == 0
            return false
        }
        buffer += chunk[..<received]
        return true
    }
}

extension StringProtocol {
    fileprivate func trimmingSpaces() -> String {
        String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    }
}

/// One request on a fresh connection.
func exchange(port: UInt16, _ raw: String) -> RawResponse? {
    guard let connection = RawConnection(port: port) else { return nil }
    connection.send(raw)
    return connection.readResponse()
}

func get(port: UInt16, _ target: String, headers: String = "") -> RawResponse? {
    exchange(port: port, "GET \(target) HTTP/1.1\r\nHost: localhost\r\n\(headers)\r\n")
}
