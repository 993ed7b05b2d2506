import GatehouseCore
import GatehouseHTTP

/// The one place errors become responses (RFC 9457 problem+json). A `GatehouseError` shows its
/// code, title and detail; anything else is logged with the request id and answered as a bare 500
/// whose body says nothing about the cause.
enum Problem {
    static func response(for error: any Error, instance: String, requestID: String, log: any LogSink) -> HTTPResponse {
        if let error = error as? GatehouseError { return response(error, instance: instance, requestID: requestID) }
        if let error = error as? any StoreFailure, error.isInvalidValue {
            return response(GatehouseError(.validationFailed, "A value holds a NUL character (U+0000), which is never valid."), instance: instance, requestID: requestID)
        }
        if let error = error as? any StoreFailure, error.isUnavailable {
            log.error("database unavailable", ["request_id": .string(requestID), "error": .string(error.description)])
            return response(GatehouseError(.unavailable, "The database is busy or unreachable; retry shortly.", retryAfter: 1), instance: instance, requestID: requestID)
        }
        log.error("unhandled error", ["request_id": .string(requestID), "error": .string(String(describing: error))])
        return response(GatehouseError(.internalError, "Something went wrong on our side. Quote the request id when you report it."), instance: instance, requestID: requestID)
    }

    static func response(_ error: GatehouseError, instance: String, requestID: String) -> HTTPResponse {
        RequestLogContext.current?.errorCode = error.code.rawValue
        var body: [String: JSON] = [
            "type": .string("urn:gatehouse:error:\(error.code.rawValue)"),
            "title": .string(error.code.title),
            "status": .int(Int64(error.status)),
            "code": .string(error.code.rawValue),
            "detail": .string(error.detail ?? error.code.title),
            "instance": .string(instance),
            "request_id": .string(requestID),
        ]
        if !error.fieldErrors.isEmpty {
            body["errors"] = .array(error.fieldErrors.map { ["field": .string($0.field), "message": .string($0.message)] })
        }
        if let retryAfter = error.retryAfter { body["retry_after"] = .int(Int64(retryAfter)) }
        for (name, value) in error.extensions where body[name] == nil { body[name] = value }
        var response = HTTPResponse.json(.object(body), status: error.status, contentType: "application/problem+json")
        if let retryAfter = error.retryAfter { response.headers.set("Retry-After", String(retryAfter)) }
        // RFC 6750's challenge on the 401s about the bearer token (RFC 9110 wants one on a 401).
        switch error.code {
        case .missingToken: response.headers.set("WWW-Authenticate", "Bearer")
        case .invalidToken, .tokenExpired, .sessionRevoked: response.headers.set("WWW-Authenticate", #"Bearer error="invalid_token""#)
        default: break
        }
        response.headers.set("Cache-Control", "no-store")
        response.headers.set("X-Request-Id", requestID)
        return response
    }
}
