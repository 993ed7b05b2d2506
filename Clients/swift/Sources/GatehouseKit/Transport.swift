import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A JSON request body: strings, booleans and nulls, and the objects and arrays of a WebAuthn
/// credential, are all Gatehouse takes from a client.
enum JSONValue: Encodable, Sendable, Equatable {
    case string(String)
    case bool(Bool)
    case null
    case object([String: JSONValue])
    case array([JSONValue])
    /// Custom data, as the app gave it.
    case metadata(MetadataValue)

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let value): try container.encode(value)
        case .bool(let value): try container.encode(value)
        case .null: try container.encodeNil()
        case .object(let members): try container.encode(members)
        case .array(let items): try container.encode(items)
        case .metadata(let value): try container.encode(value)
        }
    }
}

/// A request body.
enum RequestBody: Sendable {
    case json([String: JSONValue])
    case multipart(Data, boundary: String)
}

/// One answer.
struct HTTPAnswer: Sendable {
    let status: Int
    let body: Data
    let retryAfterHeader: String?
    let requestID: String?
    /// `Content-Type`, for a file's content.
    var contentType: String? = nil
}

/// HTTP to Gatehouse over URLSession: the app key on every call, the bearer when given, JSON in
/// and out, problems turned into ``GatehouseError/server(_:)``. Tokens never appear in a thrown
/// error's text.
struct Transport: Sendable {
    let baseURL: URL
    let appKey: String
    let session: URLSession

    /// An ephemeral session that keeps no cookies and caches nothing: token answers are
    /// `no-store`, and the refresh token travels in bodies here, not in a cookie jar.
    static func makeSession() -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpCookieAcceptPolicy = .never
        configuration.httpShouldSetCookies = false
        configuration.httpCookieStorage = nil
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.timeoutIntervalForRequest = 30
        return URLSession(configuration: configuration)
    }

    /// `path` is already percent-encoded (its variable segments went through `pathSegment`): set as
    /// a decoded `path`, an id's `%2F` would go out as `%252F`.
    func url(_ path: String, query: [URLQueryItem] = []) -> URL {
        var components = URLComponents(url: baseURL, resolvingAgainstBaseURL: false)!
        let base = components.percentEncodedPath
        components.percentEncodedPath = (base.hasSuffix("/") ? String(base.dropLast()) : base) + path
        if !query.isEmpty { components.queryItems = query }
        return components.url!
    }

    /// `headers`: set last (a file's content asks `Accept: */*` and maybe a `Range`).
    func send(
        _ method: String, _ path: String, query: [URLQueryItem] = [], body: RequestBody? = nil, bearer: String? = nil, headers: [String: String] = [:]
    ) async throws -> HTTPAnswer {
        var request = URLRequest(url: url(path, query: query))
        request.httpMethod = method
        request.setValue(appKey, forHTTPHeaderField: "X-App-Key")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        if let bearer { request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization") }
        switch body {
        case .json(let object)?:
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = try JSONEncoder().encode(object)
        case .multipart(let data, let boundary)?:
            request.setValue("multipart/form-data; boundary=\(boundary)", forHTTPHeaderField: "Content-Type")
            request.httpBody = data
        case nil:
            break
        }
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await session.data(for: request)
        } catch let error as URLError {
            throw GatehouseError.transport(error.localizedDescription)
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw GatehouseError.transport(String(describing: type(of: error)))
        }
        guard let http = response as? HTTPURLResponse else { throw GatehouseError.unexpectedResponse(status: 0) }
        return HTTPAnswer(
            status: http.statusCode, body: data, retryAfterHeader: http.value(forHTTPHeaderField: "Retry-After"),
            requestID: http.value(forHTTPHeaderField: "X-Request-Id"), contentType: http.value(forHTTPHeaderField: "Content-Type"))
    }

    // MARK: - Decoding

    static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let text = try decoder.singleValueContainer().decode(String.self)
            if let date = RFC3339.parse(text) { return date }
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "Not an RFC 3339 time"))
        }
        return decoder
    }

    private struct Envelope<Value: Decodable>: Decodable {
        let data: Value
    }

    /// `data` of a 2xx answer, or the problem thrown.
    static func decode<Value: Decodable>(_ type: Value.Type, from answer: HTTPAnswer) throws -> Value {
        try check(answer)
        do {
            return try decoder.decode(Envelope<Value>.self, from: answer.body).data
        } catch {
            throw GatehouseError.unexpectedResponse(status: answer.status)
        }
    }

    /// Throws the problem of a non-2xx answer: ``GatehouseError/mfaRequired(_:)`` for an
    /// `auth/mfa-required` that carries its `mfa_token`, ``GatehouseError/server(_:)`` otherwise.
    static func check(_ answer: HTTPAnswer) throws {
        guard (200..<300).contains(answer.status) else { throw error(answer) }
    }

    /// The error a non-2xx answer stands for.
    static func error(_ answer: HTTPAnswer) -> GatehouseError {
        let problem = problem(answer)
        if problem.code == .mfaRequired, let challenge = MFAChallenge(answer, problem: problem) { return .mfaRequired(challenge) }
        return .server(problem)
    }

    /// The problem in a non-2xx answer (a body that is not a problem still gives its status).
    static func problem(_ answer: HTTPAnswer) -> Problem {
        struct Body: Decodable {
            let code: String?
            let status: Int?
            let title: String?
            let detail: String?
            let request_id: String?
            let errors: [Problem.FieldError]?
            let retry_after: Double?
            let sanction_code: String?
            let suspended_until: Date?
        }
        let body = try? decoder.decode(Body.self, from: answer.body)
        return Problem(
            code: body?.code.map(ErrorCode.init(rawValue:)) ?? .unknown("http/\(answer.status)"), status: answer.status,
            title: body?.title, detail: body?.detail, requestID: body?.request_id ?? answer.requestID,
            fieldErrors: body?.errors ?? [], retryAfter: body?.retry_after ?? answer.retryAfterHeader.flatMap(Double.init),
            sanctionCode: body?.sanction_code, suspendedUntil: body?.suspended_until)
    }
}

/// RFC 3339 times as Gatehouse writes them (`2026-11-30T16:00:00Z`, fractions allowed).
enum RFC3339 {
    static func parse(_ text: String) -> Date? {
        if let date = try? Date(text, strategy: Date.ISO8601FormatStyle()) { return date }
        return try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}
