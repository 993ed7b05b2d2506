import GatehouseCore
import GatehouseOutbound
import GatehouseProviders

/// The domain's `IdentityProviders` over the HTTP providers, with their errors mapped to the
/// domain's ``ProviderFailure``: a token that does not verify → `invalidToken`, a request the
/// provider refuses → `rejected`, a provider that cannot be reached → `unreachable` (logged here).
struct ProviderAdapter: IdentityProviders {
    let verifier: ProviderVerifier
    let apple: AppleClient
    let oidc: OIDCVerifier
    let log: Log

    func verifyOIDC(_ token: String, app: AppID, provider: AppSettings.OIDCProvider, nonce: String) throws(ProviderFailure) -> ExternalIdentity {
        do { return try oidc.verify(token, app: app, provider: provider, nonce: nonce).external } catch { throw map(error) }
    }

    func verifyApple(_ token: String, audiences: [String], expectedNonceHash: String?) throws(ProviderFailure) -> ExternalIdentity {
        do { return try verifier.verifyApple(token, audiences: audiences, expectedNonceHash: expectedNonceHash).external } catch { throw map(error) }
    }

    func verifyGoogle(_ token: String, audiences: [String], nonce: String?) throws(ProviderFailure) -> ExternalIdentity {
        do { return try verifier.verifyGoogle(token, audiences: audiences, nonce: nonce).external } catch { throw map(error) }
    }

    func verifyFirebase(_ token: String, projectID: String, expectedProvider: String) throws(ProviderFailure) -> ExternalIdentity {
        do { return try verifier.verifyFirebase(token, projectID: projectID, expectedProvider: expectedProvider).external } catch { throw map(error) }
    }

    func exchangeAppleCode(_ code: String, clientID: String, redirectURI: String?, credentials: AppleCredentials) throws(ProviderFailure) -> (idToken: String, refreshToken: String?) {
        do {
            return try apple.exchange(code: code, clientID: clientID, redirectURI: redirectURI, credentials: credentials)
        } catch {
            throw map(error)
        }
    }

    func revokeAppleToken(_ refreshToken: String, clientID: String, credentials: AppleCredentials) throws(ProviderFailure) {
        do { try apple.revoke(refreshToken: refreshToken, clientID: clientID, credentials: credentials) } catch { throw map(error) }
    }

    func verifyAppleNotification(_ token: String, audiences: [String]) throws(ProviderFailure) -> AppleAccountEvent {
        do { return try verifier.verifyAppleNotification(token, audiences: audiences) } catch { throw map(error) }
    }

    func appleAuthorizeURL(servicesID: String, redirectURI: String, state: String, nonce: String) -> String {
        apple.authorizeURL(servicesID: servicesID, redirectURI: redirectURI, state: state, nonce: nonce)
    }

    /// The Firebase provider pin's text is part of the contract (``ProviderError/clientDetail``);
    /// other reasons stay out of answers.
    private func map(_ error: ProviderError) -> ProviderFailure {
        if let why = error.unreachableReason { log.warning("identity provider unavailable", ["reason": .string(why)]) }
        return error.failure
    }
}
