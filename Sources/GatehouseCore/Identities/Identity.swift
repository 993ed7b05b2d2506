/// Who vouches for an ``Identity``: one of the built-in kinds, or one a tenant defines (any other
/// raw value). Stored and serialised as its raw value (`identities.provider`, the user object's
/// `identities`, event data); a struct of constants rather than an enum, so that a provider a
/// tenant adds is a value, not a new case every `switch` must learn.
public struct IdentityProvider: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Gatehouse's own: the subject is the email, the secret the user's password hash.
    public static let password = IdentityProvider(rawValue: "password")
    /// Sign in with Apple, natively, on the web or through a Firebase token.
    public static let apple = IdentityProvider(rawValue: "apple")
    /// Google, directly or through a Firebase token.
    public static let google = IdentityProvider(rawValue: "google")

    /// The built-in providers, in the order the API names them.
    public static let builtIn: [IdentityProvider] = [.password, .apple, .google]

    /// The `firebase.sign_in_provider` a Firebase ID token carries for this provider's accounts
    /// (nil for a provider Firebase does not federate here).
    public var firebaseSignInProvider: String? {
        switch self {
        case .apple: "apple.com"
        case .google: "google.com"
        default: nil
        }
    }

    public var description: String { rawValue }
}

/// A way to sign in: `password` (subject = the email), `apple`, `google`.
public struct Identity: Sendable, Equatable {
    public var provider: IdentityProvider
    public var subject: String
    public var email: String?
    public var createdAt: Int64

    public init(provider: IdentityProvider, subject: String, email: String?, createdAt: Int64) {
        self.provider = provider
        self.subject = subject
        self.email = email
        self.createdAt = createdAt
    }
}

/// A way to sign in: what an app offers (`sign_in_methods`), how a session was started (its
/// `method`) and what the token says (`amr`). A string only at the edges (JSON, SQL).
public enum SignInMethod: String, Sendable, CaseIterable {
    case password, emailCode = "email_code", apple, google
    /// A passkey (WebAuthn): turned on by the app's `passkeys` settings, not `sign_in_methods`.
    case passkey
    /// `POST /v1/auth/anonymous`: no credential at all. Turned on by the app's `allow_anonymous`.
    case anonymous
    /// A provider the tenant defines (`oidc_providers`): the session's method; the events name the provider's id.
    case external

    /// The methods an app lists in `sign_in_methods`.
    public static let configurable: [SignInMethod] = [.password, .emailCode, .apple, .google]

    /// A new app's methods. Sign-in by emailed code is the app's choice: it needs a mailer that
    /// delivers (an app `email.smtp_url` or the platform's `GATEHOUSE_SMTP_URL`).
    public static let defaults: [SignInMethod] = [.password, .apple, .google]

    public var amr: String {
        switch self {
        case .password: "pwd"
        case .emailCode: "otp"
        case .apple, .google: rawValue
        // Refined at sign-in to `swk` for a synced (backup-eligible) passkey (``Session/amr``).
        case .passkey: "hwk"
        // No credential was checked: nothing of RFC 8176 says so; ours, like Supabase's `anonymous`.
        case .anonymous: "anon"
        // RFC 8176 has no member for "an identity provider we federate with"; API.md names `ext`.
        case .external: "ext"
        }
    }
}
