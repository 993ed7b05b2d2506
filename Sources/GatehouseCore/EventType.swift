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
    /// The platform operator switched the app off, or on again (``AppService/setDisabled(_:_:)``).
    public static let appDisabled = EventType(rawValue: "app.disabled")
    public static let appEnabled = EventType(rawValue: "app.enabled")
    public static let outboxDeadLettered = EventType(rawValue: "outbox.dead_lettered")
    /// A tenant admin or the platform operator queued a dead outbox item again (audit only;
    /// `data`: item_id, kind, by, previous_attempts, previous_error).
    public static let outboxRetried = EventType(rawValue: "outbox.retried")
    /// The app sent its `rate_limits.mail_per_hour`; mail past it this hour is not queued (at
    /// most one such event an hour; `data.mail_per_hour`).
    public static let appMailCapped = EventType(rawValue: "app.mail_capped")

    /// A tenant admin exported the app's users (`GET /v1/admin/users/export`; audit only, no
    /// webhook; `data`: `by`, `include_hashes`, `count`).
    public static let usersExported = EventType(rawValue: "users.exported")
    /// A user downloaded their own data (`GET /v1/me/export`; audit only).
    public static let userExported = EventType(rawValue: "user.exported")

    public static let userBanned = EventType(rawValue: "user.banned")
    public static let userUnbanned = EventType(rawValue: "user.unbanned")

    /// A profile change (`PATCH /v1/me`) that changed something.
    public static let userUpdated = EventType(rawValue: "user.updated")
    /// An account's deletion was asked for (by its user or a tenant admin): erased at once, or
    /// pending deletion when the app has a grace period (`data.purge_at`). Recorded before the
    /// erase, so that a webhook's body can still show the user.
    public static let userDeleted = EventType(rawValue: "user.deleted")
    /// An anonymous account became permanent, the same user id: a password (with an email), a
    /// confirmed email or a provider was linked to it (`data.method`: `password`, `email`, `apple`, `google`).
    public static let userUpgraded = EventType(rawValue: "user.upgraded")
    /// A sign-in restored an account pending deletion.
    public static let userRestored = EventType(rawValue: "user.restored")
    /// A tenant admin imported users (API or command line; audit only, one event an import, no
    /// `user.created` for each user; `data`: imported, skipped, failed, source `api` or `cli`).
    public static let usersImported = EventType(rawValue: "users.imported")
    /// The purge job erased an account whose grace period had passed (audit only).
    public static let userPurged = EventType(rawValue: "user.purged")

    /// A file was uploaded (`data`: id, size, content type, visibility, purpose).
    public static let fileUploaded = EventType(rawValue: "file.uploaded")
    /// A file was deleted by its user (account deletion records `user.deleted` instead).
    public static let fileDeleted = EventType(rawValue: "file.deleted")

    /// Apple's notifications (``AppleNotifications``): the user stopped using Sign in with Apple
    /// with the app, so the Apple identity was unlinked (`data`: `only_method`, `sessions_ended`).
    public static let identityAppleConsentRevoked = EventType(rawValue: "identity.apple_consent_revoked")
    /// The user deleted their Apple account: the Apple identity was unlinked, and an account it
    /// was the only way into erased (`data`: `only_method`, `erased`).
    public static let identityAppleAccountDeleted = EventType(rawValue: "identity.apple_account_deleted")
    /// Apple's private relay stopped or resumed forwarding the user's mail (`data`: `forwarding`
    /// `on`/`off`); mail to a relay address whose forwarding is off is not sent.
    public static let userEmailRelayChanged = EventType(rawValue: "user.email_relay_changed")

    /// A TOTP factor was confirmed (`data`: `factor_id`, `type`).
    public static let mfaEnrolled = EventType(rawValue: "mfa.enrolled")
    /// A TOTP factor was removed by its user or a tenant admin (`data`: `factor_id`, `type`, `by`).
    public static let mfaRemoved = EventType(rawValue: "mfa.removed")
    /// A passkey was registered (`data`: passkey_id, name, aaguid, backup_eligible).
    public static let passkeyAdded = EventType(rawValue: "passkey.added")
    /// A passkey was removed (`data`: passkey_id, by: user or admin).
    public static let passkeyRemoved = EventType(rawValue: "passkey.removed")
    /// An assertion's sign count did not go up: the authenticator may have been cloned; the
    /// sign-in was refused (audit only; `data`: passkey_id, stored_count, presented_count).
    public static let passkeyCloneSuspected = EventType(rawValue: "passkey.clone_suspected")

    /// Never recorded: the webhook name of `user.signed_up` (every sign-up, whatever the method).
    public static let userCreated = EventType(rawValue: "user.created")

    /// The types an app's webhook may subscribe to (API.md, "Webhooks").
    public static let webhookCatalogue: [EventType] = [
        userCreated, userUpdated, userUpgraded, userDeleted, userRestored, userBanned, userUnbanned, userEmailChanged, userPasswordChanged,
        identityLinked, identityUnlinked, sessionRevoked, identityAppleConsentRevoked, identityAppleAccountDeleted, userEmailRelayChanged,
        mfaEnrolled, mfaRemoved,
        passkeyAdded, passkeyRemoved,
    ]

    /// The webhook type an audit event of this type is delivered as, or nil when no webhook can
    /// subscribe to it: `user.signed_up` is `user.created`, the rest of the catalogue keep their name.
    public var webhookType: EventType? {
        if self == .userSignedUp { return .userCreated }
        return Self.webhookCatalogue.contains(self) && self != .userCreated ? self : nil
    }
}
