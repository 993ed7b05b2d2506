import GatehouseCore
import GatehouseHTTP

/// What a handler receives: the HTTP request, its route's path parameters and its request id.
public struct Request: Sendable {
    public let http: HTTPRequest
    public let parameters: [String: String]
    public let requestID: String
    /// The client's address, through `GATEHOUSE_TRUSTED_PROXIES` (see `ClientAddress`).
    public let clientIP: String
    /// The route and the app, resolved once for the whole request.
    let context: RequestContext

    public func header(_ name: String) -> String? { http.headers[name] }

    /// The multipart body of a `.multipart` route: its text fields and spooled files.
    public var upload: Upload? { http.upload }
    /// The body of an `.ndjson` route, spooled to a file (removed once the answer is sent).
    public var spooledBody: SpooledFile? { http.spooledBody }

    /// The file sent under `field` of a `.multipart` route; 400 `request/validation-failed`
    /// (on `field`) when it was not sent.
    public func uploadedFile(_ field: String) throws(GatehouseError) -> SpooledFile {
        guard let file = http.upload?.file(field) else { throw GatehouseError.validation(field, "A file is required.") }
        return file
    }

    /// The body as a JSON object. An empty body is `{}` only when `allowEmpty`.
    public func jsonBody(allowEmpty: Bool = false) throws(GatehouseError) -> JSON {
        if http.body.isEmpty {
            if allowEmpty { return .object([:]) }
            throw GatehouseError.validation("body", "A JSON object is required.")
        }
        let json: JSON
        do { json = try JSON.parse(http.body) } catch { throw GatehouseError.validation("body", "Not valid JSON (UTF-8).") }
        guard case .object = json else { throw GatehouseError.validation("body", "Must be a JSON object.") }
        // "\u0000" is valid JSON but no field of ours holds it, and PostgreSQL text cannot.
        if let field = json.firstPathHoldingNUL() { throw GatehouseError.validation(field, "Must not contain U+0000.") }
        return json
    }

    private static let bearerScheme: [UInt8] = Array("bearer ".utf8)

    /// The bearer token of `Authorization`, or nil.
    public var bearerToken: String? {
        // Over the contiguous UTF-8 bytes: Foundation's trimming walks UTF-16 and cost more than
        // verifying the token, and a walk of the generic UTF-8 view as much as the token lookup.
        guard var value = http.headers["Authorization"] else { return nil }
        return value.withUTF8 { bytes -> String? in
            let scheme = Self.bearerScheme
            guard bytes.count > scheme.count, scheme.indices.allSatisfy({ (bytes[$0] | 0x20) == scheme[$0] }) else { return nil }
            let isBlank = { (byte: UInt8) in byte == 0x20 || byte == 0x09 }
            guard let first = bytes[scheme.count...].firstIndex(where: { !isBlank($0) }), let last = bytes.lastIndex(where: { !isBlank($0) })
            else { return nil }
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[first...last]), as: UTF8.self)
        }
    }
}

extension JSON {
    /// The dotted path (`body` for the top level) of the first string or member name that
    /// contains U+0000, or nil.
    fileprivate func firstPathHoldingNUL(_ path: String = "") -> String? {
        switch self {
        case .string(let string):
            return string.utf8.contains(0) ? (path.isEmpty ? "body" : path) : nil
        case .array(let elements):
            for (index, element) in elements.enumerated() {
                if let found = element.firstPathHoldingNUL(path.isEmpty ? "body[\(index)]" : "\(path)[\(index)]") { return found }
            }
            return nil
        case .object(let members):
            for (name, value) in members {
                if name.utf8.contains(0) { return path.isEmpty ? "body" : path }
                if let found = value.firstPathHoldingNUL(path.isEmpty ? name : "\(path).\(name)") { return found }
            }
            return nil
        case .null, .bool, .int, .double:
            return nil
        }
    }
}

extension HTTPResponse {
    /// `{"data": …}` as JSON.
    public static func data(_ data: JSON, status: Int = 200) -> HTTPResponse {
        json(["data": data], status: status)
    }

    public static func json(_ json: JSON, status: Int = 200, contentType: String = "application/json") -> HTTPResponse {
        Self.json(serialized: json.serialized(), status: status, contentType: contentType)
    }

    /// JSON serialised before (``JSON/serialized()``).
    public static func json(serialized body: [UInt8], status: Int = 200, contentType: String = "application/json") -> HTTPResponse {
        HTTPResponse(status: status, headers: HTTPHeaders([("Content-Type", contentType)]), body: body)
    }

    public static var noContent: HTTPResponse { HTTPResponse(status: 204) }
    /// 202 without a body: the work (a mail) is queued.
    public static var accepted: HTTPResponse { HTTPResponse(status: 202) }

    /// Marks a response as holding a token or secret: never cached anywhere.
    public func noStore() -> HTTPResponse {
        var copy = self
        copy.headers.set("Cache-Control", "no-store")
        return copy
    }
}
