/// An emailed code's row: the live code of one address and purpose (if any), and that address's
/// send window for the purpose, which outlives the code.
public struct EmailCodeRecord: Sendable, Equatable {
    public var purpose: EmailPurpose
    /// HMAC of the address (``EmailCodes/subject(of:)``): no address is stored in clear here, not
    /// even one without an account.
    public var subject: String
    /// The account the code is for, when the purpose has one (verification, email change,
    /// reauthentication).
    public var userID: UserID?
    /// HMAC of the live code; nil when there is none (used, or never sent).
    public var codeHash: String?
    public var failures: Int
    public var expiresAt: Int64
    /// The last send (ms), for the 60-second window.
    public var lastSentAt: Int64
    /// The hour window: when it started, and the sends counted in it.
    public var windowStart: Int64
    public var windowSends: Int

    public init(
        purpose: EmailPurpose, subject: String, userID: UserID? = nil, codeHash: String? = nil, failures: Int = 0, expiresAt: Int64 = 0,
        lastSentAt: Int64 = 0, windowStart: Int64 = 0, windowSends: Int = 0
    ) {
        self.purpose = purpose
        self.subject = subject
        self.userID = userID
        self.codeHash = codeHash
        self.failures = failures
        self.expiresAt = expiresAt
        self.lastSentAt = lastSentAt
        self.windowStart = windowStart
        self.windowSends = windowSends
    }
}

/// The emailed codes of one app. Meant for a unit of work (``AppScopedStore/transaction(_:)``):
/// a locked read, a decision, a save, and the mail queued with it.
public protocol EmailCodeStore: Sendable {
    /// The row, locked until the transaction ends (PostgreSQL `FOR UPDATE`; SQLite's transaction
    /// holds the write lock already). With `create`, an empty row is made first if there is none,
    /// so that two first sends at once are serialised too.
    func lock(purpose: EmailPurpose, subject: String, create: Bool) throws -> EmailCodeRecord?
    func save(_ record: EmailCodeRecord) throws
    /// Deletes rows whose code and windows all ended before `before` (ms).
    func purge(before: Int64) throws
}
