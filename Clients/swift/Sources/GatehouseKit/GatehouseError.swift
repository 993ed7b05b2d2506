import Foundation

/// An RFC 9457 problem as Gatehouse answers it.
public struct Problem: Sendable, Equatable {
    /// One field's validation error (`errors` of `request/validation-failed`).
    public struct FieldError: Sendable, Equatable, Decodable {
        public let field: String
        public let message: String
    }

    /// What to branch on.
    public let code: ErrorCode
    /// The HTTP status.
    public let status: Int
    /// Human-readable text, for logs: its wording may change.
    public let title: String?
    /// Human-readable text, for logs: its wording may change.
    public let detail: String?
    /// The request's id (also the `X-Request-Id` header): quote it when reporting a problem.
    public let requestID: String?
    /// Field errors of `request/validation-failed`.
    public let fieldErrors: [FieldError]
    /// Seconds to wait before retrying (429 and 503), from `retry_after` or `Retry-After`.
    public let retryAfter: TimeInterval?
    /// `auth/user-disabled`: the ban's code.
    public let sanctionCode: String?
    /// `auth/user-disabled`: when the suspension ends; `nil` for a permanent ban (or another code).
    public let suspendedUntil: Date?
}

/// What a ``GatehouseClient`` call throws.
public enum GatehouseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Gatehouse answered with a problem: branch on its ``Problem/code``.
    case server(Problem)
    /// The call needs a signed-in user and there is none (never signed in, signed out, or the
    /// session ended: see ``GatehouseClient/authEvents()``).
    case notSignedIn
    /// Gatehouse could not be reached (no network, a timeout, TLS): `description` is the system's text.
    case transport(String)
    /// An answer that is not what the contract describes (a proxy's error page, for instance).
    case unexpectedResponse(status: Int)
    /// A sign-in proved its first factor and Gatehouse asks for a second one (`auth/mfa-required`,
    /// 401): ask the user for what ``MFAChallenge/methods`` lists and finish with
    /// ``GatehouseClient/verifyMFA(_:code:)`` (or the recovery-code and passkey forms); when
    /// ``MFAChallenge/enroll`` is true, enrol a factor first (see ``MFAChallenge``).
    case mfaRequired(MFAChallenge)
    /// The web flow came back without a login code: `error` is what Gatehouse put in the redirect
    /// (`access_denied`, `user_disabled`, `server_error`, and for Apple `user_cancelled_authorize`),
    /// or `state_mismatch` / `missing_login_code` when the redirect was not for this flow.
    case webSignInFailed(error: String)

    /// The server's code, when the server answered.
    public var code: ErrorCode? {
        switch self {
        case .server(let problem): problem.code
        case .mfaRequired: .mfaRequired
        default: nil
        }
    }

    /// The second step's challenge, when the error is ``mfaRequired(_:)``.
    public var mfaChallenge: MFAChallenge? {
        if case .mfaRequired(let challenge) = self { return challenge }
        return nil
    }

    /// The action needs a recent sign-in: reauthenticate (``GatehouseClient/reauthenticate(password:)``
    /// and the others), then retry, or let ``GatehouseClient/withRecentLogin(_:reauthenticate:)`` do both.
    public var requiresRecentLogin: Bool { code == .requiresRecentLogin }

    public var description: String {
        switch self {
        case .server(let problem):
            "Gatehouse answered \(problem.status) \(problem.code)" + (problem.requestID.map { " (request \($0))" } ?? "")
        case .mfaRequired(let challenge): "Gatehouse asks for a second factor (\(challenge.methods.map(\.rawValue).joined(separator: ", ")))"
        case .notSignedIn: "Not signed in"
        case .transport(let text): "Gatehouse could not be reached: \(text)"
        case .unexpectedResponse(let status): "Unexpected answer from Gatehouse (HTTP \(status))"
        case .webSignInFailed(let error): "The web sign-in did not complete: \(error)"
        }
    }
}
