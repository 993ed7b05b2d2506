/// Why an ``IdentityStore`` write stored nothing.
public enum IdentityConflict: Error, Sendable, Equatable {
    /// The identity signs in to an account of the app already.
    case alreadyLinked
    /// The user it was to be linked to no longer exists.
    case accountGone
}

/// The app's ways to sign in: identities (a password is one: ``PasswordStore``), the provider
/// tokens kept for them, the Apple web flow's login codes, and what Apple's notifications keep
/// (``AppleAccountStore``). Every query binds the app.
public protocol IdentityStore: PasswordStore, AppleAccountStore {
    func all(of id: UserID) throws -> [Identity]
    /// The user with this provider identity.
    func user(provider: IdentityProvider, subject: String) throws -> User?
    /// Whether any identity of the app is of `provider` (erased accounts' too: their subjects
    /// still name the provider's users).
    func hasIdentities(of provider: IdentityProvider) throws -> Bool
    /// Links an identity. Throws ``IdentityConflict/alreadyLinked`` when it is linked already,
    /// ``IdentityConflict/accountGone`` when the user no longer exists.
    func addIdentity(_ user: UserID, _ identity: Identity) throws
    /// Unlinks, unless it is the user's only way to sign in (checked atomically); for `password`
    /// also forgets the hash. False when nothing was removed.
    func removeIdentity(_ user: UserID, provider: IdentityProvider, now: Int64) throws -> Bool
    /// Drops every way to sign in to the account (password, identities, kept provider tokens,
    /// web-flow login codes not yet exchanged); returns the providers of the identities removed
    /// and the provider tokens dropped (to revoke them in the same unit of work).
    func forgetSignInMethods(_ id: UserID, now: Int64) throws -> ForgottenSignInMethods
    /// The provider refresh tokens kept for the user (sealed), to revoke before erasing them.
    func providerTokens(_ user: UserID) throws -> [StoredProviderToken]
    /// Deletes the refresh tokens kept for the user's `provider` identity and returns them
    /// (sealed), to revoke them in the same unit of work (unlinking the provider).
    func takeProviderTokens(_ user: UserID, provider: IdentityProvider) throws -> [StoredProviderToken]
    /// Keeps a provider refresh token (sealed) for revocation at account deletion; false (nothing
    /// kept) when the account is gone.
    @discardableResult
    func saveProviderToken(_ user: UserID, provider: IdentityProvider, clientID: String, sealedToken: String, now: Int64) throws -> Bool
    func insertWebFlow(_ flow: WebFlow) throws
    func insertLoginCode(_ code: LoginCode) throws
    /// Takes (marks used) an unexpired, unused login code.
    func takeLoginCode(hash: String, now: Int64) throws -> LoginCode?
}

/// What ``IdentityStore/forgetSignInMethods(_:now:)`` dropped.
public struct ForgottenSignInMethods: Sendable, Equatable {
    /// The providers of the identities removed.
    public var providers: [IdentityProvider]
    /// The provider refresh tokens deleted (sealed): each still to be revoked at its provider.
    public var tokens: [StoredProviderToken]

    public init(providers: [IdentityProvider], tokens: [StoredProviderToken]) {
        self.providers = providers
        self.tokens = tokens
    }

    public var isEmpty: Bool { providers.isEmpty && tokens.isEmpty }
}
