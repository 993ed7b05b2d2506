/// `GET /v1/me/export`: what the server holds about the signed-in user, for the user to take away
/// (GDPR art. 20): the profile, identities, live sessions, files' metadata, second factors and
/// the newest audit events. Never a secret: no password hash, TOTP secret, recovery code,
/// refresh-token hash, passkey public key or provider token is read for it.
public struct AccountExport: Sendable {
    private let store: any Store
    private let units: UnitOfWork
    private let sessions: SessionService
    private let mfa: MFAService
    private let limiter: RateLimiter
    private let clock: any Clock

    /// Exports one user may ask for in a fixed hour: each reads every file row and up to
    /// ``eventLimit`` events, so a loop of them would be a cheap way to load the database.
    public static let perHour: Int64 = 5
    /// The newest events an export holds.
    public static let eventLimit = 1000
    /// File rows read per statement.
    static let filePage = 500

    public init(store: any Store, units: UnitOfWork, sessions: SessionService, mfa: MFAService, clock: any Clock) {
        self.store = store
        self.units = units
        self.sessions = sessions
        self.mfa = mfa
        self.limiter = RateLimiter(clock: clock)
        self.clock = clock
    }

    /// What an export holds.
    public struct Contents: Sendable {
        public var user: User
        public var identities: [Identity]
        /// The live sessions (those `GET /v1/me/sessions` lists).
        public var sessions: [Session]
        /// Every file of the user, newest first (the rows only: the bytes stay in the blob store).
        public var files: [StoredFile]
        /// The confirmed second factors and passkeys (no secret, no public key).
        public var factors: [FactorSummary]
        /// The user's audit events, newest first, at most ``AccountExport/eventLimit``.
        public var events: [Event]
    }

    /// The signed-in user's data. Past ``perHour`` this hour: 429 `auth/too-many-requests` with
    /// `Retry-After`. Records `user.exported` (audit only), which the export's events include.
    public func export(app: AppContext, claims: AccessClaims, origin: RequestOrigin) throws -> Contents {
        let data = store.app(app.id)
        try limiter.hit(data, bucket: "account_export", subject: claims.userID.rawValue, limit: Self.perHour, windowSeconds: 3600)
        try units.run(data) { tx in
            guard try tx.users.user(claims.userID) != nil else { throw GatehouseError(.sessionRevoked, "This account no longer exists.") }
            try tx.auditLog.record(Event(
                type: .userExported, userID: claims.userID, sessionID: claims.sessionID, ip: origin.ip, userAgent: origin.userAgent, createdAt: clock.nowMillis()))
        }
        guard let (user, identities) = try data.users.userWithIdentities(claims.userID) else {
            throw GatehouseError(.sessionRevoked, "This account no longer exists.")
        }
        var files: [StoredFile] = []
        var after: (createdAt: Int64, id: FileID)?
        while true {
            let page = try data.files.files(of: claims.userID, after: after, limit: Self.filePage)
            files += page
            guard page.count == Self.filePage, let last = page.last else { break }
            after = (last.createdAt, last.id)
        }
        return Contents(
            user: user, identities: identities, sessions: try sessions.sessions(app: app, claims: claims), files: files,
            factors: try mfa.factors(app: app, user: claims.userID),
            events: try data.auditLog.events(EventQuery(userID: claims.userID, limit: Self.eventLimit)))
    }
}
