/// Why a ``PasswordStore`` write stored nothing.
public enum PasswordConflict: Error, Sendable, Equatable {
    /// Another account signs in with a password at the address of the password identity added.
    case emailTaken
}

/// The app's password hashes (a user's secret of the `password` identity).
public protocol PasswordStore: Sendable {
    /// The user with this password identity and their password hash.
    func passwordUser(email: String) throws -> (User, String)?
    func passwordHash(_ id: UserID) throws -> String?
    /// Sets the password hash if the stored one is still `replacing` (nil: the user has none), and
    /// adds the password identity when `addIdentity` is given; false, writing nothing, when the
    /// stored hash changed meanwhile (a concurrent change won). Throws ``PasswordConflict/emailTaken``
    /// when another account signs in with a password at the identity's address.
    func setPasswordHash(_ id: UserID, hash: String, replacing: String?, addIdentity: Identity?, now: Int64) throws -> Bool
}
