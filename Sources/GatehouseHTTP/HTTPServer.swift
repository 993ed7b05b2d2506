import CMicroHTTPD
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An HTTP/1.1 server on libmicrohttpd: an internal poll event loop with a pool of
/// worker threads, each calling the `HTTPResponder` synchronously.
public final class HTTPServer: @unchecked Sendable {
    // @unchecked: every stored property is immutable or behind `lifecycle: Mutex`. The
    // libmicrohttpd threads reach the server only through `context` (a Sendable final class
    // passed to C as an unretained pointer), which `self` keeps alive until `MHD_stop_daemon`
    // has joined those threads (in `shutdown()`, also run by `deinit`). The compiler cannot
    // see through that C boundary, hence unchecked.

    /// How the server listens and the limits it enforces.
    public struct Configuration: Sendable {
        /// The IP address to bind: `"127.0.0.1"`, `"0.0.0.0"` (all IPv4), `"::1"`, or `"::"`
        /// (all addresses, IPv6 and IPv4). Host names are not resolved.
        public var host: String = "127.0.0.1"
        /// The TCP port; 0 picks an ephemeral port (read it back from `HTTPServer.port`).
        public var port: UInt16 = 8080
        /// Worker threads. Handlers block on database and network calls, so this is above the
        /// core count. Each worker runs its own event loop over the connections it accepted,
        /// so a blocked handler also delays those connections.
        public var threadCount: Int = max(8, 4 * HTTPServer.coreCount)
        /// Total concurrent connections; more wait in the listen backlog until one closes.
        public var connectionLimit: Int = 1024
        /// Concurrent connections from one client — an IPv4 address, or an IPv6 /64 (a host or
        /// network is usually given a whole /64) — more are refused at accept. 0: no limit.
        public var perIPConnectionLimit: Int = 256
        /// Idle time after which libmicrohttpd closes a connection (slow or stalled clients,
        /// idle keep-alive).
        public var connectionTimeoutSeconds: Int = 30
        /// Total time a connection may take to send a request's headers, from its accept (or
        /// the end of its previous request) to the blank line; then it is closed without an
        /// answer. `connectionTimeoutSeconds` alone is an idle timeout, which a client sending one
        /// header line every few seconds never reaches. Checked about four times a second (at
        /// least every `headerTimeoutSeconds / 4`). 0: no deadline.
        public var headerTimeoutSeconds: Double = 30
        /// Total time a `HeadDecision.readBody` body (the JSON routes; a limit over 1 MiB, a bulk
        /// route, is timed like an upload instead) may take to arrive, from the
        /// end of its request's headers to its last byte. Past it the server writes a 408
        /// (`HTTPResponder.requestTimeout`, `Connection: close`) and closes the connection — a
        /// client trickling one byte just under the idle timeout kept a worker's connection for
        /// as long as it liked. 0: no deadline.
        public var jsonBodyTimeoutSeconds: Double = 10
        /// A `HeadDecision.readMultipart` body (uploads) gets this long from the end of its
        /// headers before `uploadMinimumBytesPerSecond` applies.
        public var uploadGraceSeconds: Double = 10
        /// From `uploadGraceSeconds` on, an upload whose bytes so far, averaged over the time since
        /// its headers ended, fall below this rate is answered 408 and closed as above. 0: no minimum.
        public var uploadMinimumBytesPerSecond: Int = 16 * 1024
        /// Memory per connection for libmicrohttpd's buffers; bounds the request line and
        /// headers. Requests too big for it are answered by libmicrohttpd itself, not by the
        /// responder. 32 KiB holds a request at both `maxURLBytes` and `maxHeaderBytes`, with room
        /// for libmicrohttpd's record of each header. libmicrohttpd zeroes all of it before each
        /// request of a kept-alive connection: at 64 KiB that `memset` was about a tenth of the
        /// server's CPU under a `/healthz` load.
        public var connectionMemoryLimit: Int = 32 * 1024
        /// The listen backlog.
        public var listenBacklog: Int = 1024
        /// Header fields (sum of name and value bytes) above this go to
        /// `HTTPResponder.headerTooLarge` (431) instead of `head`. Keep it well below
        /// `connectionMemoryLimit` so that our own answer, not libmicrohttpd's, is sent.
        public var maxHeaderBytes: Int = 16 * 1024
        /// Request targets (path and query, in bytes as sent) longer than this go to
        /// `HTTPResponder.uriTooLong` (414) instead of `head`.
        public var maxURLBytes: Int = 8 * 1024
        /// A chunked body that grows past the limit from `HTTPResponder.head` is answered with
        /// `bodyTooLarge` only once the client has sent its last chunk (libmicrohttpd 0.9.75
        /// cannot queue a response in the middle of a body). Until then the server discards
        /// what arrives, buffering nothing; past this many discarded bytes it closes the
        /// connection without an answer instead. 2 MiB lets a client that sent, say, a 1 MiB
        /// password in chunks read why it was refused.
        public var maxDiscardedBodyBytes: Int = 2 * 1024 * 1024
        /// Threads that answer offloaded requests (`HeadDecision.readBody(limit:offload:)`)
        /// while their connection is suspended, so a handler that waits long does not hold a
        /// worker and its other connections. 0: offloaded requests are answered on the worker.
        public var offloadThreads: Int = 0
        /// Offloaded requests that may wait for an offload thread, holding no thread; more are
        /// answered with `HTTPResponder.busy` at once.
        public var offloadQueueLimit: Int = 256
        /// Threads that answer requests offloaded with `waitsOnNetwork` (handlers that wait for
        /// another server), a pool apart from `offloadThreads`. 0: such requests use the
        /// offload threads when they also ask for `offload`, else the worker.
        public var networkOffloadThreads: Int = 0
        /// Requests that may wait for a network offload thread; more are answered `busy`.
        public var networkOffloadQueueLimit: Int = 256
        /// How long `shutdown()` waits for requests in flight before closing everything.
        /// Offloaded requests are not cut short: queued ones are answered `busy`, running ones
        /// are waited for (libmicrohttpd cannot stop with a connection suspended).
        public var shutdownGracePeriodSeconds: Double = 10
        /// Where `HeadDecision.readMultipart` routes write the file parts of uploads, and `spoolBody` routes their bodies, while they
        /// arrive: in a private folder the server makes there when it starts (``SpoolFolder``,
        /// mode 0700), files `gatehouse-upload-*`, mode 0600, removed when their request ends. The
        /// system's temporary directory (`TMPDIR`, else `/tmp`) by default; `start()` fails if
        /// it is not a writable directory.
        public var uploadSpoolDirectory: String = HTTPServer.systemTemporaryDirectory
        /// Let libmicrohttpd print its diagnostics to stderr (off in production).
        public var logLibraryErrors: Bool = false

        /// The defaults above.
        public init() {}
    }

    /// Why `start()` failed.
    public struct StartError: Error, CustomStringConvertible, Sendable {
        /// What went wrong, for the operator.
        public let description: String
    }

    /// The configuration the server was created with.
    public let configuration: Configuration
    private let context: ServerContext
    private let lifecycle = Mutex<Lifecycle>(.idle)
    private let sweeper: HeaderDeadlineSweeper?
    private let boundPort = Atomic<UInt16>(0)

    /// Creates a server; nothing listens until `start()`.
    public init(configuration: Configuration, responder: any HTTPResponder) {
        self.configuration = configuration
        self.context = ServerContext(
            responder: responder,
            maxHeaderBytes: configuration.maxHeaderBytes,
            maxURLBytes: configuration.maxURLBytes,
            maxDiscardedBodyBytes: configuration.maxDiscardedBodyBytes,
            offloadPool: configuration.offloadThreads > 0
                ? OffloadPool(threadCount: configuration.offloadThreads, queueLimit: configuration.offloadQueueLimit) : nil,
            networkPool: configuration.networkOffloadThreads > 0
                ? OffloadPool(threadCount: configuration.networkOffloadThreads, queueLimit: configuration.networkOffloadQueueLimit) : nil,
            connections: ConnectionGuard(
                perClientLimit: configuration.perIPConnectionLimit,
                headerTimeoutMillis: Self.millis(configuration.headerTimeoutSeconds),
                jsonBodyRule: .within(millis: Self.millis(configuration.jsonBodyTimeoutSeconds)),
                uploadBodyRule: .atLeast(
                    bytesPerSecond: Int64(max(0, configuration.uploadMinimumBytesPerSecond)),
                    graceMillis: max(1, Self.millis(configuration.uploadGraceSeconds))),
                timeoutAnswer: { responder.requestTimeout($0).closingWireBytes() }))
        self.sweeper = context.connections.shortestDeadlineMillis > 0 ? HeaderDeadlineSweeper(context.connections) : nil
    }

    deinit {
        shutdown()
    }

    /// Binds and starts serving. Throws `StartError` if the address is not an IP literal or
    /// cannot be bound (in use, not permitted), or if the server was already started.
    public func start() throws {
        try lifecycle.withLock { lifecycle in
            guard case .idle = lifecycle else {
                throw StartError(description: "HTTP server was already started")
            }
            var status = stat()
            guard stat(configuration.uploadSpoolDirectory, &status) == 0, status.st_mode & S_IFMT == S_IFDIR,
                access(configuration.uploadSpoolDirectory, W_OK | X_OK) == 0
            else {
                throw StartError(description: "the upload spool directory \(configuration.uploadSpoolDirectory) is not a writable directory")
            }
            try context.spool.create(in: configuration.uploadSpoolDirectory)
            let daemon: OpaquePointer
            do { daemon = try startDaemon() } catch {
                context.spool.remove()
                throw error
            }
            sweeper?.start()
            let port = gatehouse_mhd_bound_port(daemon)
            boundPort.store(port != 0 ? port : configuration.port, ordering: .releasing)
            lifecycle = .running(DaemonHandle(daemon: daemon))
        }
    }

    /// The port actually bound (useful with port 0), or 0 before `start()`.
    public var port: UInt16 {
        boundPort.load(ordering: .acquiring)
    }

    /// Requests whose headers reached the responder and whose response has not been fully
    /// sent (or aborted) yet.
    public var requestsInFlight: Int {
        context.inFlight.load(ordering: .relaxed)
    }

    /// Stops gracefully: stops accepting (new connections are refused), lets requests in
    /// flight finish for up to `shutdownGracePeriodSeconds`, then closes every connection.
    ///
    /// Safe to call from any thread and more than once; a concurrent second call returns
    /// once the first has finished. Must not be called from a responder method.
    public func shutdown() {
        lifecycle.withLock { lifecycle in
            guard case .running(let handle) = lifecycle else {
                lifecycle = .stopped
                sweeper?.stop()
                context.offloadPool?.drain()  // its threads exit
                context.networkPool?.drain()
                return
            }
            lifecycle = .stopped
            // Needs MHD_USE_ITC. The listen socket stays open until MHD_stop_daemon (worker
            // threads may still hold it), but shutdown(2) stops it listening right away, so
            // new connections are refused instead of waiting in the backlog.
            let listenSocket = MHD_quiesce_daemon(handle.daemon)
            if listenSocket >= 0 {
                _ = Glibc.shutdown(listenSocket, Int32(SHUT_RDWR))
            }
            context.offloadPool?.drain()
            context.networkPool?.drain()
            let deadline = Self.monotonicSeconds() + configuration.shutdownGracePeriodSeconds
            while context.inFlight.load(ordering: .acquiring) > 0, Self.monotonicSeconds() < deadline {
                usleep(5_000)
            }
            MHD_stop_daemon(handle.daemon)
            context.spool.remove()  // every request has ended: their spool files are gone already
            sweeper?.stop()  // after the stop: slow clients are still cut during the grace period
            if listenSocket >= 0 {
                close(listenSocket)
            }
        }
    }

    private func startDaemon() throws -> OpaquePointer {
        let address = try BindAddress(host: configuration.host, port: configuration.port)
        // poll, not epoll: with epoll, `MHD_quiesce_daemon` and a worker's own loop both remove
        // the listen socket from the worker's epoll set, unsynchronised, and whichever loses gets
        // ENOENT and aborts the process (MHD_PANIC, "Failed to remove listen FD from epoll set",
        // libmicrohttpd 0.9.75). Shutdown under load hit it; ADR 0001 has the measurements.
        var flags = MHD_USE_POLL_INTERNAL_THREAD.rawValue | MHD_USE_ITC.rawValue | address.flags
        if configuration.offloadThreads > 0 || configuration.networkOffloadThreads > 0 {
            flags |= MHD_ALLOW_SUSPEND_RESUME.rawValue
        }
        if configuration.logLibraryErrors {
            flags |= MHD_USE_ERROR_LOG.rawValue
        }
        let contextPointer = Unmanaged.passUnretained(context).toOpaque()
        let daemon = address.withSockaddr { sockaddr in
            var options = gatehouse_mhd_options(
                thread_pool_size: UInt32(clamping: max(1, configuration.threadCount)),
                connection_limit: UInt32(clamping: max(1, configuration.connectionLimit)),
                // Counted by ConnectionGuard per IPv4 address or IPv6 /64; libmicrohttpd's own
                // limit counts single addresses.
                per_ip_connection_limit: 0,
                connection_timeout: UInt32(clamping: max(0, configuration.connectionTimeoutSeconds)),
                connection_memory_limit: max(4096, configuration.connectionMemoryLimit),
                listen_backlog: UInt32(clamping: max(1, configuration.listenBacklog)),
                bind_address: sockaddr,
                completed: MicroHTTPDCallbacks.requestCompleted,
                completed_cls: contextPointer,
                uri_log: MicroHTTPDCallbacks.requestLineReceived,
                uri_log_cls: contextPointer,
                accept_policy: MicroHTTPDCallbacks.acceptPolicy,
                accept_policy_cls: contextPointer,
                notify_connection: MicroHTTPDCallbacks.connectionNotified,
                notify_connection_cls: contextPointer)
            errno = 0
            return gatehouse_mhd_start(
                flags, configuration.port, MicroHTTPDCallbacks.accessHandler, contextPointer, &options)
        }
        guard let daemon else {
            let reason = errno != 0 ? String(cString: strerror(errno)) : "libmicrohttpd refused to start"
            throw StartError(
                description: "cannot listen on \(configuration.host) port \(configuration.port): \(reason)")
        }
        return daemon
    }

    /// `TMPDIR` when set, else `/tmp`.
    public static var systemTemporaryDirectory: String {
        if let value = getenv("TMPDIR"), value.pointee != 0 { return String(cString: value) }
        return "/tmp"
    }

    private static func millis(_ seconds: Double) -> Int64 { Int64((max(0, seconds) * 1000).rounded()) }

    static var coreCount: Int {
        max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    }

    private static func monotonicSeconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}

extension HTTPServer {
    private enum Lifecycle {
        case idle
        case running(DaemonHandle)
        case stopped
    }

    /// The daemon pointer. Sendable because it is only used under `lifecycle`'s lock, and
    /// libmicrohttpd allows quiesce and stop from any thread.
    private struct DaemonHandle: @unchecked Sendable {
        let daemon: OpaquePointer
    }
}
