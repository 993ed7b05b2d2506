/// A user of one app.
public struct UserID: PrefixedID {
    public static let prefix = "usr_"
    public let rawValue: String
    public init(unchecked rawValue: String) { self.rawValue = rawValue }
}

public struct User: Sendable, Equatable {
    public var id: UserID
    public var email: String?
    public var emailVerified: Bool
    public var firstName: String?
    public var lastName: String?
    public var photoURL: String?
    /// The user's language (a ``LanguageTag`` in its conventional case), for the mail sent to them;
    /// nil: the app's or the request's.
    public var locale: String?
    /// The name the user chose to be shown by (`display_name`, ``InputRules/displayName(_:)``); nil: none.
    public var displayName: String?
    /// A JSON object only the app's admin sets (``UserMetadata``), carried in the access token as
    /// claim `app_metadata` when not empty.
    public var appMetadata: UserMetadata
    /// A JSON object the user sets (``UserMetadata``): in the user object, never in a token.
    public var userMetadata: UserMetadata
    public var createdAt: Int64
    public var updatedAt: Int64
    public var lastSignInAt: Int64?
    /// Set by a tenant admin (``Ban``); nil when the user may sign in.
    public var ban: Ban?
    /// Set while the account waits out its app's `deletion_grace_days`; a sign-in clears it.
    public var pendingDeletion: PendingDeletion?
    /// Made by `POST /v1/auth/anonymous` and not upgraded yet: no sign-in method, no email; erased
    /// when not seen for the app's `anonymous_ttl_days`. Linking a password, a confirmed email or
    /// a provider makes it false, for good (``AnonymousUsers``).
    public var isAnonymous: Bool

    public init(
        id: UserID, email: String?, emailVerified: Bool, firstName: String?, lastName: String?, photoURL: String? = nil, createdAt: Int64,
        updatedAt: Int64, lastSignInAt: Int64?, ban: Ban? = nil, pendingDeletion: PendingDeletion? = nil, locale: String? = nil,
        displayName: String? = nil, appMetadata: UserMetadata = .empty, userMetadata: UserMetadata = .empty, isAnonymous: Bool = false
    ) {
        self.isAnonymous = isAnonymous
        self.locale = locale
        self.displayName = displayName
        self.appMetadata = appMetadata
        self.userMetadata = userMetadata
        self.ban = ban
        self.pendingDeletion = pendingDeletion
        self.id = id
        self.email = email
        self.emailVerified = emailVerified
        self.firstName = firstName
        self.lastName = lastName
        self.photoURL = photoURL
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.lastSignInAt = lastSignInAt
    }

    /// First and last name joined by one space; nil when both are unset.
    public var fullName: String? {
        let parts = [firstName, lastName].compactMap { $0 }
        return parts.isEmpty ? nil : parts.joined(separator: " ")
    }

    /// The name to show the user by: their `display_name`, else ``fullName`` (the token's `name`
    /// claim, a passkey's display name).
    public var shownName: String? { displayName ?? fullName }
}

/// A tenant admin's ban: permanent, or a suspension until `suspendedUntil` (ms), after which it
/// no longer holds (it ends by itself, nothing has to lift it).
public struct Ban: Sendable, Equatable {
    public var sanctionCode: String
    public var reason: String?
    public var suspendedUntil: Int64?

    public init(sanctionCode: String, reason: String?, suspendedUntil: Int64?) {
        self.sanctionCode = sanctionCode
        self.reason = reason
        self.suspendedUntil = suspendedUntil
    }

    public func holds(at now: Int64) -> Bool { suspendedUntil.map { $0 > now } ?? true }
}

/// An account whose deletion was asked for and waits out the app's grace period: the purge job
/// deletes it at `purgeAt` (ms), unless a sign-in restores it first.
public struct PendingDeletion: Sendable, Equatable {
    public var requestedAt: Int64
    public var purgeAt: Int64

    public init(requestedAt: Int64, purgeAt: Int64) {
        self.requestedAt = requestedAt
        self.purgeAt = purgeAt
    }
}
