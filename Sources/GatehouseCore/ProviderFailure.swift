/// Why a call to an identity provider (Apple, Google, Firebase) failed, as the domain sees it:
/// what ``IdentityProviders`` throws. A background handler decides on it (retry or give up), a
/// service turns it into the client's answer (``clientError``). The reasons are for logs only;
/// they never hold a token, code or secret.
public enum ProviderFailure: Error, Sendable, Equatable {
    /// The provider could not be reached or answered unusably (network, timeout, a 5xx, unreadable
    /// keys, our own credentials refused): worth a retry.
    case unreachable(reason: String)
    /// The token did not verify (signature, issuer, audience, time, nonce, provider pin…).
    /// `clientDetail` is the text the client may see (the Firebase provider pin), else nil.
    case invalidToken(reason: String, clientDetail: String?)
    /// The provider refused the request about the token or code itself (Apple's `invalid_grant`):
    /// a retry will not help.
    case rejected(reason: String)

    /// The answer a client gets: 503 `provider/unavailable` for an unreachable provider, 401
    /// `auth/invalid-credential` for a token or code it refused.
    public var clientError: GatehouseError {
        switch self {
        case .unreachable: GatehouseError(.providerUnavailable, "The identity provider cannot be reached; retry later.", retryAfter: 5)
        case .invalidToken(_, let clientDetail): GatehouseError(.invalidCredential, clientDetail ?? "The token could not be verified.", status: 401)
        case .rejected: GatehouseError(.invalidCredential, "The provider refused the authorization code.", status: 401)
        }
    }
}
