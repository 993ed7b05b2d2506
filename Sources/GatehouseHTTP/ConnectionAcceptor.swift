import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The thread that accepts connections and gives each to libmicrohttpd (`handOver`, which calls
/// `MHD_add_connection`: it hands the connection to the worker of index `descriptor % threads`, or
/// the next one with room).
///
/// libmicrohttpd's own workers each poll the listen socket, and whichever wakes first takes the
/// connection. A worker then serves its connections one request at a time, so the first worker
/// to wake gets a run of connections and keeps them: measured with 64 keep-alive connections on
/// 16 workers, one worker took more than twice its share of the CPU while two took none, and
/// those runs' p99 was twice the evenly spread ones'. Descriptors are handed out lowest first, so
/// the connections of a burst spread evenly (ADR 0024).
///
/// At `connectionLimit` open connections it stops accepting until one closes, leaving new ones
/// in the listen backlog, as libmicrohttpd's own accept does. A connection counts from the
/// moment its worker takes it, so the connections accepted in the few microseconds before can
/// exceed the limit; libmicrohttpd closes any beyond one more per worker.
final class ConnectionAcceptor: Sendable {
    /// A new connection's socket, its peer's address and the address's length.
    typealias HandOver = @Sendable (Int32, UnsafePointer<sockaddr>, socklen_t) -> Void

    private let listenSocket: Int32
    private let handOver: HandOver
    private let connections: ConnectionGuard
    private let connectionLimit: Int
    private let stopping = Atomic<Bool>(false)
    private let exited = DispatchSemaphore(value: 0)

    /// `listenSocket` stays open (the caller closes it after `MHD_stop_daemon`). `handOver` owns
    /// the socket it is given.
    init(listenSocket: Int32, connections: ConnectionGuard, connectionLimit: Int, handOver: @escaping HandOver) {
        self.listenSocket = listenSocket
        self.handOver = handOver
        self.connections = connections
        self.connectionLimit = max(1, connectionLimit)
    }

    func start() {
        let thread = Thread { [self] in
            run()
            exited.signal()
        }
        thread.name = "gatehouse-accept"
        thread.start()
    }

    /// Stops accepting (new connections are refused from now on) and waits for the thread.
    /// Call once, after `start`.
    func stop() {
        stopping.store(true, ordering: .releasing)
        // Stops the socket listening, so connections are refused instead of waiting in the
        // backlog, and wakes the thread's poll.
        _ = Glibc.shutdown(listenSocket, Int32(SHUT_RDWR))
        exited.wait()
    }

    private func run() {
        while !stopping.load(ordering: .acquiring) {
            if connections.openCount >= connectionLimit {
                usleep(10_000)
                continue
            }
            // The socket is non-blocking (libmicrohttpd made it); the timeout bounds how late a
            // stop is seen should the shutdown not wake the poll.
            var ready = pollfd(fd: listenSocket, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, 250) > 0 else { continue }
            acceptWaiting()
        }
    }

    /// Accepts the connections waiting in the backlog, while there is room for them.
    private func acceptWaiting() {
        while !stopping.load(ordering: .relaxed), connections.openCount < connectionLimit {
            var address = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let client = withUnsafeMutablePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    accept(listenSocket, $0, &length)
                }
            }
            guard client >= 0 else {
                switch errno {
                case EINTR, ECONNABORTED:
                    continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    usleep(10_000)  // out of descriptors or memory: leave the rest in the backlog a while
                    return
                default:
                    return  // EAGAIN: the backlog is empty; EINVAL: the socket was shut down
                }
            }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { handOver(client, $0, length) }
            }
        }
    }
}
