import Foundation
import Glibc
import Synchronization

/// A TCP server on a loopback port that accepts every connection and never answers: the
/// destination a hostile tenant points its webhooks at. With `greeting`, it writes that line first
/// and then stalls (an SMTP server that greets and says nothing more). Connections are held open
/// until ``stop()``.
public final class StallingServer: Sendable {
    public let port: UInt16
    private let listener: Int32
    private let held = Mutex<[Int32]>([])
    private let accepted = Atomic<Int>(0)
    private let stopped = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    public init(greeting: String? = nil) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw StallingServerError.socket(errno) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 512) == 0 else {
            close(fd)
            throw StallingServerError.socket(errno)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        port = UInt16(bigEndian: address.sin_port)
        let greetingBytes = greeting.map { Array(($0 + "\r\n").utf8) }
        let thread = Thread { [self] in
            while !stopped.load(ordering: .acquiring) {
                var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, 100) > 0 else { continue }
                let connection = accept(fd, nil, nil)
                guard connection >= 0 else { continue }
                if let greetingBytes { _ = greetingBytes.withUnsafeBytes { write(connection, $0.baseAddress, $0.count) } }
                held.withLock { $0.append(connection) }
                accepted.add(1, ordering: .relaxed)
            }
            finished.signal()
        }
        thread.name = "stalling-server"
        thread.start()
    }

    /// `http://127.0.0.1:<port>/<path>`.
    public func url(_ path: String = "") -> String { "http://127.0.0.1:\(port)/\(path)" }

    /// Connections accepted so far.
    public var connections: Int { accepted.load(ordering: .relaxed) }

    /// Closes every held connection and the listener.
    public func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        finished.wait()
        close(listener)
        for connection in held.withLock({ $0 }) { close(connection) }
    }
}

public enum StallingServerError: Error {
    case socket(Int32)
}
