/// A stable error code, as clients see it in problem+json `code`. The catalogue below is the only
/// place codes are defined; `docs/errors.md` lists the same codes and a test keeps the two in step.
/// A struct (not an enum) so that adding a code never breaks anyone's `switch`.
public struct ErrorCode: Sendable, Hashable, CustomStringConvertible {
    /// The wire string, e.g. `auth/requires-recent-login`.
    public let rawValue: String
    /// The HTTP status the contract gives this code.
    public let status: Int
    /// A short, fixed human title.
    public let title: String

    private init(_ rawValue: String, _ status: Int, _ title: String) {
        self.rawValue = rawValue
        self.status = status
        self.title = title
    }

    public var description: String { rawValue }
    public static func == (a: ErrorCode, b: ErrorCode) -> Bool { a.rawValue == b.rawValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }

    // MARK: request/
    public static let validationFailed = ErrorCode("request/validation-failed", 400, "The request is not valid")
    public static let malformedRequest = ErrorCode("request/malformed", 400, "Malformed HTTP request")
    public static let notFound = ErrorCode("request/not-found", 404, "Not found")
    public static let methodNotAllowed = ErrorCode("request/method-not-allowed", 405, "Method not allowed")
    public static let requestTimeout = ErrorCode("request/timeout", 408, "Request timeout")
    public static let payloadTooLarge = ErrorCode("request/payload-too-large", 413, "Payload too large")
    public static let uriTooLong = ErrorCode("request/uri-too-long", 414, "URI too long")
    public static let unsupportedMediaType = ErrorCode("request/unsupported-media-type", 415, "Unsupported media type")
    public static let headersTooLarge = ErrorCode("request/headers-too-large", 431, "Request header fields too large")

    // MARK: app/
    public static let missingAppKey = ErrorCode("app/missing-key", 401, "Missing app key")
    public static let invalidAppKey = ErrorCode("app/invalid-key", 401, "Invalid app key")

    // MARK: admin/
    public static let appKeyTaken = ErrorCode("admin/app-key-taken", 409, "The app key is used by another app")
    /// `GET /v1/admin/users/export?include_hashes=true` by an app whose `allow_hash_export` is off.
    public static let hashExportDisabled = ErrorCode("admin/hash-export-disabled", 403, "Password hash export not allowed")

    // MARK: auth/
    public static let missingToken = ErrorCode("auth/missing-token", 401, "Missing bearer token")
    public static let invalidToken = ErrorCode("auth/invalid-token", 401, "Invalid token")
    public static let tokenExpired = ErrorCode("auth/token-expired", 401, "Token expired")
    public static let sessionRevoked = ErrorCode("auth/session-revoked", 401, "Session ended")
    public static let invalidRefreshToken = ErrorCode("auth/invalid-refresh-token", 401, "Invalid refresh token")
    public static let refreshTokenReused = ErrorCode("auth/refresh-token-reused", 401, "Refresh token reused")
    public static let invalidCredential = ErrorCode("auth/invalid-credential", 400, "Invalid credential")
    public static let emailAlreadyInUse = ErrorCode("auth/email-already-in-use", 409, "Email already in use")
    public static let weakPassword = ErrorCode("auth/weak-password", 400, "Password too weak")
    public static let signupDisabled = ErrorCode("auth/signup-disabled", 403, "Sign-up disabled")
    public static let requiresRecentLogin = ErrorCode("auth/requires-recent-login", 403, "Recent sign-in required")
    public static let tooManyRequests = ErrorCode("auth/too-many-requests", 429, "Too many requests")
    public static let signInMethodDisabled = ErrorCode("auth/sign-in-method-disabled", 403, "Sign-in method disabled")
    public static let credentialAlreadyInUse = ErrorCode("auth/credential-already-in-use", 409, "Credential already in use")
    public static let accountExistsWithDifferentCredential = ErrorCode(
        "auth/account-exists-with-different-credential", 409, "An account with this email exists")
    public static let providerNotConfigured = ErrorCode("auth/provider-not-configured", 503, "Provider not configured")
    public static let lastSignInMethod = ErrorCode("auth/last-sign-in-method", 409, "Last sign-in method")
    public static let providerUnavailable = ErrorCode("provider/unavailable", 503, "Provider unavailable")
    public static let invalidRedirectURI = ErrorCode("auth/invalid-redirect-uri", 400, "Invalid redirect URI")
    public static let invalidFlow = ErrorCode("auth/invalid-flow", 400, "Invalid sign-in flow")
    public static let invalidLoginCode = ErrorCode("auth/invalid-login-code", 400, "Invalid login code")
    public static let invalidCode = ErrorCode("auth/invalid-code", 400, "Invalid code")
    public static let codeExpired = ErrorCode("auth/code-expired", 400, "Code expired")
    public static let tooManyAttempts = ErrorCode("auth/too-many-attempts", 429, "Too many attempts")
    public static let userDisabled = ErrorCode("auth/user-disabled", 403, "User disabled")
    public static let emailNotVerified = ErrorCode("auth/email-not-verified", 403, "Email not verified")
    /// The first factor was right; the second step (`POST /v1/auth/mfa/verify`) opens the session.
    public static let mfaRequired = ErrorCode("auth/mfa-required", 401, "Second factor required")
    /// An mfa_token that is unknown, expired, used, or another app's.
    public static let invalidMFAToken = ErrorCode("auth/invalid-mfa-token", 401, "Invalid MFA token")
    /// An anonymous account (`POST /v1/auth/anonymous`) asked for what needs a way to sign in
    /// first (a second factor, a passkey): upgrade it, then ask again.
    public static let anonymousUser = ErrorCode("auth/anonymous-user", 403, "Anonymous user")

    // MARK: files/
    public static let unsupportedFileType = ErrorCode("files/unsupported-type", 415, "Unsupported file type")
    public static let quotaExceeded = ErrorCode("files/quota-exceeded", 403, "File quota exceeded")

    // MARK: outbox/
    /// A retry of an outbox item that is not dead (queued, in flight or delivered).
    public static let outboxItemNotDead = ErrorCode("outbox/not-dead", 409, "Outbox item not dead")
    /// A retry of a dead item whose sealed payload was erased (30 days after it died).
    public static let outboxPayloadErased = ErrorCode("outbox/payload-erased", 410, "Outbox item payload erased")

    // MARK: email/
    /// An admin's test message (`POST /v1/admin/app/email/test`) that the app's SMTP server did
    /// not take; the problem's `reason` says why (connection, tls, authentication, sender,
    /// recipient, timeout, refused_address, other).
    public static let emailTestFailed = ErrorCode("email/test-failed", 502, "Test message not sent")

    // MARK: server/
    public static let internalError = ErrorCode("server/internal", 500, "Internal server error")
    public static let unavailable = ErrorCode("server/unavailable", 503, "Service unavailable")
    public static let busy = ErrorCode("server/busy", 503, "Server busy")

    /// Every code, for the documentation test.
    public static let all: [ErrorCode] = [
        validationFailed, malformedRequest, notFound, methodNotAllowed, requestTimeout, payloadTooLarge, uriTooLong, unsupportedMediaType,
        headersTooLarge, missingAppKey, invalidAppKey, appKeyTaken, hashExportDisabled, missingToken, invalidToken, tokenExpired, sessionRevoked,
        invalidRefreshToken, refreshTokenReused, invalidCredential, emailAlreadyInUse, weakPassword, signupDisabled,
        requiresRecentLogin, tooManyRequests, signInMethodDisabled, credentialAlreadyInUse, accountExistsWithDifferentCredential,
        providerNotConfigured, lastSignInMethod, providerUnavailable, invalidRedirectURI, invalidFlow, invalidLoginCode,
        invalidCode, codeExpired, tooManyAttempts, userDisabled, emailNotVerified, mfaRequired, invalidMFAToken, anonymousUser, unsupportedFileType, quotaExceeded,
        outboxItemNotDead, outboxPayloadErased, emailTestFailed, internalError, unavailable, busy,
    ]
}

/// One field's problem in a `request/validation-failed` error.
public struct FieldError: Sendable, Equatable {
    /// The field's path, dotted for nested fields (`apple.client_ids`, `redirect_uris[2]`).
    public let field: String
    public let message: String
    public init(_ field: String, _ message: String) {
        self.field = field
        self.message = message
    }
}

/// The one error type the domain throws towards clients. Anything else that reaches the HTTP
/// layer is an internal error: logged, answered as a bare 500, its text never sent.
public struct GatehouseError: Error, Sendable {
    public let code: ErrorCode
    /// Safe, client-facing detail. Never contains secrets or internal causes.
    public let detail: String?
    public var fieldErrors: [FieldError]
    /// Seconds, for 429/503 answers (`Retry-After`).
    public var retryAfter: Int?
    /// Problem extensions beyond `errors` and `retry_after` (a ban's `sanction_code` and
    /// `suspended_until`).
    public var extensions: [String: JSON] = [:]

    /// The HTTP status: the code's, unless the contract gives this use of the code another
    /// (`auth/invalid-credential` is 400 for passwords and 401 for provider tokens).
    public let status: Int

    public init(_ code: ErrorCode, _ detail: String? = nil, fieldErrors: [FieldError] = [], retryAfter: Int? = nil, status: Int? = nil) {
        self.code = code
        self.status = status ?? code.status
        self.detail = detail
        self.fieldErrors = fieldErrors
        self.retryAfter = retryAfter
    }

    /// A `request/validation-failed` error for one or more fields.
    public static func validation(_ errors: [FieldError]) -> GatehouseError {
        GatehouseError(.validationFailed, errors.count == 1 ? errors[0].message : "Some fields are not valid.", fieldErrors: errors)
    }

    public static func validation(_ field: String, _ message: String) -> GatehouseError {
        validation([FieldError(field, message)])
    }
}
