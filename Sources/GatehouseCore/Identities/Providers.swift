/// A user as a provider vouches for them, after the provider's token was verified.
public struct ExternalIdentity: Sendable, Equatable {
    /// The provider's stable id of the user (Apple's or Google's `sub`).
    public var subject: String
    public var email: String?
    public var emailVerified: Bool
    public var isPrivateRelayEmail: Bool
    /// The audience the token was issued to (for Apple: the bundle or Services ID used).
    public var audience: String
    public var firstName: String?
    public var lastName: String?
    /// The name the provider shows for the user when it has no given/family split (Naver's
    /// `name` or `nickname`, GitHub's `name` or `login`); nil for the ID-token providers.
    public var displayName: String?
    /// What the token says of itself: its issuer, when it was issued and expires (seconds), the
    /// provider sign-in time when it carries one (Firebase's `auth_time`), and its `nonce` claim.
    public var token = TokenFacts()

    public struct TokenFacts: Sendable, Equatable {
        public var issuer = ""
        public var issuedAt: Int64 = 0
        public var expiresAt: Int64 = 0
        public var authTime: Int64?
        public var nonce: String?
        public init(issuer: String = "", issuedAt: Int64 = 0, expiresAt: Int64 = 0, authTime: Int64? = nil, nonce: String? = nil) {
            self.issuer = issuer
            self.issuedAt = issuedAt
            self.expiresAt = expiresAt
            self.authTime = authTime
            self.nonce = nonce
        }
        /// When the user last proved themselves to the provider: `auth_time` if given, else `iat`.
        public var signedInAt: Int64 { authTime ?? issuedAt }
    }

    public init(
        subject: String, email: String?, emailVerified: Bool, isPrivateRelayEmail: Bool = false, audience: String, firstName: String? = nil,
        lastName: String? = nil
    ) {
        self.subject = subject
        self.email = email
        self.emailVerified = emailVerified
        self.isPrivateRelayEmail = isPrivateRelayEmail
        self.audience = audience
        self.firstName = firstName
        self.lastName = lastName
    }
}

/// A provider refresh token kept for revocation at account deletion, as stored.
public struct StoredProviderToken: Sendable, Equatable {
    public var provider: IdentityProvider
    /// The client id the token was issued to (the bundle id or the Services ID).
    public var clientID: String
    /// Sealed with ``SecretSealer`` under ``fieldName(user:clientID:)``.
    public var sealedToken: String

    public init(provider: IdentityProvider, clientID: String, sealedToken: String) {
        self.provider = provider
        self.clientID = clientID
        self.sealedToken = sealedToken
    }

    /// The sealing field of a user's Apple refresh token for one client id.
    public static func appleFieldName(user: UserID, clientID: String) -> String { "apple_refresh_token/\(user.rawValue)/\(clientID)" }
}

/// An app's Apple key, for client secrets.
public struct AppleCredentials: Sendable {
    public var teamID: String
    public var keyID: String
    public var privateKeyPEM: String
    public init(teamID: String, keyID: String, privateKeyPEM: String) {
        self.teamID = teamID
        self.keyID = keyID
        self.privateKeyPEM = privateKeyPEM
    }
}

extension AppSettings.Apple {
    /// The app's Apple key for client secrets; nil unless team id, key id and key are all set.
    public var credentials: AppleCredentials? {
        guard let teamID, let keyID, let privateKey else { return nil }
        return AppleCredentials(teamID: teamID, keyID: keyID, privateKeyPEM: privateKey)
    }
}

/// What the domain needs from Apple, Google and Firebase. Implemented over HTTP in
/// `GatehouseProviders` (adapted in `GatehouseApp`); every failure is a ``ProviderFailure``.
public protocol IdentityProviders: Sendable {
    func verifyApple(_ token: String, audiences: [String], expectedNonceHash: String?) throws(ProviderFailure) -> ExternalIdentity
    func verifyGoogle(_ token: String, audiences: [String], nonce: String?) throws(ProviderFailure) -> ExternalIdentity
    func verifyFirebase(_ token: String, projectID: String, expectedProvider: String) throws(ProviderFailure) -> ExternalIdentity
    func exchangeAppleCode(_ code: String, clientID: String, redirectURI: String?, credentials: AppleCredentials) throws(ProviderFailure) -> (idToken: String, refreshToken: String?)
    /// Revokes a refresh token at Apple's `/auth/revoke` for `clientID`: ``ProviderFailure/rejected(reason:)``
    /// when Apple refuses the request about the token, ``ProviderFailure/unreachable(reason:)`` when it
    /// cannot be reached or refuses our credentials (worth a retry).
    func revokeAppleToken(_ refreshToken: String, clientID: String, credentials: AppleCredentials) throws(ProviderFailure)
    func appleAuthorizeURL(servicesID: String, redirectURI: String, state: String, nonce: String) -> String
    /// Verifies one of Apple's server-to-server notifications (the `payload` JWT) with Apple's
    /// keys: `iss` Apple, `aud` one of `audiences`, `iat`/`exp`, and an `events` claim that is a
    /// JSON string of `{type, sub, event_time}`. ``ProviderFailure/invalidToken(reason:clientDetail:)`` otherwise.
    func verifyAppleNotification(_ token: String, audiences: [String]) throws(ProviderFailure) -> AppleAccountEvent
    /// Verifies an ID token of a provider `app` defines (`oidc`, `kakao`, `line`, `microsoft`):
    /// the signature (the issuer's JWKS found through its discovery document; LINE's HS256 with the
    /// channel secret), `iss`, `aud` one of the provider's client ids, `exp`/`iat`, and a `nonce`
    /// claim equal to `nonce` (the raw nonce, as Google's check). `app` keys the per-app bound on
    /// fetches, so one tenant's slow issuer cannot hold every thread.
    func verifyOIDC(_ token: String, app: AppID, provider: AppSettings.OIDCProvider, nonce: String) throws(ProviderFailure) -> ExternalIdentity
}

/// A started web flow (API.md "Apple web flow", "More providers").
public struct WebFlow: Sendable, Equatable {
    /// Hash of the `state` sent to the provider.
    public var id: String
    public var appID: AppID
    /// `apple` or the id of one of the app's `oidc_providers`: the only callback that takes the flow.
    public var provider: String
    public var bindingHash: String
    /// The nonce sent to the provider (for Apple already the hash the ID token will carry; for the
    /// others the raw value their ID token carries).
    public var nonce: String
    public var redirectURI: String
    public var clientState: String?
    /// The page's PKCE challenge, for the login code.
    public var codeChallenge: String?
    /// Gatehouse's own PKCE verifier for the provider's code (a tenant provider's flow); nil for Apple.
    public var providerVerifier: String?
    public var createdAt: Int64
    public var expiresAt: Int64

    public init(
        id: String, appID: AppID, provider: String, bindingHash: String, nonce: String, redirectURI: String, clientState: String?, codeChallenge: String?,
        providerVerifier: String? = nil, createdAt: Int64, expiresAt: Int64
    ) {
        self.providerVerifier = providerVerifier
        self.id = id
        self.appID = appID
        self.provider = provider
        self.bindingHash = bindingHash
        self.nonce = nonce
        self.redirectURI = redirectURI
        self.clientState = clientState
        self.codeChallenge = codeChallenge
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

/// A one-time code that hands a web sign-in to the page (`POST /v1/auth/exchange`).
public struct LoginCode: Sendable, Equatable {
    public var codeHash: String
    public var userID: UserID
    public var method: SignInMethod
    /// The provider signed in with (`apple` or a tenant provider's id): the session events' `method`.
    public var provider: String
    public var isNewUser: Bool
    public var codeChallenge: String?
    public var createdAt: Int64
    public var expiresAt: Int64

    public init(
        codeHash: String, userID: UserID, method: SignInMethod, provider: String, isNewUser: Bool, codeChallenge: String?, createdAt: Int64, expiresAt: Int64
    ) {
        self.codeHash = codeHash
        self.userID = userID
        self.method = method
        self.provider = provider
        self.isNewUser = isNewUser
        self.codeChallenge = codeChallenge
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}
