/// One of Apple's server-to-server notifications for Sign in with Apple, once its JWT has been
/// verified (``IdentityProviders/verifyAppleNotification(_:audiences:)``): what the `events` claim
/// says happened to a user's Apple account.
public struct AppleAccountEvent: Sendable, Equatable {
    /// The event types Apple sends.
    public enum Kind: String, Sendable, CaseIterable {
        /// The user turned off forwarding from their private relay address (Hide My Email).
        case emailDisabled = "email-disabled"
        /// The user turned forwarding from their private relay address on again.
        case emailEnabled = "email-enabled"
        /// The user stopped using Sign in with Apple with the app.
        case consentRevoked = "consent-revoked"
        /// The user deleted their Apple account.
        case accountDeleted = "account-delete"
    }

    /// The `type` as Apple sent it; ``kind`` is nil for a type this version does not know.
    public var type: String
    /// Apple's user id: the `sub` of the user's identity tokens.
    public var subject: String
    /// When it happened at Apple, in milliseconds since the epoch (`event_time`).
    public var eventTime: Int64
    /// The relay address, for the email events.
    public var email: String?
    /// `is_private_email`, when sent (as a bool or as `"true"`/`"false"`).
    public var isPrivateEmail: Bool?
    /// The `aud` that matched: one of the app's Apple client ids.
    public var audience: String

    public var kind: Kind? { Kind(rawValue: type) }

    public init(type: String, subject: String, eventTime: Int64, email: String? = nil, isPrivateEmail: Bool? = nil, audience: String) {
        self.type = type
        self.subject = subject
        self.eventTime = eventTime
        self.email = email
        self.isPrivateEmail = isPrivateEmail
        self.audience = audience
    }
}
