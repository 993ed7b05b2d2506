import Foundation
import GatehouseCore
import GatehouseHTTP
import Synchronization

/// A webhook receiver on a real port (a ``FakeHTTPServer``): records every POST to `/hooks/<name>`
/// with its headers and exact body, and answers 204, or what the test asked for next
/// (``answerNext(_:status:location:)``: failures, redirects).
public final class WebhookSink: Sendable {
    /// One request as received.
    public struct Delivery: Sendable {
        public let path: String
        public let headers: HTTPHeaders
        public let body: [UInt8]
        /// The answer it got.
        public let status: Int

        public func header(_ name: String) -> String? { headers[name] }
        public var json: JSON? { try? JSON.parse(body) }
    }

    private struct State {
        var deliveries: [Delivery] = []
        var answers: [(status: Int, location: String?)] = []
    }

    private final class Box: Sendable {
        let state = Mutex(State())
    }

    private let box = Box()
    private let server: FakeHTTPServer

    public init() throws {
        let box = self.box
        server = try FakeHTTPServer { request, _ in
            guard request.method == "POST", request.path.hasPrefix("/hooks/") else { return nil }
            return box.state.withLock { s in
                let answer = s.answers.isEmpty ? (status: 204, location: nil) : s.answers.removeFirst()
                s.deliveries.append(Delivery(path: request.path, headers: request.headers, body: request.body, status: answer.status))
                var headers = HTTPHeaders()
                if let location = answer.location { headers.set("Location", location) }
                return HTTPResponse(status: answer.status, headers: headers)
            }
        }
    }

    /// `http://127.0.0.1:<port>/hooks/<name>`.
    public func url(_ name: String = "a") -> String { "\(server.baseURL)/hooks/\(name)" }

    /// The next `count` deliveries are answered `status` (with `Location` when given), then 204 again.
    public func answerNext(_ count: Int, status: Int, location: String? = nil) {
        box.state.withLock { $0.answers += Array(repeating: (status, location), count: count) }
    }

    /// Every request received, in order.
    public var deliveries: [Delivery] { box.state.withLock { $0.deliveries } }

    /// Requests the sink did not expect (not a POST under `/hooks/`).
    public var errors: [String] { server.errors }

    public func stop() { server.stop() }
}

/// Checks a webhook's signature with Python's standard library (`hmac`, `hashlib`, `base64`), not
/// with Gatehouse's code: the Standard Webhooks scheme as a receiver would implement it.
public enum IndependentWebhookVerifier {
    static let script = """
        import base64, hashlib, hmac, sys
        msg_id, timestamp, secret, signature = sys.argv[1:5]
        body = sys.stdin.buffer.read()
        assert secret.startswith("whsec_")
        key = base64.b64decode(secret[len("whsec_"):])
        expected = base64.b64encode(hmac.new(key, msg_id.encode() + b"." + timestamp.encode() + b"." + body, hashlib.sha256).digest()).decode()
        ok = any(hmac.compare_digest("v1," + expected, s) for s in signature.split(" "))
        print("valid" if ok else "invalid")
        """

    /// True when `signature` (the `webhook-signature` header) signs `id`, `timestamp` and `body` under `secret`.
    public static func verify(id: String, timestamp: String, body: [UInt8], secret: String, signature: String) throws -> Bool {
        let output = try ExternalProgram.run(ExternalProgram.python, ["-c", script, id, timestamp, secret, signature], stdin: body)
        return output.trimmingCharacters(in: .whitespacesAndNewlines) == "valid"
    }
}
