import GatehouseCore
import GatehouseProviders

/// The domain's `IdentityProviders` over the HTTP providers, with their errors mapped to the
/// contract: a token or code that does not verify → 401 `auth/invalid-credential`; a provider
/// that cannot be reached → 503 `provider/unavailable`.
struct ProviderAdapter: IdentityProviders {
    let verifier: ProviderVerifier
    let apple: AppleClient
    let log: Log

    func verifyApple(_ token: String, audiences: [String], expectedNonceHash: String?) throws -> ExternalIdentity {
        do { return external(try verifier.verifyApple(token, audiences: audiences, expectedNonceHash: expectedNonceHash)) } catch { throw map(error) }
    }

    func verifyGoogle(_ token: String, audiences: [String], nonce: String?) throws -> ExternalIdentity {
        do { return external(try verifier.verifyGoogle(token, audiences: audiences, nonce: nonce)) } catch { throw map(error) }
    }

    func verifyFirebase(_ token: String, projectID: String, expectedProvider: String) throws -> ExternalIdentity {
        do { return external(try verifier.verifyFirebase(token, projectID: projectID, expectedProvider: expectedProvider)) } catch { throw map(error) }
    }

    func exchangeAppleCode(_ code: String, clientID: String, redirectURI: String?, credentials: AppleCredentials) throws -> (idToken: String, refreshToken: String?) {
        do {
            return try apple.exchange(code: code, clientID: clientID, redirectURI: redirectURI, credentials: credentials)
        } catch {
            throw map(error)
        }
    }

    func revokeAppleToken(_ refreshToken: String, clientID: String, credentials: AppleCredentials) throws {
        do { try apple.revoke(refreshToken: refreshToken, clientID: clientID, credentials: credentials) } catch { throw map(error) }
    }

    func appleAuthorizeURL(servicesID: String, redirectURI: String, state: String, nonce: String) -> String {
        apple.authorizeURL(servicesID: servicesID, redirectURI: redirectURI, state: state, nonce: nonce)
    }

    private func external(_ identity: ProviderIdentity) -> ExternalIdentity {
        var external = ExternalIdentity(
            subject: identity.subject, email: identity.email, emailVerified: identity.emailVerified, isPrivateRelayEmail: identity.isPrivateRelayEmail,
            audience: identity.audience, firstName: identity.name?.first, lastName: identity.name?.last)
        external.token = ExternalIdentity.TokenFacts(
            issuer: identity.issuer, issuedAt: identity.issuedAt, expiresAt: identity.expiresAt, authTime: identity.authTime, nonce: identity.nonce)
        return external
    }

    private func map(_ error: ProviderError) -> GatehouseError {
        switch error {
        case .unavailable(let why), .addressRefused(let why):  // providers' URLs are the server's own: never refused
            log.warning("identity provider unavailable", ["reason": .string(why)])
            return GatehouseError(.providerUnavailable, "The identity provider cannot be reached; retry later.", retryAfter: 5)
        case .invalidToken:
            // The Firebase provider pin's text is part of the contract; other reasons stay out of answers.
            return GatehouseError(.invalidCredential, error.clientDetail ?? "The token could not be verified.", status: 401)
        case .rejected:
            return GatehouseError(.invalidCredential, "The provider refused the authorization code.", status: 401)
        }
    }
}
