/// Why a call to an identity provider (Apple, Google, Firebase) failed.
///
/// The associated text is for logs only, except where a method documents it as client-facing
/// (the Firebase provider pin in ``ProviderVerifier/verifyFirebase(_:projectID:expectedProvider:)``).
/// It never contains tokens, codes or secrets.
public enum ProviderError: Error, Sendable, Equatable {
    /// The provider could not be reached or answered unusably: network failure, timeout, a 5xx,
    /// an oversized response, unreadable keys, or our own provider credentials are refused.
    /// The API answers 503 `provider/unavailable`.
    case unavailable(String)
    /// The token failed verification (signature, issuer, audience, time, nonce, provider pin…).
    /// The API answers 401 `auth/invalid-credential`.
    case invalidToken(String)
    /// The provider refused the request, e.g. Apple's `/auth/token` answered `invalid_grant`.
    /// The API answers 401 `auth/invalid-credential`.
    case rejected(String)
    /// The destination resolved to an address the client's ``OutboundAddressPolicy`` refuses
    /// (loopback, private, link-local, metadata…); nothing was sent. Only clients for URLs a
    /// tenant admin sets have such a policy.
    case addressRefused(String)
}

extension ProviderError: CustomStringConvertible {
    /// `"unavailable: <reason>"` and so on, for logs.
    public var description: String {
        switch self {
        case .unavailable(let reason): "unavailable: \(reason)"
        case .invalidToken(let reason): "invalid token: \(reason)"
        case .rejected(let reason): "rejected: \(reason)"
        case .addressRefused(let reason): "address refused: \(reason)"
        }
    }
}
