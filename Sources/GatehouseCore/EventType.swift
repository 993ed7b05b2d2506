/// What an audit event records. A string only at the SQL edge and in JSON; in code, one of the
/// constants below, so a misspelt type does not compile.
public struct EventType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    public static let userSignedUp = EventType(rawValue: "user.signed_up")
    public static let userSignedIn = EventType(rawValue: "user.signed_in")
    public static let userSignInFailed = EventType(rawValue: "user.sign_in_failed")
    public static let userPasswordChanged = EventType(rawValue: "user.password_changed")
    public static let userEmailChanged = EventType(rawValue: "user.email_changed")
    public static let userEmailVerified = EventType(rawValue: "user.email_verified")
    public static let sessionRefreshReused = EventType(rawValue: "session.refresh_reused")
    public static let sessionSignedOut = EventType(rawValue: "session.signed_out")
    public static let sessionRevoked = EventType(rawValue: "session.revoked")
    public static let identityLinked = EventType(rawValue: "identity.linked")
    public static let identityUnlinked = EventType(rawValue: "identity.unlinked")
    public static let appSettingsChanged = EventType(rawValue: "app.settings_changed")
    public static let appSecretKeyRotated = EventType(rawValue: "app.secret_key_rotated")
    public static let appSigningKeyRotated = EventType(rawValue: "app.signing_key_rotated")
    public static let outboxDeadLettered = EventType(rawValue: "outbox.dead_lettered")

    public static let userBanned = EventType(rawValue: "user.banned")
    public static let userUnbanned = EventType(rawValue: "user.unbanned")

    /// An account's deletion was asked for (by its user or a tenant admin): erased at once, or
    /// pending deletion when the app has a grace period (`data.purge_at`).
    public static let userDeleted = EventType(rawValue: "user.deleted")
    /// A sign-in restored an account pending deletion.
    public static let userRestored = EventType(rawValue: "user.restored")
    /// The purge job erased an account whose grace period had passed (audit only).
    public static let userPurged = EventType(rawValue: "user.purged")

    // Named by the webhook catalogue; recorded by the webhook work, not by this version.
    public static let userCreated = EventType(rawValue: "user.created")
    public static let userUpdated = EventType(rawValue: "user.updated")

    /// The types an app's webhook may subscribe to (API.md, "Webhooks").
    public static let webhookCatalogue: [EventType] = [
        userCreated, userUpdated, userDeleted, userRestored, userBanned, userUnbanned, userEmailChanged, userPasswordChanged,
        identityLinked, identityUnlinked, sessionRevoked,
    ]
}
