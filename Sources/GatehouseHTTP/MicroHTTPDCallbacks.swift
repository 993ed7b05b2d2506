import CMicroHTTPD

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The C entry points libmicrohttpd calls; `cls` is always the server's `ServerContext`.
enum MicroHTTPDCallbacks {
    /// Runs once per request when the request line is in, before libmicrohttpd decodes the
    /// target. Its result becomes `*con_cls`, and libmicrohttpd then always calls
    /// `requestCompleted` for it, even if the request fails before the access handler.
    static let requestLineReceived: gatehouse_mhd_uri_log_callback = { _, uri, _ in
        let state: RequestState
        if let uri {
            state = RequestState(target: String(cString: uri), targetLength: strlen(uri))
        } else {
            state = RequestState(target: "", targetLength: 0)
        }
        return Unmanaged.passRetained(state).toOpaque()
    }

    static let accessHandler: MHD_AccessHandlerCallback = {
        cls, connection, _, method, _, upload, uploadSize, requestContext in
        guard let cls, let connection, let uploadSize, let requestContext else { return .NO }
        let context = Unmanaged<ServerContext>.fromOpaque(cls).takeUnretainedValue()
        return context.handle(
            connection: connection, method: method, upload: upload, uploadSize: uploadSize,
            requestContext: requestContext)
    }

    /// Also called on abort and timeout.
    static let requestCompleted: MHD_RequestCompletedCallback = { cls, connection, requestContext, _ in
        if let connection, let record = gatehouse_mhd_socket_context(connection) {
            Unmanaged<ConnectionRecord>.fromOpaque(record).takeUnretainedValue().requestEnded(now: ConnectionGuard.nowMillis())
        }
        guard let cls, let requestContext, let pointer = requestContext.pointee else { return }
        requestContext.pointee = nil
        let state = Unmanaged<RequestState>.fromOpaque(pointer).takeRetainedValue()
        state.end()
        if state.counted {
            Unmanaged<ServerContext>.fromOpaque(cls).takeUnretainedValue().inFlight.subtract(1, ordering: .relaxed)
        }
    }

    /// Before libmicrohttpd accepts a connection: refuses a client (an IPv4 address, an IPv6 /64)
    /// that already holds its limit of connections.
    static let acceptPolicy: MHD_AcceptPolicyCallback = { cls, address, _ in
        guard let cls, let address else { return .YES }
        let context = Unmanaged<ServerContext>.fromOpaque(cls).takeUnretainedValue()
        return context.connections.mayAccept(ConnectionBucket(address)) ? .YES : .NO
    }

    /// A connection started or closed: its `ConnectionRecord` lives in `*socket_context` between
    /// the two, for the per-client count and the header deadline.
    static let connectionNotified: MHD_NotifyConnectionCallback = { cls, connection, socketContext, event in
        guard let cls, let connection, let socketContext else { return }
        let guardian = Unmanaged<ServerContext>.fromOpaque(cls).takeUnretainedValue().connections
        switch event.rawValue {  // the case names do not import cleanly
        case 0:  // MHD_CONNECTION_NOTIFY_STARTED
            let address = gatehouse_mhd_client_address(connection)
            let record = guardian.opened(
                socket: gatehouse_mhd_connection_fd(connection), bucket: address.flatMap { ConnectionBucket($0) },
                remoteAddress: address.map { BindAddress.text(of: $0) } ?? "", now: ConnectionGuard.nowMillis())
            socketContext.pointee = Unmanaged.passRetained(record).toOpaque()
            // The worker that accepted lets the others woken by the same burst of connections run
            // and accept the next ones: a worker keeps the connections it accepts, and without
            // this the first to run took a run of them (ADR 0024, amended). One system call per
            // new connection.
            sched_yield()
        case 1:  // MHD_CONNECTION_NOTIFY_CLOSED
            guard let pointer = socketContext.pointee else { return }
            socketContext.pointee = nil
            guardian.closed(Unmanaged<ConnectionRecord>.fromOpaque(pointer).takeRetainedValue())
        default:
            break
        }
    }
}
