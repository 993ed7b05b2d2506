/// The app's passkeys, its users' WebAuthn user handles and the challenges it issued. Every
/// query binds the app.
public protocol PasskeyStore: Sendable {
    /// The user's opaque WebAuthn user handle (base64url), made and kept on first use: `handle`
    /// is stored unless the user has one already; the stored one is returned.
    func userHandle(of user: UserID, proposing handle: String, now: Int64) throws -> String
    /// The user's handle if one was ever made.
    func existingUserHandle(of user: UserID) throws -> String?

    /// Records a challenge (by its hash) for `purpose`, bound to `user` unless it is a sign-in's.
    func insertChallenge(hash: String, purpose: PasskeyPurpose, user: UserID?, expiresAt: Int64) throws
    /// Takes (deletes) an unexpired challenge of `purpose`: nil when unknown, expired, taken
    /// already or issued for another purpose (which is then left as it was).
    func takeChallenge(hash: String, purpose: PasskeyPurpose, now: Int64) throws -> TakenPasskeyChallenge?

    /// Stores a new passkey; throws ``PasskeyConflict/credentialTaken`` when the app has one
    /// with this credential id already.
    func insert(_ passkey: Passkey) throws
    func passkeys(of user: UserID) throws -> [Passkey]
    /// The passkeys of each of `users` (a page of the admin's list), oldest first.
    func passkeys(of users: [UserID]) throws -> [UserID: [Passkey]]
    func passkey(_ id: PasskeyID, of user: UserID) throws -> Passkey?
    /// The app's passkey of this credential id, whoever's it is.
    func passkey(credentialID: String) throws -> Passkey?
    func rename(_ id: PasskeyID, of user: UserID, to name: String) throws -> Passkey?
    func delete(_ id: PasskeyID, of user: UserID) throws -> Passkey?
    /// Deletes all of the user's passkeys, their WebAuthn user handle and the challenges issued to
    /// them (an account taken over by the owner of its address); the passkeys deleted.
    func forgetPasskeys(of user: UserID) throws -> [Passkey]
    /// Records a use: the new sign count and backup state, if the stored count is still
    /// `expectedCount` (two uses racing: one wins). False when it changed meanwhile.
    func recordUse(_ id: PasskeyID, expectedCount: Int64, signCount: Int64, backedUp: Bool, now: Int64) throws -> Bool
}

/// A passkey write the store refused.
public enum PasskeyConflict: Error, Sendable {
    case credentialTaken
}

extension PasskeyConflict: StoreConflict {
    var error: GatehouseError {
        switch self {
        case .credentialTaken: GatehouseError(.invalidCredential, "This passkey is registered already.")
        }
    }
}
