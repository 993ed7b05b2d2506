/// What the domain needs for the web flow of the providers an app defines (`oidc_providers`, API.md
/// "More providers"): where to send the browser, and who signed in once the provider sent it back
/// with a code. Implemented over HTTP in `GatehouseProviders` (``ProviderFailure`` as
/// ``IdentityProviders`` throws it).
///
/// The kinds with ID tokens (`oidc`, `kakao`, `line`, `microsoft`) take their authorization and
/// token endpoints from the issuer's discovery document; Naver and GitHub have fixed endpoints and
/// no ID token, so the code's access token is read as ``AccessTokenProfiles`` reads one.
public protocol TenantWebFlows: Sendable {
    /// The provider's authorization URL for a flow whose `state` and `nonce` are given, coming back
    /// to `callbackURL`. The client id is the provider's first; its scopes are the kind's own
    /// (`openid` …) and the provider's `scopes`; where the provider takes PKCE, the S256
    /// challenge of `codeVerifier`. `app` keys the per-app bound on provider calls.
    func authorizeURL(
        app: AppID, provider: AppSettings.OIDCProvider, callbackURL: String, state: String, nonce: String, codeVerifier: String
    ) throws(ProviderFailure) -> String

    /// Redeems `code` at the provider's token endpoint (with the first client id and the client
    /// secret) and answers who signed in: the ID token verified as a native one is, with `nonce`
    /// (so a code from another flow is refused), or the profile the access token reads; with
    /// `codeVerifier` where the authorization request had its challenge.
    /// A code the provider refuses is ``ProviderFailure/rejected(reason:)``.
    func redeem(
        code: String, app: AppID, provider: AppSettings.OIDCProvider, callbackURL: String, state: String, nonce: String, codeVerifier: String
    ) throws(ProviderFailure) -> ExternalIdentity
}
