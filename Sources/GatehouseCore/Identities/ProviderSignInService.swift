import Foundation
import GatehouseCrypto

/// Sign-in with Apple (native and web), Google, Firebase-exchanged tokens and the providers an app
/// defines (`oidc_providers`, ``Provider/tenant(_:in:)``); linking and
/// unlinking sign-in methods; reauthentication with a provider token.
public final class ProviderSignInService: Sendable {
    let store: any Store
    let directory: AppDirectory
    let sessions: SessionService
    /// Sign-ins, for the operator's metrics.
    let metrics: any DomainMetrics
    let providers: any IdentityProviders
    let sealer: SecretSealer
    let clock: any Clock
    /// What a caller cannot be told (an Apple token dropped unrevoked).
    let log: any LogSink
    let limiter: RateLimiter
    let publicURL: String
    /// For the lock on an address a new account takes (``EmailCodes/lockAddress(_:_:)``).
    let emailCodes: EmailCodes
    /// Runs the service's units of work and applies what follows their commit.
    let units: UnitOfWork
    /// The profile APIs of the kinds without ID tokens (Naver, GitHub); nil: not offered yet.
    let accessTokenProfiles: (any AccessTokenProfiles)?
    /// The web flow of the providers the app defines; nil: only Apple's is offered.
    let webFlows: (any TenantWebFlows)?

    /// Longest provider token accepted (API.md): longer is a validation error.
    public static let maxTokenLength = 8192
    static let flowLifetimeMillis: Int64 = 10 * 60 * 1000
    static let loginCodeLifetimeMillis: Int64 = 60 * 1000

    public init(
        store: any Store, directory: AppDirectory, sessions: SessionService, providers: any IdentityProviders, sealer: SecretSealer, clock: any Clock,
        publicURL: String, emailCodes: EmailCodes, units: UnitOfWork, metrics: any DomainMetrics = NoDomainMetrics(),
        log: any LogSink = DiscardingLog(), accessTokenProfiles: (any AccessTokenProfiles)? = nil, webFlows: (any TenantWebFlows)? = nil
    ) {
        self.accessTokenProfiles = accessTokenProfiles
        self.webFlows = webFlows
        self.log = log
        self.units = units
        self.emailCodes = emailCodes
        self.store = store
        self.directory = directory
        self.sessions = sessions
        self.metrics = metrics
        self.providers = providers
        self.sealer = sealer
        self.clock = clock
        self.limiter = RateLimiter(clock: clock)
        self.publicURL = publicURL
    }

    /// Who a sign-in is with: Apple, Google, or one of the providers the app defines
    /// (``AppSettings/OIDCProvider``, found by ``tenant(_:in:)``).
    public struct Provider: Sendable, Equatable {
        /// `apple`, `google` or the tenant provider's id: what events and messages name.
        public let rawValue: String
        /// The tenant's provider; nil for Apple and Google.
        public let settings: AppSettings.OIDCProvider?

        public static let apple = Provider(rawValue: "apple", settings: nil)
        public static let google = Provider(rawValue: "google", settings: nil)

        /// `apple` or `google`; nil for any other name (a tenant's provider is found with ``tenant(_:in:)``).
        public init?(rawValue: String) {
            switch rawValue {
            case "apple": self = .apple
            case "google": self = .google
            default: return nil
            }
        }

        private init(rawValue: String, settings: AppSettings.OIDCProvider?) {
            self.rawValue = rawValue
            self.settings = settings
        }

        /// The provider `id` of the app's `oidc_providers`; nil when the app defines none of that id
        /// (a provider of another app is unknown here).
        public static func tenant(_ id: String, in app: AppContext) -> Provider? {
            app.settings.oidcProviders.first(where: { $0.id == id }).map { Provider(rawValue: $0.id, settings: $0) }
        }

        /// The identity provider the sign-in is with.
        public var identity: IdentityProvider { IdentityProvider(rawValue: rawValue) }
        var firebaseName: String { identity.firebaseSignInProvider ?? "" }
        var method: SignInMethod { settings != nil ? .external : self == .apple ? .apple : .google }
        /// The `method` of the sign-in's events.
        var eventMethod: String { rawValue }
    }

    /// What the client sent to prove who they are at a provider.
    public enum Proof: Sendable {
        /// Apple's identity token, the raw nonce, and optionally the authorization code.
        case apple(identityToken: String, nonce: String?, authorizationCode: String?)
        case google(idToken: String, nonce: String?)
        case firebase(token: String)
        /// An ID token of a provider the app defines, and the raw nonce it carries.
        case oidc(idToken: String, nonce: String?)
        /// An access token of a provider without ID tokens (`naver`, `github`).
        case accessToken(String)
    }

    // MARK: - Signing in

    public func signIn(
        app: AppContext, provider: Provider, proof: Proof, firstName: String?, lastName: String?, origin: RequestOrigin
    ) throws -> SessionGrant {
        try metrics.countingSignIn(provider.method) {
            try signInOnce(app: app, provider: provider, proof: proof, firstName: firstName, lastName: lastName, origin: origin)
        }
    }

    private func signInOnce(
        app: AppContext, provider: Provider, proof: Proof, firstName: String?, lastName: String?, origin: RequestOrigin
    ) throws -> SessionGrant {
        let data = store.app(app.id)
        try limiter.hit(data, bucket: "auth", subject: rateLimitSubject(ip: origin.ip), limit: app.settings.rateLimits.authPerMinutePerIP)
        try requireMethod(provider, app)
        var checks = FieldChecks()
        var first: String?
        var last: String?
        try checks.run { () throws(GatehouseError) in first = try firstName.flatMap { name throws(GatehouseError) in try InputRules.name(name, field: "first_name") } }
        try checks.run { () throws(GatehouseError) in last = try lastName.flatMap { name throws(GatehouseError) in try InputRules.name(name, field: "last_name") } }
        try checks.finish()
        let (identity, appleCode) = try verify(app: app, provider: provider, proof: proof)
        // A refused sign-up is refused before the code is redeemed: else Apple's refresh token
        // for it would be dropped unrevoked.
        let existing = try owner(data, provider: provider, identity: identity, origin: origin)
        if appleCode != nil, existing == nil { try requireNewAccountAllowed(app: app, data, identity: identity) }
        let appleRefreshToken = try releasingNonceIfUnavailable(identity) { try redeemAppleCode(appleCode, app: app, identity: identity) }
        let (user, isNew) = try account(
            app: app, data, provider: provider, identity: identity, existing: existing, firstName: first, lastName: last, origin: origin)
        try keepAppleToken(app: app, data, user: user.id, identity: identity, refreshToken: appleRefreshToken)
        return try sessions.startSession(
            app: app, data, user: user, method: provider.method, isNewUser: isNew, origin: origin, detail: ["method": .string(provider.eventMethod)]
        ).session()
    }

    /// Verifies a proof for the app: the provider must be configured and the token valid. An
    /// Apple authorization code comes back not yet redeemed (``redeemAppleCode(_:app:identity:)``).
    func verify(app: AppContext, provider: Provider, proof: Proof) throws -> (ExternalIdentity, appleCode: String?) {
        let verified = try verifyToken(app: app, provider: provider, proof: proof)
        try useNonce(of: verified.0)
        return verified
    }

    private func verifyToken(app: AppContext, provider: Provider, proof: Proof) throws -> (ExternalIdentity, appleCode: String?) {
        switch proof {
        case .oidc(let token, let nonce):
            try checkLength(token, field: "id_token")
            guard let settings = provider.settings else { throw notConfigured(provider.rawValue) }
            guard settings.kind.hasIDTokens else {
                throw GatehouseError.validation("id_token", "A \(settings.kind.rawValue) provider has no ID tokens: send access_token.")
            }
            guard let nonce else { throw GatehouseError.validation("nonce", "Required: the raw nonce the ID token was requested with.") }
            if nonce.isEmpty || nonce.utf8.count > 512 { throw GatehouseError.validation("nonce", "Must be 1 to 512 characters.") }
            return (try answering(providers.verifyOIDC(token, app: app.id, provider: settings, nonce: nonce)), nil)
        case .accessToken(let token):
            try checkLength(token, field: "access_token")
            guard let settings = provider.settings else { throw notConfigured(provider.rawValue) }
            guard !settings.kind.hasIDTokens else {
                throw GatehouseError.validation("access_token", "A \(settings.kind.rawValue) provider signs in with its ID token: send id_token and nonce.")
            }
            guard let accessTokenProfiles, let kind = AccessTokenProviderKind(rawValue: settings.kind.rawValue) else {
                throw GatehouseError.validation("access_token", "Sign-in with a \(settings.kind.rawValue) access token is not available.")
            }
            return (try answering(accessTokenProfiles.profile(
                kind: kind, accessToken: token, clientIDs: settings.clientIDs, clientSecret: settings.clientSecret)), nil)
        case .firebase(let token):
            try checkLength(token, field: "firebase_id_token")
            guard let project = app.settings.firebase.projectID else { throw notConfigured("Firebase") }
            return (try answering(providers.verifyFirebase(token, projectID: project, expectedProvider: provider.firebaseName)), nil)
        case .google(let token, let nonce):
            try checkLength(token, field: "id_token")
            guard !app.settings.google.clientIDs.isEmpty else { throw notConfigured("Google") }
            return (try answering(providers.verifyGoogle(token, audiences: app.settings.google.clientIDs, nonce: nonce)), nil)
        case .apple(let token, let nonce, let code):
            try checkLength(token, field: "identity_token")
            let apple = app.settings.apple
            let audiences = apple.clientIDs + (apple.servicesID.map { [$0] } ?? [])
            guard !audiences.isEmpty else { throw notConfigured("Sign in with Apple") }
            if nonce == nil && apple.requireNonce { throw GatehouseError.validation("nonce", "Required: the raw nonce whose SHA-256 the app gave Apple.") }
            if let nonce, nonce.isEmpty || nonce.utf8.count > 512 { throw GatehouseError.validation("nonce", "Must be 1 to 512 characters.") }
            let identity = try answering(providers.verifyApple(token, audiences: audiences, expectedNonceHash: nonce.map { Digest.hex(Digest.sha256(Array($0.utf8))) }))
            if let code { try checkLength(code, field: "authorization_code") }
            return (identity, code)
        }
    }

    /// Redeems an Apple authorization code at Apple for the refresh token to keep; nil without a
    /// code or when the app has no Apple key. The code must be of `identity`'s Apple account: else
    /// another account's refresh token would be kept here (and revoked at Apple when this user
    /// deletes theirs).
    func redeemAppleCode(_ code: String?, app: AppContext, identity: ExternalIdentity) throws -> String? {
        guard let code, let credentials = appleCredentials(app) else { return nil }
        let exchanged = try answering(providers.exchangeAppleCode(code, clientID: identity.audience, redirectURI: nil, credentials: credentials))
        let redeemed = try answering(providers.verifyApple(exchanged.idToken, audiences: [identity.audience], expectedNonceHash: nil))
        guard constantTimeEquals(Array(redeemed.subject.utf8), Array(identity.subject.utf8)) else {
            throw GatehouseError(.invalidCredential, "The authorization code is not of the Apple account of identity_token.", status: 401)
        }
        return exchanged.refreshToken
    }

    /// The account a verified identity signs in to: the one it is linked to or, for Apple, the one
    /// whose Apple identity of this `sub` Apple's `consent-revoked` unlinked (``AppleNotifications``):
    /// the same Apple account signing in again links to it anew (`identity.linked`, `relinked`).
    func owner(_ data: any AppScopedStore, provider: Provider, identity: ExternalIdentity, origin: RequestOrigin) throws -> User? {
        if let user = try data.identities.user(provider: provider.identity, subject: identity.subject) { return user }
        guard provider == .apple, try data.appleAccounts.revokedAppleIdentityOwner(subject: identity.subject) != nil else { return nil }
        let now = clock.nowMillis()
        return try units.run(data) { tx -> User? in
            // Taken, and the account's row held: of two sign-ins at once, one links; the other finds the link.
            guard let id = try tx.appleAccounts.takeRevokedAppleIdentity(subject: identity.subject), try tx.users.lockUser(id) != nil else {
                return try tx.identities.user(provider: provider.identity, subject: identity.subject)
            }
            let email = identity.email.flatMap { try? InputRules.email($0) }
            try IdentityConflict.answering {
                try tx.identities.addIdentity(id, Identity(provider: .apple, subject: identity.subject, email: email, createdAt: now))
            }
            try tx.auditLog.record(Event(
                type: .identityLinked, userID: id, sessionID: nil, ip: origin.ip, userAgent: origin.userAgent, data: ["provider": "apple", "relinked": true],
                createdAt: now))
            return try tx.users.user(id)
        }
    }

    /// The user of a verified identity: `existing`, the one it is linked to, or a new account
    /// (never one found by email: a provider sign-in never attaches to an existing account by email).
    func account(
        app: AppContext, _ data: any AppScopedStore, provider: Provider, identity: ExternalIdentity, existing: User?, firstName: String?, lastName: String?,
        origin: RequestOrigin
    ) throws -> (User, Bool) {
        let now = clock.nowMillis()
        if let user = existing {
            if user.firstName == nil && user.lastName == nil, firstName != nil || lastName != nil {
                try data.users.fillNames(user.id, firstName: firstName, lastName: lastName, now: now)
                return (try data.users.user(user.id) ?? user, false)
            }
            return (user, false)
        }
        let email = identity.email.flatMap { try? InputRules.email($0) }
        // An unverified address is kept (the user may verify it later) but marked so: it takes no
        // part in email collisions and never becomes a password identity's email.
        let user = User(
            id: .generate(), email: email, emailVerified: email != nil && identity.emailVerified, firstName: firstName ?? identity.firstName,
            lastName: lastName ?? identity.lastName, createdAt: now, updatedAt: now, lastSignInAt: now)
        do {
            try units.run(data) { tx in
                // A verified address is held while it is checked and taken, as sign-up and code
                // sign-in hold it: two of them at once cannot both take it.
                if user.emailVerified, let email { try emailCodes.lockAddress(tx, email) }
                try requireNewAccountAllowed(app: app, tx, identity: identity)
                try UserConflict.answering {
                    try tx.users.insertUser(
                        user, passwordHash: nil, identity: Identity(provider: provider.identity, subject: identity.subject, email: email, createdAt: now),
                        event: Event(type: .userSignedUp, userID: user.id, sessionID: nil, ip: origin.ip, userAgent: origin.userAgent, data: ["method": .string(provider.rawValue)], createdAt: now))
                }
            }
        } catch let error as GatehouseError where error.code == .emailAlreadyInUse {
            // (Out of the rolled-back transaction: on PostgreSQL it cannot run another statement.)
            // The same provider account signed up at the same moment from another request: use it.
            if let existing = try data.identities.user(provider: provider.identity, subject: identity.subject) { return (existing, false) }
            throw error
        }
        return (user, true)
    }

    /// Whether this identity may become a new account: sign-up open (as for passwords), and its
    /// email not another account's unless the app keeps such accounts separate. An email the
    /// provider does not say is verified proves nothing and collides with nothing.
    private func requireNewAccountAllowed(app: AppContext, _ data: any AppScopedStore, identity: ExternalIdentity) throws {
        guard app.settings.allowSignup else { throw GatehouseError(.signupDisabled, "This app does not accept new sessions.") }
        if identity.emailVerified, let email = identity.email.flatMap({ try? InputRules.email($0) }), app.settings.emailCollision == "reject",
            try data.users.emailInUse(email, except: nil)
        {
            throw GatehouseError(
                .accountExistsWithDifferentCredential,
                "An account with this email already exists. Sign in the way you did before, then link this method in the account settings.")
        }
    }

    /// Clock skew allowed between a provider and us when judging whether its token is recent.
    static let freshnessLeewaySeconds: Int64 = 60

    /// A provider token that carries a nonce counts once per (issuer, subject, nonce), on every
    /// node: a second use of it is a replay (401 `auth/invalid-credential`).
    func useNonce(of identity: ExternalIdentity) throws {
        guard let key = nonceKey(identity) else { return }
        // Kept until the token expires (with the verifier's leeway), after which it cannot verify anyway.
        let expiresAt = (max(identity.token.expiresAt, clock.nowSeconds) + 60) * 1000
        guard try store.useProviderNonce(key: key, expiresAt: expiresAt, now: clock.nowMillis()) else {
            throw GatehouseError(.invalidCredential, "This token was used already; get a new one.", status: 401)
        }
    }

    private func nonceKey(_ identity: ExternalIdentity) -> String? {
        identity.token.nonce.map { Digest.hex(Digest.sha256(Array("\(identity.token.issuer)\n\(identity.subject)\n\($0)".utf8))) }
    }

    /// Runs `body`, which needs the provider after the token's nonce was used; if the provider
    /// cannot be reached, the nonce is given back, so the client's retry with the same token (as
    /// 503 `provider/unavailable` asks) is not taken for a replay.
    func releasingNonceIfUnavailable<T>(_ identity: ExternalIdentity, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as GatehouseError where error.code == .providerUnavailable {
            if let key = nonceKey(identity) { try? store.releaseProviderNonce(key: key) }
            throw error
        }
    }

    // MARK: -

    func keepAppleToken(app: AppContext, _ data: any AppScopedStore, user: UserID, identity: ExternalIdentity, refreshToken: String?) throws {
        guard let refreshToken else { return }
        let sealed = sealer.seal(refreshToken, app: app.id, field: StoredProviderToken.appleFieldName(user: user, clientID: identity.audience))
        _ = try data.identities.saveProviderToken(user, provider: .apple, clientID: identity.audience, sealedToken: sealed, now: clock.nowMillis())
    }

    func appleCredentials(_ app: AppContext) -> AppleCredentials? { app.settings.apple.credentials }

    func requireMethod(_ provider: Provider, _ app: AppContext) throws {
        let offered = provider.settings != nil ? app.settings.signInProviders.contains(provider.rawValue) : app.settings.signInMethods.contains(provider.method)
        guard offered else {
            throw GatehouseError(.signInMethodDisabled, "This app does not offer \(provider.rawValue) sign-in.")
        }
    }

    private func checkLength(_ token: String, field: String) throws {
        if token.trimmingCharacters(in: .whitespaces).isEmpty || token.utf8.count > Self.maxTokenLength {
            throw GatehouseError.validation(field, "Must be a token of at most \(Self.maxTokenLength) characters.")
        }
    }

    func notConfigured(_ what: String) -> GatehouseError {
        GatehouseError(.providerNotConfigured, "\(what) is not configured for this app.")
    }

    func hash(_ secret: String) -> String { Digest.hex(Digest.sha256(Array(secret.utf8))) }

    /// Runs a provider call; its failure becomes the client's answer (``ProviderFailure/clientError``).
    func answering<T>(_ call: @autoclosure () throws(ProviderFailure) -> T) throws(GatehouseError) -> T {
        do { return try call() } catch { throw error.clientError }
    }
}
