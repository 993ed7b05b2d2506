/// Anonymous users (API.md, "Moving users in and out", 2026-12-05): `POST /v1/auth/anonymous`
/// makes an account with no sign-in method at all, for an app that lets users start before they
/// sign up (`allow_anonymous`). The account is upgraded in place, the same user id, by linking a
/// password (with an email), a confirmed email or a provider (``upgrade(_:user:email:emailVerified:method:sessionID:origin:now:)``,
/// called by each of those in its unit of work); one not seen for the app's `anonymous_ttl_days`
/// is erased (``AccountDeletion/eraseUnseenAnonymousUsers(now:perApp:limit:)``).
public final class AnonymousUsers: Sendable {
    private let store: any Store
    private let sessions: SessionService
    private let gate: SignInGate
    private let units: UnitOfWork
    private let clock: any Clock
    private let metrics: any DomainMetrics

    public init(
        store: any Store, sessions: SessionService, gate: SignInGate, units: UnitOfWork, clock: any Clock, metrics: any DomainMetrics = NoDomainMetrics()
    ) {
        self.store = store
        self.sessions = sessions
        self.gate = gate
        self.units = units
        self.clock = clock
        self.metrics = metrics
    }

    /// `POST /v1/auth/anonymous`: a new anonymous account and its first session (201). Within the
    /// app's `auth_per_minute_per_ip`, the sign-up limit (each call makes an account, as a sign-up
    /// does); 403 `auth/sign-in-method-disabled` unless the app sets `allow_anonymous`, 403
    /// `auth/signup-disabled` when it takes no new accounts. Never a second step: the account has
    /// no factor to answer with, and a factor cannot be enrolled on it
    /// (``requirePermanent(_:_:)``); `amr` is `["anon"]`.
    public func signIn(app: AppContext, locale rawLocale: String?, origin: RequestOrigin) throws -> SessionGrant {
        try metrics.countingSignIn(.anonymous) {
            let data = store.app(app.id)
            try gate.limitAuth(app, data, origin)
            guard app.settings.allowAnonymous else { throw GatehouseError(.signInMethodDisabled, "This app does not offer anonymous sign-in.") }
            guard app.settings.allowSignup else { throw GatehouseError(.signupDisabled, "This app does not accept new accounts.") }
            let locale = try rawLocale.map { tag throws(GatehouseError) in try InputRules.locale(tag) }
            let now = clock.nowMillis()
            let user = User(
                id: .generate(), email: nil, emailVerified: false, firstName: nil, lastName: nil, createdAt: now, updatedAt: now, lastSignInAt: now,
                locale: locale, isAnonymous: true)
            return try units.run(data) { tx in
                try tx.users.insertUser(
                    user, passwordHash: nil, identity: nil,
                    event: Event(type: .userSignedUp, userID: user.id, sessionID: nil, ip: origin.ip, userAgent: origin.userAgent, data: ["method": "anonymous"], createdAt: now))
                return try sessions.startSession(
                    app: app, tx, user: user, method: .anonymous, isNewUser: true, origin: origin, secondStep: .done(amr: [SignInMethod.anonymous.amr]))
            }.session()
        }
    }

    /// In the caller's unit of work `tx`: makes `user` permanent if it is anonymous, and records
    /// `user.upgraded` (`data.method`: `password`, `email` or the provider). With `email`, the
    /// account takes that address (verified as `emailVerified` says). The upgraded user, or nil
    /// when it was not anonymous (nothing changes then).
    public static func upgrade(
        _ tx: any AppScopedStore, user: UserID, email: String? = nil, emailVerified: Bool = false, method: String, sessionID: SessionID?,
        origin: RequestOrigin, now: Int64
    ) throws -> User? {
        guard let upgraded = try tx.users.upgradeAnonymous(user, email: email, emailVerified: emailVerified, now: now) else { return nil }
        try tx.auditLog.record(Event(
            type: .userUpgraded, userID: user, sessionID: sessionID, ip: origin.ip, userAgent: origin.userAgent, data: ["method": .string(method)], createdAt: now))
        return upgraded
    }

    /// 403 `auth/anonymous-user` when `user` is anonymous: `what` (a second factor, a passkey)
    /// needs an account with a way to sign in first.
    public static func requirePermanent(_ user: User, _ what: String) throws(GatehouseError) {
        guard !user.isAnonymous else {
            throw GatehouseError(.anonymousUser, "An anonymous account cannot \(what); upgrade it first (link a password, an email or a provider).")
        }
    }

    /// How often a refresh moves an anonymous user's `last_seen_at` at most: once an hour is
    /// exact enough for a lifetime counted in days, and spares a write at every refresh.
    public static let seenResolutionMillis: Int64 = 3_600_000
}
