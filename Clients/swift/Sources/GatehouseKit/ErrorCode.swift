/// Every error code Gatehouse answers, as listed in docs/errors.md (a test keeps the two equal).
/// Branch on these, never on a problem's `title` or `detail`. A code this version does not know
/// (a newer server) arrives as ``unknown(_:)``.
public enum ErrorCode: Sendable, Hashable, CustomStringConvertible {
    /// `request/validation-failed`
    case validationFailed
    /// `request/malformed`
    case malformedRequest
    /// `request/not-found`
    case notFound
    /// `request/method-not-allowed`
    case methodNotAllowed
    /// `request/payload-too-large`
    case payloadTooLarge
    /// `request/uri-too-long`
    case uriTooLong
    /// `request/unsupported-media-type`
    case unsupportedMediaType
    /// `request/headers-too-large`
    case headersTooLarge
    /// `request/timeout`: the request's body came too slowly and the server closed the connection.
    case requestTimeout
    /// `app/missing-key`
    case missingAppKey
    /// `app/invalid-key`
    case invalidAppKey
    /// `admin/app-key-taken`
    case appKeyTaken
    /// `admin/hash-export-disabled`
    case hashExportDisabled
    /// `auth/missing-token`
    case missingToken
    /// `auth/invalid-token`
    case invalidToken
    /// `auth/token-expired`
    case tokenExpired
    /// `auth/session-revoked`
    case sessionRevoked
    /// `auth/invalid-refresh-token`
    case invalidRefreshToken
    /// `auth/refresh-token-reused`
    case refreshTokenReused
    /// `auth/invalid-credential`
    case invalidCredential
    /// `auth/email-already-in-use`
    case emailAlreadyInUse
    /// `auth/weak-password`
    case weakPassword
    /// `auth/signup-disabled`
    case signupDisabled
    /// `auth/sign-in-method-disabled`
    case signInMethodDisabled
    /// `auth/credential-already-in-use`
    case credentialAlreadyInUse
    /// `auth/account-exists-with-different-credential`
    case accountExistsWithDifferentCredential
    /// `auth/last-sign-in-method`
    case lastSignInMethod
    /// `auth/provider-not-configured`
    case providerNotConfigured
    /// `auth/invalid-redirect-uri`
    case invalidRedirectURI
    /// `auth/invalid-flow`
    case invalidFlow
    /// `auth/invalid-login-code`
    case invalidLoginCode
    /// `provider/unavailable`
    case providerUnavailable
    /// `auth/requires-recent-login`
    case requiresRecentLogin
    /// `auth/invalid-code`
    case invalidCode
    /// `auth/mfa-required`: thrown as ``GatehouseError/mfaRequired(_:)``, which carries the challenge.
    case mfaRequired
    /// `auth/invalid-mfa-token`: the second step's `mfa_token` is unknown, expired or used; sign in again.
    case invalidMFAToken
    /// `auth/anonymous-user`: an anonymous account asked for what needs a way to sign in first (a
    /// second factor, a passkey); upgrade it first.
    case anonymousUser
    /// `auth/code-expired`
    case codeExpired
    /// `auth/user-disabled`
    case userDisabled
    /// `auth/email-not-verified`
    case emailNotVerified
    /// `auth/too-many-attempts`
    case tooManyAttempts
    /// `auth/too-many-requests`
    case tooManyRequests
    /// `files/unsupported-type`
    case unsupportedFileType
    /// `files/quota-exceeded`
    case quotaExceeded
    /// `outbox/not-dead`
    case outboxItemNotDead
    /// `outbox/payload-erased`
    case outboxPayloadErased
    /// `email/test-failed`: an admin's test message was not taken by the app's SMTP server.
    case emailTestFailed
    /// `server/internal`
    case serverInternal
    /// `server/unavailable`
    case serverUnavailable
    /// `server/busy`
    case serverBusy
    /// A code not in this version's catalogue.
    case unknown(String)

    /// Every documented code, in docs/errors.md's order.
    public static let documented: [ErrorCode] = [
        .validationFailed,
        .malformedRequest,
        .notFound,
        .methodNotAllowed,
        .payloadTooLarge,
        .uriTooLong,
        .unsupportedMediaType,
        .headersTooLarge, .requestTimeout,
        .missingAppKey,
        .invalidAppKey,
        .appKeyTaken, .hashExportDisabled,
        .missingToken,
        .invalidToken,
        .tokenExpired,
        .sessionRevoked,
        .invalidRefreshToken,
        .refreshTokenReused,
        .invalidCredential,
        .emailAlreadyInUse,
        .weakPassword,
        .signupDisabled,
        .signInMethodDisabled,
        .credentialAlreadyInUse,
        .accountExistsWithDifferentCredential,
        .lastSignInMethod,
        .providerNotConfigured,
        .invalidRedirectURI,
        .invalidFlow,
        .invalidLoginCode,
        .providerUnavailable,
        .requiresRecentLogin,
        .invalidCode,
        .mfaRequired,
        .invalidMFAToken,
        .anonymousUser,
        .codeExpired,
        .userDisabled,
        .emailNotVerified,
        .tooManyAttempts,
        .tooManyRequests,
        .unsupportedFileType,
        .quotaExceeded,
        .outboxItemNotDead,
        .outboxPayloadErased,
        .emailTestFailed,
        .serverInternal,
        .serverUnavailable,
        .serverBusy,
    ]

    /// The code as the server writes it, e.g. `auth/requires-recent-login`.
    public var rawValue: String {
        switch self {
        case .validationFailed: "request/validation-failed"
        case .malformedRequest: "request/malformed"
        case .notFound: "request/not-found"
        case .methodNotAllowed: "request/method-not-allowed"
        case .payloadTooLarge: "request/payload-too-large"
        case .uriTooLong: "request/uri-too-long"
        case .unsupportedMediaType: "request/unsupported-media-type"
        case .headersTooLarge: "request/headers-too-large"
        case .requestTimeout: "request/timeout"
        case .missingAppKey: "app/missing-key"
        case .invalidAppKey: "app/invalid-key"
        case .appKeyTaken: "admin/app-key-taken"
        case .hashExportDisabled: "admin/hash-export-disabled"
        case .missingToken: "auth/missing-token"
        case .invalidToken: "auth/invalid-token"
        case .tokenExpired: "auth/token-expired"
        case .sessionRevoked: "auth/session-revoked"
        case .invalidRefreshToken: "auth/invalid-refresh-token"
        case .refreshTokenReused: "auth/refresh-token-reused"
        case .invalidCredential: "auth/invalid-credential"
        case .emailAlreadyInUse: "auth/email-already-in-use"
        case .weakPassword: "auth/weak-password"
        case .signupDisabled: "auth/signup-disabled"
        case .signInMethodDisabled: "auth/sign-in-method-disabled"
        case .credentialAlreadyInUse: "auth/credential-already-in-use"
        case .accountExistsWithDifferentCredential: "auth/account-exists-with-different-credential"
        case .lastSignInMethod: "auth/last-sign-in-method"
        case .providerNotConfigured: "auth/provider-not-configured"
        case .invalidRedirectURI: "auth/invalid-redirect-uri"
        case .invalidFlow: "auth/invalid-flow"
        case .invalidLoginCode: "auth/invalid-login-code"
        case .providerUnavailable: "provider/unavailable"
        case .requiresRecentLogin: "auth/requires-recent-login"
        case .invalidCode: "auth/invalid-code"
        case .mfaRequired: "auth/mfa-required"
        case .invalidMFAToken: "auth/invalid-mfa-token"
        case .anonymousUser: "auth/anonymous-user"
        case .codeExpired: "auth/code-expired"
        case .userDisabled: "auth/user-disabled"
        case .emailNotVerified: "auth/email-not-verified"
        case .tooManyAttempts: "auth/too-many-attempts"
        case .tooManyRequests: "auth/too-many-requests"
        case .unsupportedFileType: "files/unsupported-type"
        case .quotaExceeded: "files/quota-exceeded"
        case .outboxItemNotDead: "outbox/not-dead"
        case .outboxPayloadErased: "outbox/payload-erased"
        case .emailTestFailed: "email/test-failed"
        case .serverInternal: "server/internal"
        case .serverUnavailable: "server/unavailable"
        case .serverBusy: "server/busy"
        case .unknown(let code): code
        }
    }

    /// The code for `rawValue`; ``unknown(_:)`` when it is not in the catalogue.
    public init(rawValue: String) {
        self = Self.byRawValue[rawValue] ?? .unknown(rawValue)
    }

    private static let byRawValue: [String: ErrorCode] = Dictionary(uniqueKeysWithValues: documented.map { ($0.rawValue, $0) })

    public var description: String { rawValue }
}
