import CMicroHTTPD
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the libmicrohttpd callbacks need, reached through their `cls` pointer.
final class ServerContext: Sendable {
    let responder: any HTTPResponder
    let maxHeaderBytes: Int
    let maxURLBytes: Int
    let maxDiscardedBodyBytes: Int
    /// Where `readMultipart` routes spool their file parts, and `spoolBody` routes their bodies
    /// (made when the server starts).
    let spool = SpoolFolder()
    let offloadPool: OffloadPool?
    let networkPool: OffloadPool?
    /// Requests whose headers reached the access handler and that have not completed yet.
    let inFlight = Atomic<Int>(0)
    /// Open connections: the per-client limit and the header deadline.
    let connections: ConnectionGuard

    init(
        responder: any HTTPResponder, maxHeaderBytes: Int, maxURLBytes: Int, maxDiscardedBodyBytes: Int,
        offloadPool: OffloadPool?, networkPool: OffloadPool?, connections: ConnectionGuard
    ) {
        self.responder = responder
        self.connections = connections
        self.offloadPool = offloadPool
        self.networkPool = networkPool
        self.maxHeaderBytes = maxHeaderBytes
        self.maxURLBytes = maxURLBytes
        self.maxDiscardedBodyBytes = maxDiscardedBodyBytes
    }

    /// One call of the access handler: headers first, then body chunks, then a final call.
    func handle(
        connection: OpaquePointer, method: UnsafePointer<CChar>?, upload: UnsafePointer<CChar>?,
        uploadSize: UnsafeMutablePointer<Int>, requestContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) -> MHD_Result {
        let state: RequestState
        if let existing = requestContext.pointee {
            state = Unmanaged<RequestState>.fromOpaque(existing).takeUnretainedValue()
        } else {
            // The request-line callback always runs first; this is only a safety net.
            state = RequestState(target: "", targetLength: 0)
            requestContext.pointee = Unmanaged.passRetained(state).toOpaque()
        }

        switch state.phase {
        case .created:
            let record = gatehouse_mhd_socket_context(connection).map { Unmanaged<ConnectionRecord>.fromOpaque($0).takeUnretainedValue() }
            record?.headersReceived()
            state.phase = .readingBody
            inFlight.add(1, ordering: .relaxed)
            state.counted = true
            return handleHead(state, connection: connection, method: method, record: record)

        case .readingBody:
            let size = uploadSize.pointee
            if let timed = state.timedBody {
                if size > 0 {
                    timed.bodyReceived(size)
                } else {
                    state.timedBody = nil
                    // Too slow: the sweep has answered 408 and shut the connection down already.
                    guard timed.bodyEnded() else {
                        state.phase = .answered
                        return .NO
                    }
                }
            }
            if let reader = state.multipart {
                return readMultipart(reader, state, connection: connection, upload: upload, size: size, uploadSize: uploadSize)
            }
            if let writer = state.spool {
                return readSpooled(writer, state, connection: connection, upload: upload, size: size, uploadSize: uploadSize)
            }
            if size > 0 {
                uploadSize.pointee = 0
                if !state.bodyTooLarge, size > state.limit - state.body.count {
                    state.bodyTooLarge = true
                    state.body = []
                }
                guard !state.bodyTooLarge else {
                    // libmicrohttpd 0.9.75 refuses MHD_queue_response while a body is being
                    // read, so the 413 can only go out after the final chunk: discard until
                    // then, within a bound, or close the connection.
                    return discard(size, of: state)
                }
                if let upload {
                    upload.withMemoryRebound(to: UInt8.self, capacity: size) {
                        state.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: size))
                    }
                }
                return .YES
            }
            if let decided = state.decided {
                state.decided = nil
                state.phase = .answered
                return queue(decided, on: connection)
            }
            if state.bodyTooLarge {
                return respondBodyTooLarge(state, connection: connection)
            }
            var request = state.request
            request.body = state.body
            state.body = []
            return answer(request, state, connection: connection)

        case .offloaded:
            // Resumed: the offload thread has set the answer.
            guard let response = state.offloadedResponse.withLock({ $0.take() }) else { return .NO }
            state.phase = .answered
            return queue(response, on: connection)

        case .answered:
            // A response is queued; anything more the client sends is not ours to read.
            uploadSize.pointee = 0
            return .YES
        }
    }

    /// Answers a request whose body is in: on an offload pool when it asks for one, else here.
    private func answer(_ request: HTTPRequest, _ state: RequestState, connection: OpaquePointer) -> MHD_Result {
        if let pool = (state.waitsOnNetwork ? networkPool : nil) ?? (state.offload ? offloadPool : nil) {
            return offload(request, state, connection: connection, to: pool)
        }
        state.phase = .answered
        return queue(responder.respond(to: request), on: connection)
    }

    /// Drops a piece of a refused body: the answer goes out after the last piece, so the rest is
    /// read and thrown away, up to `maxDiscardedBodyBytes`, past which the connection is closed.
    private func discard(_ size: Int, of state: RequestState) -> MHD_Result {
        state.discardedBytes += size
        return state.discardedBytes > maxDiscardedBodyBytes ? .NO : .YES
    }

    /// A call of the access handler for a `readMultipart` body: a piece to parse, or (size 0)
    /// its end.
    private func readMultipart(
        _ reader: MultipartReader, _ state: RequestState, connection: OpaquePointer, upload: UnsafePointer<CChar>?, size: Int,
        uploadSize: UnsafeMutablePointer<Int>
    ) -> MHD_Result {
        if size > 0 {
            uploadSize.pointee = 0
            guard reader.failure == nil else {
                // Refused already (see `readBody`): discard until the end.
                return discard(size, of: state)
            }
            if let upload { reader.feed(upload, count: size) }
            return .YES
        }
        switch reader.finish() {
        case .success(let upload):
            var request = state.request
            request.upload = upload
            return answer(request, state, connection: connection)
        case .failure(let failure):
            state.phase = .answered
            // The partial spool files are gone already; the reader goes with the request.
            switch failure {
            case .tooLarge:
                return queue(responder.uploadTooLarge(state.request, limit: Self.exceededLimit(reader)), on: connection)
            case .malformed(let reason):
                return queue(responder.malformedBody(state.request, reason: reason), on: connection)
            case .spoolFailed(let reason):
                return queue(responder.uploadFailed(state.request, reason: reason), on: connection)
            }
        }
    }

    /// A call of the access handler for a `spoolBody` body: a piece to write, or (size 0) its end.
    private func readSpooled(
        _ writer: SpoolWriter, _ state: RequestState, connection: OpaquePointer, upload: UnsafePointer<CChar>?, size: Int,
        uploadSize: UnsafeMutablePointer<Int>
    ) -> MHD_Result {
        if size > 0 {
            uploadSize.pointee = 0
            guard state.spoolFailure == nil else {
                // Refused already (see `readBody`): discard until the end.
                return discard(size, of: state)
            }
            if size > state.limit - writer.size {
                state.spoolFailure = .tooLarge
                writer.remove()
                return .YES
            }
            if let upload, let error = writer.write(UnsafeRawBufferPointer(start: upload, count: size)) {
                state.spoolFailure = .spoolFailed(error)
                writer.remove()
            }
            return .YES
        }
        if state.spoolFailure == nil, let error = writer.close() {
            state.spoolFailure = .spoolFailed(error)
            writer.remove()
        }
        switch state.spoolFailure {
        case nil:
            var request = state.request
            request.spooledBody = SpooledFile(
                field: "", filename: nil, declaredContentType: request.headers["Content-Type"], size: writer.size, sha256: writer.digest, path: writer.path)
            return answer(request, state, connection: connection)
        case .tooLarge?, .malformed?:
            state.phase = .answered
            return queue(responder.uploadTooLarge(state.request, limit: state.limit), on: connection)
        case .spoolFailed(let reason)?:
            state.phase = .answered
            return queue(responder.uploadFailed(state.request, reason: reason), on: connection)
        }
    }

    private static func exceededLimit(_ reader: MultipartReader) -> Int {
        reader.exceededFileLimit ? reader.form.maxFileBytes : reader.form.maxBodyBytes
    }

    /// `record`: the connection's (its address formatted when it opened; nil: formatted here).
    private func handleHead(_ state: RequestState, connection: OpaquePointer, method: UnsafePointer<CChar>?, record: ConnectionRecord?)
        -> MHD_Result
    {
        let remoteAddress = record?.remoteAddress
        let collected = RequestReader.read(connection: connection)
        var request = HTTPRequest(
            method: method.map { String(cString: $0) } ?? "",
            path: state.path,
            query: collected.query,
            headers: collected.headers,
            remoteAddress: remoteAddress ?? RequestReader.remoteAddress(connection: connection))
        request.spoolDirectory = spool.path
        if state.targetLength > maxURLBytes {
            state.phase = .answered
            return queue(responder.uriTooLong(request), on: connection)
        }
        if collected.headerBytes > maxHeaderBytes {
            state.phase = .answered
            return queue(responder.headerTooLarge(request), on: connection)
        }
        if let reason = Self.ambiguousFraming(request.headers, connection: connection) {
            state.phase = .answered
            return queue(responder.badRequest(request, reason: reason), on: connection)
        }
        switch responder.head(&request) {
        case .respond(let response):
            // A response queued before the end of the request makes libmicrohttpd close the
            // connection after it, body or not; a request without one ends at the next call.
            if Self.declaresNoBody(request.headers) {
                state.decided = response
                return .YES
            }
            state.phase = .answered
            return queue(response, on: connection)
        case .readBody(let limit, let offload, let waitsOnNetwork):
            state.limit = max(0, limit)
            state.offload = offload
            state.waitsOnNetwork = waitsOnNetwork
            if Self.declaresMoreThan(state.limit, request.headers) {
                state.phase = .answered
                return queue(responder.bodyTooLarge(request), on: connection)
            }
            if let declared = request.headers["Content-Length"].flatMap({ Int($0) }) {
                state.body.reserveCapacity(declared)
            }
            state.request = request
            // A bulk body (over 1 MiB allowed: an NDJSON import) goes at an upload's pace, not in 10 s.
            timeBody(state.limit > Self.bulkBodyBytes ? connections.uploadBodyRule : connections.jsonBodyRule, of: request, state, record: record)
            return .YES
        case .readMultipart(let form, let offload, let waitsOnNetwork):
            state.offload = offload
            state.waitsOnNetwork = waitsOnNetwork
            guard Self.isMultipartFormData(request.headers["Content-Type"]) else {
                state.phase = .answered
                return queue(responder.unsupportedMediaType(request, expected: "multipart/form-data"), on: connection)
            }
            if Self.declaresMoreThan(form.maxBodyBytes, request.headers) {
                state.phase = .answered
                return queue(responder.uploadTooLarge(request, limit: form.maxBodyBytes), on: connection)
            }
            guard let spoolDirectory = spool.path else {
                state.phase = .answered
                return queue(responder.uploadFailed(request, reason: "the server is stopping"), on: connection)
            }
            guard let reader = MultipartReader(connection: connection, form: form, spoolDirectory: spoolDirectory) else {
                state.phase = .answered
                return queue(responder.malformedBody(request, reason: "The multipart/form-data Content-Type has no usable boundary."), on: connection)
            }
            state.multipart = reader
            state.request = request
            timeBody(connections.uploadBodyRule, of: request, state, record: record)
            return .YES
        case .spoolBody(let limit, let offload, let waitsOnNetwork):
            state.limit = max(0, limit)
            state.offload = offload
            state.waitsOnNetwork = waitsOnNetwork
            if Self.declaresMoreThan(state.limit, request.headers) {
                state.phase = .answered
                return queue(responder.uploadTooLarge(request, limit: state.limit), on: connection)
            }
            guard let spoolDirectory = spool.path else {
                state.phase = .answered
                return queue(responder.uploadFailed(request, reason: "the server is stopping"), on: connection)
            }
            switch SpoolWriter.create(in: spoolDirectory, field: "") {
            case .success(let writer): state.spool = writer
            case .failure(let error):
                state.phase = .answered
                return queue(responder.uploadFailed(request, reason: error.description), on: connection)
            }
            state.request = request
            timeBody(connections.uploadBodyRule, of: request, state, record: record)
            return .YES
        }
    }

    /// A `readBody` limit above this marks a bulk route, timed like an upload (`uploadBodyRule`).
    static let bulkBodyBytes = 1024 * 1024

    /// Starts the clock of a body about to be read (none for a request that declares no body).
    private func timeBody(_ rule: BodyRule, of request: HTTPRequest, _ state: RequestState, record: ConnectionRecord?) {
        guard let record, rule.checkMillis > 0, !Self.declaresNoBody(request.headers) else { return }
        record.bodyStarted(rule, request: request, now: ConnectionGuard.nowMillis())
        state.timedBody = record
    }

    /// Whether the media type (parameters aside) is `multipart/form-data`.
    private static func isMultipartFormData(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        let mediaType = contentType.utf8.prefix { $0 != UInt8(ascii: ";") }
        let trimmed = mediaType.drop { $0 == 0x20 || $0 == 0x09 }.reversed().drop { $0 == 0x20 || $0 == 0x09 }.reversed()
        return trimmed.count == 19 && trimmed.lazy.map { $0 | 0x20 }.elementsEqual("multipart/form-data".utf8)
    }

    /// Suspends the connection and answers on an offload thread, which resumes it; or, when the
    /// pool's queue is full or it is stopping, answers `busy` at once.
    private func offload(_ request: HTTPRequest, _ state: RequestState, connection: OpaquePointer, to pool: OffloadPool) -> MHD_Result {
        let suspended = SuspendedRequest(state: state, connection: connection)
        let responder = self.responder
        let job = OffloadPool.Job(
            run: { suspended.resume(with: responder.respond(to: request)) },
            refuse: { suspended.resume(with: responder.busy(request)) })
        let accepted = pool.submit(job) {
            state.phase = .offloaded
            MHD_suspend_connection(connection)
        }
        guard accepted else {
            state.phase = .answered
            return queue(responder.busy(request), on: connection)
        }
        return .YES
    }

    private func respondBodyTooLarge(_ state: RequestState, connection: OpaquePointer) -> MHD_Result {
        state.phase = .answered
        return queue(responder.bodyTooLarge(state.request), on: connection)
    }

    /// Framing libmicrohttpd accepts (it uses the first `Content-Length`, or chunked when both
    /// are present) but that a front proxy could frame differently.
    ///
    /// A `Transfer-Encoding` other than exactly `chunked` (any case) too: libmicrohttpd 0.9.75
    /// then reads the body as running to the end of the connection, so the request is never
    /// answered and any request behind it on the connection is taken for its body, where a proxy
    /// that reads `gzip, chunked` or `chunked ` as chunked sees two requests. The value is
    /// compared as libmicrohttpd has it, trailing spaces included (`HTTPHeaders` has them trimmed).
    private static func ambiguousFraming(_ headers: HTTPHeaders, connection: OpaquePointer) -> String? {
        let lengths = headers.values("Content-Length")
        if Set(lengths).count > 1 {
            return "The request has conflicting Content-Length headers."
        }
        guard headers.contains("Transfer-Encoding") else { return nil }
        if !lengths.isEmpty {
            return "The request has both Content-Length and Transfer-Encoding."
        }
        if headers.values("Transfer-Encoding").count > 1 || !isExactlyChunked(firstTransferEncoding(connection)) {
            return "The only Transfer-Encoding accepted is chunked."
        }
        return nil
    }

    /// The first `Transfer-Encoding` value as libmicrohttpd stores it, the one it frames by.
    private static func firstTransferEncoding(_ connection: OpaquePointer) -> [UInt8] {
        var value: UnsafePointer<CChar>?
        var size = 0
        let name = "Transfer-Encoding"
        guard MHD_lookup_connection_value_n(connection, .HEADER_KIND, name, name.utf8.count, &value, &size) == .YES, let value else { return [] }
        return value.withMemoryRebound(to: UInt8.self, capacity: size) { Array(UnsafeBufferPointer(start: $0, count: size)) }
    }

    private static func isExactlyChunked(_ value: [UInt8]) -> Bool {
        value.count == 7 && value.lazy.map { $0 | 0x20 }.elementsEqual("chunked".utf8)
    }

    /// No `Transfer-Encoding`, and no `Content-Length` other than 0: libmicrohttpd reads no body.
    private static func declaresNoBody(_ headers: HTTPHeaders) -> Bool {
        !headers.contains("Transfer-Encoding") && headers.values("Content-Length").allSatisfy { Int($0) == 0 }
    }

    /// Whether any `Content-Length` value exceeds `limit` (or is not a number libmicrohttpd
    /// could have accepted within it).
    private static func declaresMoreThan(_ limit: Int, _ headers: HTTPHeaders) -> Bool {
        // Header values arrive without the whitespace around them (RequestReader).
        headers.values("Content-Length").contains { value in
            guard let length = Int(value), length >= 0 else { return true }
            return length > limit
        }
    }

    private func queue(_ response: HTTPResponse, on connection: OpaquePointer) -> MHD_Result {
        let created: OpaquePointer?
        if let stream = response.stream {
            // Released by the free callback, which libmicrohttpd calls once it is done with it.
            let context = Unmanaged.passRetained(stream).toOpaque()
            created = MHD_create_response_from_callback(UInt64(max(0, stream.size)), 64 * 1024, readStream, context, freeStream)
            if created == nil { Unmanaged<ResponseStream>.fromOpaque(context).release() }
        } else {
            created = response.body.withUnsafeBytes { bytes in
                MHD_create_response_from_buffer(
                    bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress), .RESPMEM_MUST_COPY)
            }
        }
        guard let created else { return .NO }
        defer { MHD_destroy_response(created) }
        // `withCString` hands over a native string's own NUL-terminated bytes; passing a String
        // where C wants a pointer copied each name and value into a new array (about 750
        // instructions a header, allocations included).
        func add(_ name: String, _ value: String) {
            _ = name.withCString { name in value.withCString { value in MHD_add_response_header(created, name, value) } }
        }
        for (name, value) in response.headers where ResponseHeaderPolicy.allows(name: name, value: value) { add(name, value) }
        for (name, value) in ResponseHeaderPolicy.always where !response.headers.contains(name) { add(name, value) }
        let status = (200...599).contains(response.status) ? UInt32(response.status) : 500
        return MHD_queue_response(connection, status, created)
    }
}

/// A request whose connection is suspended while an offload thread answers it.
///
/// `@unchecked Sendable`: while the connection is suspended libmicrohttpd does not call back for
/// it, so the offload thread is the only one touching it; the answer crosses back through
/// `offloadedResponse`'s lock, and `MHD_resume_connection` may be called from any thread.
private struct SuspendedRequest: @unchecked Sendable {
    let state: RequestState
    let connection: OpaquePointer

    func resume(with response: HTTPResponse) {
        state.offloadedResponse.withLock { $0 = response }
        MHD_resume_connection(connection)
    }
}

/// libmicrohttpd asks a streamed body for its next bytes (in order: `pos` is where it is).
private let readStream: MHD_ContentReaderCallback = { cls, _, buffer, max in
    guard let cls, let buffer else { return -2 }  // MHD_CONTENT_READER_END_WITH_ERROR
    let stream = Unmanaged<ResponseStream>.fromOpaque(cls).takeUnretainedValue()
    guard let piece = stream.next(upTo: max) else { return -2 }
    guard !piece.isEmpty else { return -1 }  // MHD_CONTENT_READER_END_OF_STREAM
    piece.withUnsafeBytes { UnsafeMutableRawPointer(buffer).copyMemory(from: $0.baseAddress!, byteCount: piece.count) }
    return piece.count
}

/// libmicrohttpd is done with a streamed body (sent, cut off, or never read).
private let freeStream: MHD_ContentReaderFreeCallback = { cls in
    guard let cls else { return }
    let stream = Unmanaged<ResponseStream>.fromOpaque(cls).takeRetainedValue()
    stream.close()
}
