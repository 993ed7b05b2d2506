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

    /// The body as a JSON object. An empty body is `{}` only when `allowEmpty`.
    public func jsonBody(allowEmpty: Bool = false) throws(GatehouseError) -> JSON {
        if http.body.isEmpty {
            if allowEmpty { return .object([:]) }
            throw GatehouseError.validation("body", "A JSON object is required.")
        }
        let json: JSON
        do { json = try JSON.parse(http.body) } catch { throw GatehouseError.validation("body", "Not valid JSON (UTF-8).") }
        guard case .object = json else { throw GatehouseError.validation("body", "Must be a JSON object.") }
        return json
    }

    /// The bearer token of `Authorization`, or nil.
    public var bearerToken: String? {
        guard let value = http.headers["Authorization"] else { return nil }
        let parts = value.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = parts[1].trimmingCharacters(in: .whitespaces)
        return token.isEmpty ? nil : token
    }
}

extension HTTPResponse {
    /// `{"data": …}` as JSON.
    public static func data(_ data: JSON, status: Int = 200) -> HTTPResponse {
        json(["data": data], status: status)
    }

    public static func json(_ json: JSON, status: Int = 200, contentType: String = "application/json") -> HTTPResponse {
        HTTPResponse(status: status, headers: HTTPHeaders([("Content-Type", contentType)]), body: json.serialized())
    }

    public static var noContent: HTTPResponse { HTTPResponse(status: 204) }

    /// Marks a response as holding a token or secret: never cached anywhere.
    public func noStore() -> HTTPResponse {
        var copy = self
        copy.headers.set("Cache-Control", "no-store")
        return copy
    }
}
