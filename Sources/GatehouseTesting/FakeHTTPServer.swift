import GatehouseCore
import GatehouseHTTP
import Synchronization

/// A real HTTP server on `127.0.0.1:<ephemeral>` whose answers a test (or a provider fake) decides,
/// for testing outbound calls without mocks.
///
/// A request the handler does not expect (it returns `nil`) is answered 500 and recorded in
/// ``errors``, so a test that forgot to set something up fails loudly. Outages are simulated with
/// ``failNextRequests(_:status:)`` and ``setDown(_:)``.
public final class FakeHTTPServer: Sendable {
    /// Decides the answer to a request; `nil` means "not set up for this" (500, recorded).
    public typealias Handler = @Sendable (HTTPRequest, Recorder) -> HTTPResponse?

    /// `http://127.0.0.1:<port>`.
    public let baseURL: String
    /// The bound port.
    public let port: UInt16
    private let server: HTTPServer
    private let recorder: Recorder

    /// Starts the server.
    public init(handler: @escaping Handler) throws {
        let recorder = Recorder()
        var configuration = HTTPServer.Configuration()
        configuration.host = "127.0.0.1"
        configuration.port = 0
        configuration.threadCount = 2
        configuration.connectionTimeoutSeconds = 10
        configuration.shutdownGracePeriodSeconds = 1
        let server = HTTPServer(configuration: configuration, responder: Responder(recorder: recorder, handler: handler))
        try server.start()
        self.server = server
        self.recorder = recorder
        self.port = server.port
        self.baseURL = "http://127.0.0.1:\(server.port)"
    }

    /// Stops the server; later connections are refused.
    public func stop() { server.shutdown() }

    /// The next `count` requests (whatever their path) are answered with `status` and an empty
    /// JSON error, without reaching the handler.
    public func failNextRequests(_ count: Int, status: Int = 503) {
        recorder.state.withLock {
            $0.failuresLeft = max(0, count)
            $0.failureStatus = status
        }
    }

    /// While `down`, every request is answered 503 without reaching the handler.
    public func setDown(_ down: Bool) { recorder.state.withLock { $0.down = down } }

    /// Requests the fake was not set up for, and other misuse the handler recorded. A test should
    /// end with this empty.
    public var errors: [String] { recorder.state.withLock { $0.errors } }

    /// Every request received, as `"METHOD /path"`, in order (injected failures included).
    public var requests: [String] { recorder.state.withLock { $0.requests } }

    /// How many `method path` requests arrived (injected failures included).
    public func requestCount(_ method: String, _ path: String) -> Int {
        let line = "\(method) \(path)"
        return recorder.state.withLock { $0.requests.count { $0 == line } }
    }

    /// Records errors on behalf of a handler.
    public final class Recorder: Sendable {
        struct State {
            var errors: [String] = []
            var requests: [String] = []
            var failuresLeft = 0
            var failureStatus = 503
            var down = false
        }

        let state = Mutex(State())

        /// Records `message` as an error and returns a 500 naming it: for requests a fake
        /// cannot answer meaningfully because the test did not set it up.
        public func fail(_ message: String) -> HTTPResponse {
            state.withLock { $0.errors.append(message) }
            return FakeHTTPServer.json(500, ["error": "fake_not_set_up", "error_description": .string(message)])
        }
    }

    // MARK: - Helpers for handlers

    /// A JSON response.
    public static func json(_ status: Int, _ body: JSON, headers: [(String, String)] = []) -> HTTPResponse {
        var all = HTTPHeaders(headers)
        all.set("Content-Type", "application/json")
        return HTTPResponse(status: status, headers: all, body: body.serialized())
    }

    /// Decodes an `application/x-www-form-urlencoded` body (`+` is a space); `nil` when malformed
    /// or a name repeats.
    public static func formFields(_ body: [UInt8]) -> [String: String]? {
        var fields: [String: String] = [:]
        guard !body.isEmpty else { return fields }
        for pair in body.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: false) {
            let parts = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, let name = decode(parts[0]), let value = decode(parts[1]), fields[name] == nil
            else { return nil }
            fields[name] = value
        }
        return fields
    }

    private static func decode(_ bytes: ArraySlice<UInt8>) -> String? {
        var out: [UInt8] = []
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let byte = bytes[index]
            if byte == UInt8(ascii: "+") {
                out.append(UInt8(ascii: " "))
            } else if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.endIndex,
                    let high = hex(bytes[index + 1]), let low = hex(bytes[index + 2])
                else { return nil }
                out.append(high << 4 | low)
                index += 2
            } else {
                out.append(byte)
            }
            index += 1
        }
        return String(validating: out, as: UTF8.self)
    }

    private static func hex(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

private struct Responder: HTTPResponder {
    let recorder: FakeHTTPServer.Recorder
    let handler: FakeHTTPServer.Handler

    func head(_ request: inout HTTPRequest) -> HeadDecision { .readBody(limit: 1 << 20) }

    func respond(to request: HTTPRequest) -> HTTPResponse {
        let injected: Int? = recorder.state.withLock { state in
            state.requests.append("\(request.method) \(request.path)")
            if state.down { return 503 }
            guard state.failuresLeft > 0 else { return nil }
            state.failuresLeft -= 1
            return state.failureStatus
        }
        if let injected { return FakeHTTPServer.json(injected, ["error": "temporarily_unavailable"]) }
        return handler(request, recorder) ?? recorder.fail("unexpected request: \(request.method) \(request.path)")
    }

    func bodyTooLarge(_ request: HTTPRequest) -> HTTPResponse {
        recorder.fail("request body too large: \(request.method) \(request.path)")
    }
}
