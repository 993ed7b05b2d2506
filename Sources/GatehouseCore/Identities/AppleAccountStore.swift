/// What Apple's server-to-server notifications keep (``AppleNotifications``): the notifications
/// handled (for idempotency), the relay addresses whose forwarding is off, and the Apple
/// identities whose consent was revoked (so that the same Apple account signs in to the same
/// account again). Part of the app's ``IdentityStore``; every query binds the app.
public protocol AppleAccountStore: Sendable {
    /// Records a notification as handled, keyed by the digest of its subject, its type and its
    /// `event_time`; false (nothing recorded) when it was handled already.
    func recordAppleNotification(subjectDigest: String, type: String, eventTime: Int64, now: Int64) throws -> Bool
    /// Sets whether Apple forwards mail from `address` (lowercased) to the user, unless a later
    /// event (by `eventTime`) already set it; true when forwarding changed.
    func setRelayForwarding(_ address: String, user: UserID, forwarding: Bool, eventTime: Int64, now: Int64) throws -> Bool
    /// True when Apple was told not to forward mail from `address` (lowercased).
    func isRelayForwardingOff(_ address: String) throws -> Bool
    /// Removes the user's Apple identity of `subject` and the Apple refresh tokens kept for the
    /// user, even when it is the account's only way to sign in; with `remember`, keeps a mark
    /// that ``takeRevokedAppleIdentity(subject:)`` reads. False when no such identity was linked.
    func revokeAppleIdentity(_ user: UserID, subject: String, remember: Bool, now: Int64) throws -> Bool
    /// The account whose Apple identity of `subject` was revoked, if its mark is still there (the
    /// mark is read, not taken).
    func revokedAppleIdentityOwner(subject: String) throws -> UserID?
    /// Takes the mark of a revoked Apple identity: the account it was linked to, if any.
    func takeRevokedAppleIdentity(subject: String) throws -> UserID?
    /// Ends the user's live sessions started with `method`; returns the ids ended.
    func endSessions(of user: UserID, startedWith method: SignInMethod, reason: SessionEndReason, now: Int64) throws -> [SessionID]
}

extension AppScopedStore {
    /// What Apple's notifications keep: part of ``identities``.
    public var appleAccounts: any AppleAccountStore { identities }
}
