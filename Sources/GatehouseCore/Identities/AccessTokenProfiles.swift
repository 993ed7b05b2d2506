/// A provider kind that issues no ID token: the user is read from the provider's API with an
/// OAuth access token (API.md "More providers": `POST /v1/auth/oidc/{id}` with `{access_token}`).
public enum AccessTokenProviderKind: String, Sendable, CaseIterable {
    /// Naver Login: `GET /v1/nid/me`.
    case naver
    /// GitHub: the token checked against the app's OAuth app, then `GET /user` and `GET /user/emails`.
    case github
}

/// What the domain needs from the providers that sign users in with an access token. Implemented
/// over HTTP in `GatehouseProviders` (adapted in `GatehouseApp`); every failure is a
/// ``ProviderFailure``: a token the provider does not accept, or one issued to another app, is
/// ``ProviderFailure/invalidToken(reason:clientDetail:)``; a provider that cannot be reached,
/// answers a 5xx or an unreadable body, or refuses our own client credentials is
/// ``ProviderFailure/unreachable(reason:)``.
public protocol AccessTokenProfiles: Sendable {
    /// The user behind `accessToken` at the provider of `kind`, for the app whose client ids at
    /// that provider are `clientIDs` (with `clientSecret`, the provider's secret for them).
    ///
    /// - `github`: the token must belong to one of `clientIDs` (GitHub's "check a token" with the
    ///   client id and `clientSecret`); without a secret nothing can be checked and the call is
    ///   ``ProviderFailure/unreachable(reason:)`` (a configuration problem, never a sign-in with an
    ///   unchecked token). The subject is GitHub's numeric user id; the email is the primary
    ///   verified one, or none.
    /// - `naver`: Naver offers no way to learn which client a token was issued to; its member
    ///   ids are per application, so a token of another application names another id, never the
    ///   id our users have. The email is never vouched for (``ExternalIdentity/emailVerified`` is
    ///   false). `clientSecret` is not used.
    ///
    /// The identity's ``ExternalIdentity/audience`` is the client id the token was checked
    /// against (GitHub) or the first of `clientIDs` (Naver: unknown). Its ``ExternalIdentity/token``
    /// facts stay empty: an access token says nothing of when the user signed in.
    func profile(kind: AccessTokenProviderKind, accessToken: String, clientIDs: [String], clientSecret: String?) throws(ProviderFailure) -> ExternalIdentity
}
