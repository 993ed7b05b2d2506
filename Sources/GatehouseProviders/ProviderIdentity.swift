/// Who a verified provider token says the user is.
public struct ProviderIdentity: Sendable, Equatable {
    /// A name as a provider states it; either part may be missing.
    public struct Name: Sendable, Equatable {
        /// Given name.
        public var first: String?
        /// Family name.
        public var last: String?

        /// Creates a name.
        public init(first: String?, last: String?) {
            self.first = first
            self.last = last
        }
    }

    /// The provider's stable user id: Apple's or Google's `sub`. For Firebase tokens, the
    /// provider's own id from `firebase.identities` when present (so one Apple user is one
    /// account natively and through Firebase), else the Firebase uid.
    public var subject: String
    /// The email claim as given (not normalised); may be a private-relay address.
    public var email: String?
    /// `email_verified`, whether sent as a bool or as the string `"true"`.
    public var emailVerified: Bool
    /// Apple's "Hide My Email": `is_private_email`, or an `@privaterelay.appleid.com` address.
    public var isPrivateRelayEmail: Bool
    /// The `aud` that matched: the bundle id or Services ID for Apple (the `client_id` to redeem
    /// an `authorization_code` with), the client id for Google, the project id for Firebase.
    public var audience: String
    /// The name when the token carries one (Google's `given_name` / `family_name`).
    public var name: Name?
    /// The provider's one-piece name (Naver's `name` or `nickname`, GitHub's `name` or `login`),
    /// for the providers read through an API with an access token.
    public var displayName: String?
    /// `iss`, for the replay cache's key.
    public var issuer = ""
    /// `iat`, seconds since the epoch.
    public var issuedAt: Int64 = 0
    /// `exp`, seconds since the epoch.
    public var expiresAt: Int64 = 0
    /// Firebase's `auth_time`: when the user last signed in at the provider (Firebase refreshes
    /// its ID tokens hourly, so `iat` says nothing about the sign-in).
    public var authTime: Int64?
    /// The `nonce` claim as the token carries it (Apple: the hex SHA-256 of the raw nonce).
    public var nonce: String?

    /// Creates an identity.
    public init(
        subject: String, email: String? = nil, emailVerified: Bool = false, isPrivateRelayEmail: Bool = false,
        audience: String, name: Name? = nil
    ) {
        self.subject = subject
        self.email = email
        self.emailVerified = emailVerified
        self.isPrivateRelayEmail = isPrivateRelayEmail
        self.audience = audience
        self.name = name
    }
}
