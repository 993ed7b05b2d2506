/// Why a ``UserStore`` write stored nothing: another account holds what it would take. Core turns
/// it into the client's error (``AccountService``); the store knows no client-facing text.
public enum UserConflict: Error, Sendable, Equatable {
    /// The new account's identity (the same email or provider account) exists already.
    case identityTaken
    /// Another account signs in with a password at the new address.
    case emailTaken
}

/// The app's users: their rows, profiles, bans and addresses. Every query binds the app.
public protocol UserStore: Sendable {
    /// Inserts a user with one identity and records `event` (its sign-up), in one transaction.
    /// Throws ``UserConflict/identityTaken`` when the identity exists.
    /// The identity is nil for an account made by an emailed code: it signs in by its address.
    func insertUser(_ user: User, passwordHash: String?, identity: Identity?, event: Event) throws
    func user(_ id: UserID) throws -> User?
    /// The account an emailed code for this address reaches (several share an address only under
    /// `email_collision: separate`): one whose address is verified, the one with a password at it
    /// first, else the oldest; else an unverified account with a password at the address (which
    /// the code then takes from whoever made it). Never an account whose provider vouched for
    /// nothing: an address typed into a provider proves nothing.
    func user(email: String) throws -> User?
    /// Marks the address verified, if the user's address is still `email`; the user, or nil.
    func markEmailVerified(_ id: UserID, email: String, now: Int64) throws -> User?
    /// Sets a new, verified address (and the password identity's subject) if the address is still
    /// `old`; nil when it changed meanwhile. Throws ``UserConflict/emailTaken`` when another
    /// account signs in with a password at the new address.
    func changeEmail(_ id: UserID, from old: String?, to new: String, now: Int64) throws -> User?
    /// Sets or lifts (nil) the user's ban; the user, or nil when there is none.
    func setBan(_ id: UserID, _ ban: Ban?, now: Int64) throws -> User?
    func updateProfile(_ id: UserID, firstName: String?, lastName: String?, photoURL: String?, now: Int64) throws -> User?
    /// Sets or clears (nil) the user's `locale`; the user, or nil when there is none.
    func setLocale(_ id: UserID, _ locale: String?, now: Int64) throws -> User?
    /// Sets the user's custom data (`display_name`, `app_metadata`, `user_metadata`) as given; the
    /// user, or nil when there is none.
    func setCustomData(_ id: UserID, displayName: String?, appMetadata: UserMetadata, userMetadata: UserMetadata, now: Int64) throws -> User?
    /// Sets names only where the user has none (Apple sends the name once).
    func fillNames(_ user: UserID, firstName: String?, lastName: String?, now: Int64) throws
    /// Locks the user's row for the rest of the transaction and reads it (nil: no such live
    /// user). A deletion starts here; whatever else must not interleave with one (a new session,
    /// a kept provider token) takes the row too.
    func lockUser(_ id: UserID) throws -> User?
    /// The app's users, newest first (ties by id), each with their identities: after `after` (the
    /// previous page's last user), at most `limit`. `query` matches an exact user id, or a
    /// case-insensitive substring of the email, first or last name or display name (trigram-indexed
    /// on both databases, migrations 0013 and 0024).
    /// `anonymous`: only anonymous users (true), only the others (false), or all (nil).
    func users(matching query: String?, anonymous: Bool?, after: (createdAt: Int64, id: UserID)?, limit: Int) throws -> [(User, [Identity])]
    /// A page of the app's users for an export (``UserExport``), in id order after `after` (nil:
    /// from the first), at most `limit`, each with their identities and, when
    /// `withPasswordHashes`, their stored password hash: one statement. Accounts pending deletion
    /// are in it; erased and anonymous ones are not.
    func exportPage(after: UserID?, limit: Int, withPasswordHashes: Bool) throws -> [ExportedUser]
    /// The user and their identities, read together (one statement).
    func userWithIdentities(_ id: UserID) throws -> (User, [Identity])?
    /// Of `emails`, those that a live user of the app has, whatever the user signs in with (an
    /// import skips them).
    func existingEmails(_ emails: [String]) throws -> Set<String>
    /// Of the `subjects` of `provider`, those that are an identity of the app (an import skips them).
    func existingSubjects(_ subjects: [String], of provider: IdentityProvider) throws -> Set<String>
    /// Inserts imported accounts, their identities with them, in a few statements (a user's
    /// `password` identity when it has a password hash is among its `identities`). Throws
    /// ``UserConflict/identityTaken`` when one of the identities exists: nothing is written then.
    func insertImported(_ accounts: [ImportedAccount]) throws
    /// True when some user of the app has this email (any sign-in method), other than `except`.
    func emailInUse(_ email: String, except: UserID?) throws -> Bool

    /// Makes an anonymous user permanent (`is_anonymous` false, `last_seen_at` cleared); with
    /// `email`, the account (which has none) takes that address, verified as `emailVerified` says.
    /// The user as now, or nil when there is no such user or it is not anonymous (any more): of
    /// two upgrades at once, one upgrades.
    func upgradeAnonymous(_ id: UserID, email: String?, emailVerified: Bool, now: Int64) throws -> User?
    /// Moves an anonymous user's `last_seen_at` to `now` when it is before `before` (a write at
    /// most that often, however often the user refreshes); nothing for any other user.
    func markAnonymousSeen(_ id: UserID, now: Int64, before: Int64) throws
    /// The app's anonymous users last seen before `cutoff`, the longest unseen first, at most `limit`.
    func anonymousUsers(unseenBefore cutoff: Int64, limit: Int) throws -> [UserID]
    /// When an anonymous user was last seen; nil when there is no such user or it is not anonymous.
    func anonymousLastSeen(_ id: UserID) throws -> Int64?
}

extension UserStore {
    /// The app's users, anonymous or not (``users(matching:anonymous:after:limit:)``).
    public func users(matching query: String?, after: (createdAt: Int64, id: UserID)?, limit: Int) throws -> [(User, [Identity])] {
        try users(matching: query, anonymous: nil, after: after, limit: limit)
    }
}

/// An account an import writes (``UserImport``): the user, the stored form of its imported
/// password hash, and its identities (the `password` one with a hash).
public struct ImportedAccount: Sendable, Equatable {
    public var user: User
    public var passwordHash: String?
    public var identities: [Identity]

    public init(user: User, passwordHash: String?, identities: [Identity]) {
        self.user = user
        self.passwordHash = passwordHash
        self.identities = identities
    }
}
