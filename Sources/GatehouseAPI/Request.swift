import GatehouseCore
import GatehouseHTTP

/// What a handler receives: the HTTP request, its route's path parameters and its request id.
public struct Request: Sendable {
    public let http: HTTPRequest
    public let parameters: [String: String]
    public let requestID: String
    /// The client's address, through `GATEHOUSE_TRUSTED_PROXIES` (see `ClientAddress`).
    public let clientIP: String

    public func header(_ name: String) -> String? { http.headers[name] }

    /// The multipart body of a `.multipart` route: its text fields and spooled files.
    public var upload: Upload? { http.upload }

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

    /// The bearer token of `Authorization`, or nil.
    public var bearerToken: String? {
        // On the UTF-8 view: Foundation's trimming walks UTF-16 and cost more than verifying the token.
        guard let value = http.headers["Authorization"] else { return nil }
        let bytes = value.utf8
        guard bytes.count > 7, bytes.prefix(7).lazy.map({ $0 | 0x20 }).elementsEqual("bearer ".utf8) else { return nil }
        let token = bytes.dropFirst(7).drop { $0 == 0x20 || $0 == 0x09 }
        let end = token.lastIndex { $0 != 0x20 && $0 != 0x09 }
        guard let end else { return nil }
        return String(decoding: token[token.startIndex...end], as: UTF8.self)
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
