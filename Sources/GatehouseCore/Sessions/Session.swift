public struct SessionID: PrefixedID {
    public static let prefix = "ses_"
    public let rawValue: String
    public init(unchecked rawValue: String) { self.rawValue = rawValue }
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

public struct Session: Sendable, Equatable {
    /// What the session's access tokens say in `amr` (RFC 8176).
    public var authenticationMethods: [String] { amr ?? [method.amr] }

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
    /// The access tokens' `amr` when the sign-in said more than its method (a second step added
    /// `otp` or `hwk`/`swk`, and `mfa`); nil: `[method.amr]`. Kept, so a refresh says the same.
    public var amr: [String]?
    /// For the method `external`: the id of the app's provider signed in with; nil otherwise.
    public var provider: String?

    /// What the sessions list says the session signed in with: the provider's id, else the method.
    public var methodName: String { provider ?? method.rawValue }

    public init(
        id: SessionID, userID: UserID, method: SignInMethod, authTime: Int64, createdAt: Int64, lastUsedAt: Int64, expiresAt: Int64,
        endedAt: Int64? = nil, ip: String?, userAgent: String?, amr: [String]? = nil, provider: String? = nil
    ) {
        self.amr = amr
        self.provider = provider
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
    /// Apple told the app the user stopped using Sign in with Apple with it (`consent-revoked`).
    case appleConsentRevoked = "apple_consent_revoked"
    /// Apple told the app the user deleted their Apple account (`account-delete`).
    case appleAccountDeleted = "apple_account_deleted"
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

/// Where a request came from, for sessions and audit events, and whose language it speaks.
public struct RequestOrigin: Sendable {
    public var ip: String?
    public var userAgent: String?
    /// The languages the client prefers, best first (from its `Accept-Language`): the language of
    /// a mail the request causes when neither its recipient nor the app chose one. Empty when the
    /// request names none, or its route mails nothing.
    public var languages: [LanguageTag]
    public init(ip: String?, userAgent: String?, languages: [LanguageTag] = []) {
        self.ip = ip
        self.userAgent = userAgent.map { String($0.prefix(512)) }
        self.languages = languages
    }
}
