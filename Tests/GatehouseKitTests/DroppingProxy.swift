import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A loopback HTTP/1.1 proxy in front of the test server that loses answers on purpose: for the
/// first `dropCount` requests whose request line starts with `dropping`, it forwards the request,
/// reads the server's whole answer (so the server has done the work) and then closes the
/// client's connection without a byte, as a network that broke after sending would. Every other
/// answer is relayed with `Connection: close`, so no connection is ever reused and the client's
/// HTTP stack cannot retry on its own. One request per connection, `Content-Length` bodies only.
final class DroppingProxy: @unchecked Sendable {  // `dropsLeft` is touched only under `lock`
    let port: UInt16
    private let listener: Int32
    private let targetPort: UInt16
    private let dropping: String
    private let lock = NSLock()
    private let dropCount: Int
    private var dropsLeft: Int
    private var stopped = false

    struct Failure: Error, CustomStringConvertible { let description: String }

    init(targetPort: UInt16, dropping: String, dropCount: Int = 1) throws {
        self.targetPort = targetPort
        self.dropping = dropping
        self.dropCount = dropCount
        dropsLeft = dropCount
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, listen(fd, 64) == 0 else {
            close(fd)
            throw Failure(description: "proxy cannot listen: errno \(errno)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        listener = fd
        port = UInt16(bigEndian: address.sin_port)
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    /// Requests dropped so far.
    var dropped: Int { lock.withLock { dropCount - dropsLeft } }

    func stop() {
        lock.withLock { stopped = true }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if lock.withLock({ stopped }) { return }
                continue
            }
            Thread { [self] in serve(client) }.start()
        }
    }

    private func serve(_ client: Int32) {
        defer { close(client) }
        guard let request = readMessage(client, isResponse: false) else { return }
        let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(upstream) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = targetPort.bigEndian
        let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard connected == 0, writeAll(upstream, request), let response = readMessage(upstream, isResponse: true) else { return }
        let drop = String(decoding: request.prefix(dropping.utf8.count), as: UTF8.self) == dropping
            && lock.withLock { () -> Bool in
                guard dropsLeft > 0 else { return false }
                dropsLeft -= 1
                return true
            }
        if drop { return }  // the server answered; the client hears nothing
        _ = writeAll(client, withConnectionClose(response))
    }

    /// One message: headers, then `Content-Length` bytes of body.
    private func readMessage(_ fd: Int32, isResponse: Bool) -> [UInt8]? {
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16384)
        var headerEnd: Int?
        var bodyLength = 0
        while true {
            if let end = headerEnd, data.count >= end + bodyLength { return Array(data[..<(end + bodyLength)]) }
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { return headerEnd == nil ? nil : data }
            data += buffer[..<n]
            if headerEnd == nil, let range = findHeaderEnd(data) {
                headerEnd = range
                let head = String(decoding: data[..<range], as: UTF8.self).lowercased()
                for line in head.split(separator: "\r\n") where line.hasPrefix("content-length:") {
                    bodyLength = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) ?? 0
                }
            }
        }
    }

    private func findHeaderEnd(_ data: [UInt8]) -> Int? {
        guard data.count >= 4 else { return nil }
        for index in 0...(data.count - 4) where data[index] == 13 && data[index + 1] == 10 && data[index + 2] == 13 && data[index + 3] == 10 {
            return index + 4
        }
        return nil
    }

    private func withConnectionClose(_ response: [UInt8]) -> [UInt8] {
        guard let end = findHeaderEnd(response) else { return response }
        var lines = String(decoding: response[..<(end - 4)], as: UTF8.self).components(separatedBy: "\r\n")
        lines.removeAll { $0.lowercased().hasPrefix("connection:") }
        lines.append("Connection: close")
        return Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8) + response[end...]
    }

    private func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return false }
            offset += n
        }
        return true
    }
}
