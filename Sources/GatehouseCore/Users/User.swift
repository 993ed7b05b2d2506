/// A user of one app.
public struct UserID: PrefixedID {
    public static let prefix = "usr_"
    public let rawValue: String
    public init(unchecked rawValue: String) { self.rawValue = rawValue }
}

public struct SessionID: PrefixedID {
    public static let prefix = "ses_"
    public let rawValue: String
    public init(unchecked rawValue: String) { self.rawValue = rawValue }
}

public struct EventID: PrefixedID {
    public static let prefix = "evt_"
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
    public var createdAt: Int64
    public var updatedAt: Int64
    public var lastSignInAt: Int64?
    /// Set by a tenant admin (``Ban``); nil when the user may sign in.
    public var ban: Ban?
    /// Set while the account waits out its app's `deletion_grace_days`; a sign-in clears it.
    public var pendingDeletion: PendingDeletion?

    public init(
        id: UserID, email: String?, emailVerified: Bool, firstName: String?, lastName: String?, photoURL: String? = nil, createdAt: Int64,
        updatedAt: Int64, lastSignInAt: Int64?, ban: Ban? = nil, pendingDeletion: PendingDeletion? = nil
    ) {
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
    public var displayName: String? {
        let parts = [firstName, lastName].compactMap { $0 }
        return parts.isEmpty ? nil : parts.joined(separator: " ")
    }
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

/// Why ``AppScopedStore/insertSession(_:refreshTokenHash:event:passwordHash:)`` opened no
/// session: the account changed after the sign-in had read it (a sign-in hashes for tens of
/// milliseconds between the two).
public enum SessionRefusal: Error, Sendable, Equatable {
    /// Deleted, or its deletion asked for.
    case accountGone
    /// Banned, the ban holding at the session's start.
    case banned(Ban)
    /// The password the sign-in was checked against is no longer the account's.
    case passwordChanged
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

/// A way to sign in: `password` (subject = the email), `apple`, `google`.
public struct Identity: Sendable, Equatable {
    public var provider: String
    public var subject: String
    public var email: String?
    public var createdAt: Int64

    public init(provider: String, subject: String, email: String?, createdAt: Int64) {
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

    /// A new app's methods. Sign-in by emailed code is the app's choice: it needs a mailer that
    /// delivers (an app `email.smtp_url` or the platform's `GATEHOUSE_SMTP_URL`).
    public static let defaults: [SignInMethod] = [.password, .apple, .google]

    public var amr: String {
        switch self {
        case .password: "pwd"
        case .emailCode: "otp"
        case .apple: "apple"
        case .google: "google"
        }
    }
}

public struct Session: Sendable, Equatable {
    public var id: SessionID
    public var userID: UserID
    public var method: SignInMethod
    /// Last real sign-in or reauthentication (ms).
    public var authTime: Int64
    public var createdAt: Int64
    public var lastUsedAt: Int64
    /// Absolute end of the refresh token chain (ms).
    public var expiresAt: Int64
    public var endedAt: Int64?
    public var ip: String?
    public var userAgent: String?

    public init(
        id: SessionID, userID: UserID, method: SignInMethod, authTime: Int64, createdAt: Int64, lastUsedAt: Int64, expiresAt: Int64,
        endedAt: Int64? = nil, ip: String?, userAgent: String?
    ) {
        self.id = id
        self.userID = userID
        self.method = method
        self.authTime = authTime
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
        self.expiresAt = expiresAt
        self.endedAt = endedAt
        self.ip = ip
        self.userAgent = userAgent
    }
}

/// Why a session ended, as recorded and as the audit event says.
public enum SessionEndReason: String, Sendable {
    case signedOut = "signed_out"
    case revoked
    case passwordChanged = "password_changed"
    case refreshReused = "refresh_reused"
    case deleted
}

/// An audit event.
public struct Event: Sendable, Equatable {
    public var id: EventID
    public var type: EventType
    public var userID: UserID?
    public var sessionID: SessionID?
    public var ip: String?
    public var userAgent: String?
    public var data: JSON
    public var createdAt: Int64

    public init(
        type: EventType, userID: UserID?, sessionID: SessionID?, ip: String?, userAgent: String?, data: JSON = [:], createdAt: Int64,
        id: EventID = .generate()
    ) {
        self.id = id
        self.type = type
        self.userID = userID
        self.sessionID = sessionID
        self.ip = ip
        self.userAgent = userAgent
        self.data = data
        self.createdAt = createdAt
    }
}

/// What a refresh-token presentation turned out to be (decided atomically by the store).
public enum RefreshOutcome: Sendable, Equatable {
    /// The current token: rotated now to the successor.
    case rotated(Session)
    /// A token rotated within the grace window whose successor is still current: answer the same pair.
    case retried(Session)
    /// An old token: the whole session is ended (`endedNow` is false when a concurrent call ended it first).
    case reused(Session, endedNow: Bool)
    /// Unknown, expired, or of an ended session.
    case invalid
}

/// Where a request came from, for sessions and audit events.
public struct RequestOrigin: Sendable {
    public var ip: String?
    public var userAgent: String?
    public init(ip: String?, userAgent: String?) {
        self.ip = ip
        self.userAgent = userAgent.map { String($0.prefix(512)) }
    }
}
