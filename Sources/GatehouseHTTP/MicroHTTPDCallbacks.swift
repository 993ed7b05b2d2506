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
    static let requestCompleted: MHD_RequestCompletedCallback = { cls, _, requestContext, _ in
        guard let cls, let requestContext, let pointer = requestContext.pointee else { return }
        requestContext.pointee = nil
        let state = Unmanaged<RequestState>.fromOpaque(pointer).takeRetainedValue()
        if state.counted {
            Unmanaged<ServerContext>.fromOpaque(cls).takeUnretainedValue().inFlight.subtract(1, ordering: .relaxed)
        }
    }
}
