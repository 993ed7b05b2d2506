import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The clients that share one connection limit: an IPv4 address, or an IPv6 /64 (one host or
/// home network is usually given a whole /64, so counting single IPv6 addresses limits nothing).
/// An IPv4-mapped IPv6 address (a dual-stack listener's IPv4 client) is its IPv4 address.
struct ConnectionBucket: Hashable, Sendable {
    private enum Prefix: Hashable {
        case v4(UInt32)
        case v6(UInt64)
    }

    private let prefix: Prefix

    /// The bucket of a peer address, or nil for a family other than IPv4 and IPv6.
    init?(_ address: UnsafePointer<sockaddr>) {
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            let ip = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
            self.init(bytes: withUnsafeBytes(of: ip) { Array($0) })
        case AF_INET6:
            let ip = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
            self.init(bytes: withUnsafeBytes(of: ip) { Array($0) })
        default:
            return nil
        }
    }

    /// The bucket of an IP literal (`"192.0.2.1"`, `"2001:db8::1"`), or nil if it is none.
    init?(address: String) {
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, address, &v4) == 1 {
            self.init(bytes: withUnsafeBytes(of: v4) { Array($0) })
        } else if inet_pton(AF_INET6, address, &v6) == 1 {
            self.init(bytes: withUnsafeBytes(of: v6) { Array($0) })
        } else {
            return nil
        }
    }

    /// `bytes`: 4 (IPv4) or 16 (IPv6) in network order.
    private init?(bytes: [UInt8]) {
        func number<T: FixedWidthInteger>(_ slice: ArraySlice<UInt8>) -> T { slice.reduce(0) { $0 << 8 | T($1) } }
        switch bytes.count {
        case 4:
            prefix = .v4(number(bytes[0..<4]))
        case 16:
            // ::ffff:a.b.c.d — its first 64 bits are zero, so as a /64 every IPv4 client of a
            // dual-stack listener would share one bucket.
            if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
                prefix = .v4(number(bytes[12..<16]))
            } else {
                prefix = .v6(number(bytes[0..<8]))
            }
        default:
            return nil
        }
    }
}

/// One open connection, from libmicrohttpd's connection-started notification to its
/// connection-closed one (kept in the connection's `socket_context`).
final class ConnectionRecord: Sendable {
    /// The connection's socket. Only `ConnectionGuard` uses it, under its lock, and only while the
    /// record is registered: libmicrohttpd closes the socket after the closed notification, which
    /// unregisters the record under the same lock, so the number is never another socket's.
    let socket: Int32
    let bucket: ConnectionBucket?
    /// The peer's address as text (``BindAddress/text(of:)``), formatted once for all the
    /// connection's requests.
    let remoteAddress: String
    /// When (monotonic milliseconds) the connection began waiting for a request's headers; 0
    /// while a request whose headers are in is being handled.
    let waitingForHeadersSince: Atomic<Int64>

    init(socket: Int32, bucket: ConnectionBucket?, remoteAddress: String = "", now: Int64) {
        self.socket = socket
        self.bucket = bucket
        self.remoteAddress = remoteAddress
        self.waitingForHeadersSince = Atomic(now)
    }

    /// The body being read, under its time rule; nil while no body is awaited.
    private let body = Mutex<BodyClock?>(nil)
    /// Body bytes received of the request being read (the access handler adds, the sweep reads).
    private let bodyBytes = Atomic<Int64>(0)

    /// The access handler has the request's headers.
    func headersReceived() { waitingForHeadersSince.store(0, ordering: .relaxed) }

    /// A request ended; the next one's headers are awaited from now.
    func requestEnded(now: Int64) {
        body.withLock { $0 = nil }
        waitingForHeadersSince.store(now, ordering: .relaxed)
    }

    /// The request's body is awaited from `now` under `rule`; `request` is what the answer to a
    /// body that comes too slowly is made for.
    func bodyStarted(_ rule: BodyRule, request: HTTPRequest, now: Int64) {
        bodyBytes.store(0, ordering: .relaxed)
        body.withLock { $0 = BodyClock(rule: rule, started: now, request: request) }
    }

    /// Body bytes arrived.
    func bodyReceived(_ count: Int) { bodyBytes.add(Int64(count), ordering: .relaxed) }

    /// The whole body is in: false when the sweep has cut the connection already (it answered,
    /// so nothing more may be queued).
    func bodyEnded() -> Bool {
        body.withLock { clock in
            defer { clock = nil }
            return clock?.cut != true
        }
    }

    /// When the body has come too slowly by `now`: marks it cut and returns its request.
    fileprivate func bodyOverdue(now: Int64) -> HTTPRequest? {
        body.withLock { clock -> HTTPRequest? in
            guard let current = clock, !current.cut, current.rule.isOverdue(since: current.started, now: now, bytes: bodyBytes.load(ordering: .relaxed))
            else { return nil }
            clock?.cut = true
            return current.request
        }
    }
}

/// How fast a request's body must arrive, counted from the end of its headers.
public enum BodyRule: Sendable, Equatable {
    /// The whole body within `millis` (JSON routes: 10 s).
    case within(millis: Int64)
    /// After `graceMillis`, at least `bytesPerSecond` on average since the body began (uploads:
    /// 16 KiB/s after 10 s).
    case atLeast(bytesPerSecond: Int64, graceMillis: Int64)

    /// Whether a body begun at `since` with `bytes` in is too slow at `now`.
    func isOverdue(since: Int64, now: Int64, bytes: Int64) -> Bool {
        let elapsed = now - since
        switch self {
        case .within(let millis):
            return millis > 0 && elapsed > millis
        case .atLeast(let rate, let grace):
            return rate > 0 && elapsed > grace && bytes * 1000 < rate * elapsed
        }
    }

    /// How often the sweep must look for this rule to be kept within a quarter of its time.
    var checkMillis: Int64 {
        switch self {
        case .within(let millis): return millis
        case .atLeast(let rate, let grace): return rate > 0 ? grace : 0
        }
    }
}

/// A body being awaited.
private struct BodyClock {
    let rule: BodyRule
    let started: Int64
    let request: HTTPRequest
    /// The sweep has answered 408 and shut the connection down.
    var cut = false
}

/// What libmicrohttpd 0.9.75 cannot do itself: a connection limit per `ConnectionBucket` (its own
/// per-IP limit counts single addresses), and a total deadline for a request's headers (its
/// connection timeout is an idle timeout, so one header line every few seconds kept a connection
/// open forever).
///
/// The deadline is enforced by `sweep`, run periodically off the worker threads: it
/// `shutdown(2)`s the socket of every connection that has waited too long for its headers. The
/// worker's poll loop then reads end-of-file and closes the connection the ordinary way
/// (request-completed and connection-closed notifications included); shutting down, unlike
/// closing, leaves the descriptor to libmicrohttpd.
final class ConnectionGuard: Sendable {
    /// Connections per bucket; 0: no limit.
    let perClientLimit: Int
    /// The header deadline in milliseconds; 0: none.
    let headerTimeoutMillis: Int64
    /// The time rules of request bodies: `HeadDecision.readBody` and `.readMultipart`.
    let jsonBodyRule: BodyRule
    let uploadBodyRule: BodyRule
    /// The bytes of the answer to a body that comes too slowly (HTTP/1.1, `Connection: close`).
    private let timeoutAnswer: @Sendable (HTTPRequest) -> [UInt8]

    private struct State {
        var open: [ObjectIdentifier: ConnectionRecord] = [:]
        var perBucket: [ConnectionBucket: Int] = [:]
    }

    private let state = Mutex(State())

    init(
        perClientLimit: Int, headerTimeoutMillis: Int64, jsonBodyRule: BodyRule = .within(millis: 0),
        uploadBodyRule: BodyRule = .atLeast(bytesPerSecond: 0, graceMillis: 0),
        timeoutAnswer: @escaping @Sendable (HTTPRequest) -> [UInt8] = { _ in [] }
    ) {
        self.perClientLimit = max(0, perClientLimit)
        self.headerTimeoutMillis = max(0, headerTimeoutMillis)
        self.jsonBodyRule = jsonBodyRule
        self.uploadBodyRule = uploadBodyRule
        self.timeoutAnswer = timeoutAnswer
    }

    /// The shortest time a sweep must watch (a quarter of it between sweeps), 0 when nothing is timed.
    var shortestDeadlineMillis: Int64 {
        [headerTimeoutMillis, jsonBodyRule.checkMillis, uploadBodyRule.checkMillis].filter { $0 > 0 }.min() ?? 0
    }

    /// The accept-policy check: whether a client of `bucket` may open one more connection.
    func mayAccept(_ bucket: ConnectionBucket?) -> Bool {
        guard perClientLimit > 0, let bucket else { return true }
        return state.withLock { $0.perBucket[bucket, default: 0] } < perClientLimit
    }

    /// Registers a started connection. Two workers may both have let a bucket's last slot pass
    /// `mayAccept`; the one over the limit is shut down here, so the count is exact.
    func opened(socket: Int32, bucket: ConnectionBucket?, remoteAddress: String = "", now: Int64) -> ConnectionRecord {
        let record = ConnectionRecord(socket: socket, bucket: bucket, remoteAddress: remoteAddress, now: now)
        state.withLock { state in
            state.open[ObjectIdentifier(record)] = record
            guard let bucket else { return }
            let count = state.perBucket[bucket, default: 0] + 1
            state.perBucket[bucket] = count
            if perClientLimit > 0, count > perClientLimit, socket >= 0 {
                _ = shutdown(socket, Int32(SHUT_RDWR))
            }
        }
        return record
    }

    /// Unregisters a closed connection (before libmicrohttpd closes its socket).
    func closed(_ record: ConnectionRecord) {
        state.withLock { state in
            guard state.open.removeValue(forKey: ObjectIdentifier(record)) != nil, let bucket = record.bucket else { return }
            let count = state.perBucket[bucket, default: 1] - 1
            state.perBucket[bucket] = count > 0 ? count : nil
        }
    }

    /// Shuts down every connection that has waited longer than the deadline for a request's
    /// headers, and every one whose body comes too slowly (`jsonBodyRule`, `uploadBodyRule`)
    /// after writing it a 408 answer; returns how many.
    ///
    /// The answer is written here, on the socket, because libmicrohttpd 0.9.75 cannot queue a
    /// response while a body is being read. Nothing else writes then (a `100 Continue` goes out
    /// right after the headers); the access handler learns of the cut at the body's end
    /// (`ConnectionRecord.bodyEnded`) and queues nothing more.
    @discardableResult
    func sweep(now: Int64) -> Int {
        var overdue: [(ConnectionRecord, HTTPRequest)] = []
        let cut = state.withLock { state in
            var cut = 0
            for record in state.open.values {
                let since = record.waitingForHeadersSince.load(ordering: .relaxed)
                if headerTimeoutMillis > 0, since > 0, now - since > headerTimeoutMillis {
                    if record.socket >= 0 { _ = shutdown(record.socket, Int32(SHUT_RDWR)) }
                    record.waitingForHeadersSince.store(0, ordering: .relaxed)  // once is enough
                    cut += 1
                } else if let request = record.bodyOverdue(now: now) {
                    overdue.append((record, request))
                }
            }
            return cut
        }
        guard !overdue.isEmpty else { return cut }
        // Made outside the lock (the responder may log); written under it, to a record still
        // open, so the descriptor is still that connection's.
        let answers = overdue.map { ($0.0, timeoutAnswer($0.1)) }
        state.withLock { state in
            for (record, answer) in answers where state.open[ObjectIdentifier(record)] != nil && record.socket >= 0 {
                answer.withUnsafeBytes { _ = send(record.socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
                _ = shutdown(record.socket, Int32(SHUT_RDWR))
            }
        }
        return cut + answers.count
    }

    /// Open connections of `bucket` (for tests).
    func count(_ bucket: ConnectionBucket) -> Int {
        state.withLock { $0.perBucket[bucket, default: 0] }
    }

    /// Monotonic milliseconds, never 0.
    static func nowMillis() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return max(1, Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000)
    }
}

/// The thread that runs `ConnectionGuard.sweep` while the server runs (header and body deadlines).
final class HeaderDeadlineSweeper: Sendable {
    private let connections: ConnectionGuard
    private let interval: Double
    private let wake = DispatchSemaphore(value: 0)
    private let exited = DispatchSemaphore(value: 0)
    private let running = Atomic<Bool>(false)

    init(_ connections: ConnectionGuard) {
        self.connections = connections
        // A quarter of the shortest deadline, at most 250 ms: a connection is cut at most that late.
        self.interval = min(0.25, Double(connections.shortestDeadlineMillis) / 4000)
    }

    func start() {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let thread = Thread { [self] in
            while wake.wait(timeout: .now() + interval) == .timedOut {
                connections.sweep(now: ConnectionGuard.nowMillis())
            }
            exited.signal()
        }
        thread.name = "gatehouse-header-deadline"
        thread.start()
    }

    /// Stops the thread and waits for it; safe to call more than once or without `start`.
    func stop() {
        guard running.exchange(false, ordering: .acquiringAndReleasing) else { return }
        wake.signal()
        exited.wait()
    }
}
