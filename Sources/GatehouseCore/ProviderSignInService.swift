import Foundation
import GatehouseCrypto

/// Sign-in with Apple (native and web), Google and Firebase-exchanged tokens; linking and
/// unlinking sign-in methods; reauthentication with a provider token.
public final class ProviderSignInService: Sendable {
    private let store: any Store
    private let directory: AppDirectory
    private let accounts: AccountService
    private let providers: any IdentityProviders
    private let sealer: SecretSealer
    private let clock: any Clock
    private let limiter: RateLimiter
    private let publicURL: String
    /// For the lock on an address a new account takes (``EmailCodes/lockAddress(_:_:)``).
    private let emailCodes: EmailCodes
    /// Runs the service's units of work and applies what follows their commit.
    private let units: UnitOfWork

    /// Longest provider token accepted (API.md): longer is a validation error.
    public static let maxTokenLength = 8192
    static let flowLifetimeMillis: Int64 = 10 * 60 * 1000
    static let loginCodeLifetimeMillis: Int64 = 60 * 1000

    public init(
        store: any Store, directory: AppDirectory, accounts: AccountService, providers: any IdentityProviders, sealer: SecretSealer, clock: any Clock,
        publicURL: String, emailCodes: EmailCodes, units: UnitOfWork
    ) {
        self.units = units
        self.emailCodes = emailCodes
        self.store = store
        self.directory = directory
        self.accounts = accounts
        self.providers = providers
        self.sealer = sealer
        self.clock = clock
        self.limiter = RateLimiter(clock: clock)
        self.publicURL = publicURL
    }

    public enum Provider: String, Sendable {
        case apple, google
        var firebaseName: String { self == .apple ? "apple.com" : "google.com" }
        var method: SignInMethod { self == .apple ? .apple : .google }
    }

    /// What the client sent to prove who they are at a provider.
    public enum Proof: Sendable {
        /// Apple's identity token, the raw nonce, and optionally the authorization code.
        case apple(identityToken: String, nonce: String?, authorizationCode: String?)
        case google(idToken: String, nonce: String?)
        case firebase(token: String)
    }

    // MARK: - Signing in

    public func signIn(
        app: AppContext, provider: Provider, proof: Proof, firstName: String?, lastName: String?, origin: RequestOrigin
    ) throws -> SessionGrant {
        try accounts.metrics.countingSignIn(provider.method) {
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
        let existing = try data.user(provider: provider.rawValue, subject: identity.subject)
        if appleCode != nil, existing == nil { try requireNewAccountAllowed(app: app, data, identity: identity) }
        let appleRefreshToken = try releasingNonceIfUnavailable(identity) { try redeemAppleCode(appleCode, app: app, identity: identity) }
        let (user, isNew) = try account(
            app: app, data, provider: provider, identity: identity, existing: existing, firstName: first, lastName: last, origin: origin)
        try keepAppleToken(app: app, data, user: user.id, identity: identity, refreshToken: appleRefreshToken)
        return try accounts.startSession(app: app, data, user: user, method: provider.method, isNewUser: isNew, origin: origin)
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
        case .firebase(let token):
            try checkLength(token, field: "firebase_id_token")
            guard let project = app.settings.firebase.projectID else { throw notConfigured("Firebase") }
            return (try providers.verifyFirebase(token, projectID: project, expectedProvider: provider.firebaseName), nil)
        case .google(let token, let nonce):
            try checkLength(token, field: "id_token")
            guard !app.settings.google.clientIDs.isEmpty else { throw notConfigured("Google") }
            return (try providers.verifyGoogle(token, audiences: app.settings.google.clientIDs, nonce: nonce), nil)
        case .apple(let token, let nonce, let code):
            try checkLength(token, field: "identity_token")
            let apple = app.settings.apple
            let audiences = apple.clientIDs + (apple.servicesID.map { [$0] } ?? [])
            guard !audiences.isEmpty else { throw notConfigured("Sign in with Apple") }
            if nonce == nil && apple.requireNonce { throw GatehouseError.validation("nonce", "Required: the raw nonce whose SHA-256 the app gave Apple.") }
            if let nonce, nonce.isEmpty || nonce.utf8.count > 512 { throw GatehouseError.validation("nonce", "Must be 1 to 512 characters.") }
            let identity = try providers.verifyApple(token, audiences: audiences, expectedNonceHash: nonce.map { Digest.hex(Digest.sha256(Array($0.utf8))) })
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
        let exchanged = try providers.exchangeAppleCode(code, clientID: identity.audience, redirectURI: nil, credentials: credentials)
        let redeemed = try providers.verifyApple(exchanged.idToken, audiences: [identity.audience], expectedNonceHash: nil)
        guard constantTimeEquals(Array(redeemed.subject.utf8), Array(identity.subject.utf8)) else {
            throw GatehouseError(.invalidCredential, "The authorization code is not of the Apple account of identity_token.", status: 401)
        }
        return exchanged.refreshToken
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
                try data.fillNames(user.id, firstName: firstName, lastName: lastName, now: now)
                return (try data.user(user.id) ?? user, false)
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
                try tx.insertUser(
                    user, passwordHash: nil, identity: Identity(provider: provider.rawValue, subject: identity.subject, email: email, createdAt: now),
                    event: Event(type: .userSignedUp, userID: user.id, sessionID: nil, ip: origin.ip, userAgent: origin.userAgent, data: ["method": .string(provider.rawValue)], createdAt: now))
            }
        } catch let error as GatehouseError where error.code == .emailAlreadyInUse {
            // (Out of the rolled-back transaction: on PostgreSQL it cannot run another statement.)
            // The same provider account signed up at the same moment from another request: use it.
            if let existing = try data.user(provider: provider.rawValue, subject: identity.subject) { return (existing, false) }
            throw error
        }
        return (user, true)
    }

    /// Whether this identity may become a new account: sign-up open (as for passwords), and its
    /// email not another account's unless the app keeps such accounts separate. An email the
    /// provider does not say is verified proves nothing and collides with nothing.
    private func requireNewAccountAllowed(app: AppContext, _ data: any AppScopedStore, identity: ExternalIdentity) throws {
        guard app.settings.allowSignup else { throw GatehouseError(.signupDisabled, "This app does not accept new accounts.") }
        if identity.emailVerified, let email = identity.email.flatMap({ try? InputRules.email($0) }), app.settings.emailCollision == "reject",
            try data.emailInUse(email, except: nil)
        {
            throw GatehouseError(
                .accountExistsWithDifferentCredential,
                "An account with this email already exists. Sign in the way you did before, then link this method in the account settings.")
        }
    }

    // MARK: - Linking

    /// Links Apple or Google to the signed-in user (recent sign-in required).
    public func link(app: AppContext, claims: AccessClaims, provider: Provider, proof: Proof, origin: RequestOrigin) throws -> [Identity] {
        try accounts.requireRecentLogin(app: app, claims: claims)
        let data = store.app(app.id)
        try requireMethod(provider, app)
        let (identity, appleCode) = try verify(app: app, provider: provider, proof: proof)
        if let owner = try data.user(provider: provider.rawValue, subject: identity.subject) {
            if owner.id == claims.userID { return try data.identities(claims.userID) }
            throw GatehouseError(.credentialAlreadyInUse, "This \(provider.rawValue) account signs in to another user of this app.")
        }
        if try data.identities(claims.userID).contains(where: { $0.provider == provider.rawValue }) {
            throw GatehouseError(.credentialAlreadyInUse, "Another \(provider.rawValue) account is linked already; unlink it first.")
        }
        let appleRefreshToken = try releasingNonceIfUnavailable(identity) { try redeemAppleCode(appleCode, app: app, identity: identity) }
        let now = clock.nowMillis()
        return try units.run(data) { tx in
            try tx.addIdentity(claims.userID, Identity(provider: provider.rawValue, subject: identity.subject, email: identity.email, createdAt: now))
            try keepAppleToken(app: app, tx, user: claims.userID, identity: identity, refreshToken: appleRefreshToken)
            try tx.record(Event(type: .identityLinked, userID: claims.userID, sessionID: claims.sessionID, ip: origin.ip, userAgent: origin.userAgent, data: ["provider": .string(provider.rawValue)], createdAt: now))
            return try tx.identities(claims.userID)
        }
    }

    /// Unlinks a sign-in method (recent sign-in required); the last one cannot go.
    public func unlink(app: AppContext, claims: AccessClaims, provider: String, origin: RequestOrigin) throws -> [Identity] {
        try accounts.requireRecentLogin(app: app, claims: claims)
        let data = store.app(app.id)
        let identities = try data.identities(claims.userID)
        guard identities.contains(where: { $0.provider == provider }) else { throw GatehouseError(.notFound, "This sign-in method is not linked.") }
        guard identities.count > 1 else { throw GatehouseError(.lastSignInMethod, "This is the account's only way to sign in; add another first.") }
        let now = clock.nowMillis()
        return try units.run(data) { tx in
            // Checked again atomically: a concurrent unlink of the other method may have won.
            guard try tx.removeIdentity(claims.userID, provider: provider, now: now) else {
                throw GatehouseError(.lastSignInMethod, "This is the account's only way to sign in; add another first.")
            }
            try tx.record(Event(type: .identityUnlinked, userID: claims.userID, sessionID: claims.sessionID, ip: origin.ip, userAgent: origin.userAgent, data: ["provider": .string(provider)], createdAt: now))
            return try tx.identities(claims.userID)
        }
    }

    /// Reauthentication with a provider token: it must be the signed-in user's own identity, bound
    /// to this request by its nonce, and issued within the app's `recent_login_seconds` (+ 60 s of
    /// clock skew): an old token proves an old sign-in, not a recent one.
    public func reauthenticate(app: AppContext, claims: AccessClaims, provider: Provider, proof: Proof, origin: RequestOrigin) throws -> (token: String, expiresIn: Int64) {
        let data = store.app(app.id)
        try limiter.hit(data, bucket: "auth", subject: rateLimitSubject(ip: origin.ip), limit: app.settings.rateLimits.authPerMinutePerIP)
        switch proof {
        case .apple(_, nil, _), .google(_, nil):
            throw GatehouseError.validation("nonce", "Required to reauthenticate: the raw nonce the token was requested with.")
        case .apple, .google, .firebase: break
        }
        try accounts.requireReauthenticationGuessesLeft(app, claims: claims)
        do {
            let (identity, _) = try verify(app: app, provider: provider, proof: proof)
            let oldest = clock.nowSeconds - app.settings.recentLoginSeconds - Self.freshnessLeewaySeconds
            guard identity.token.signedInAt >= oldest else {
                throw GatehouseError(
                    .invalidCredential, "This \(provider.rawValue) token was issued too long ago to count as a recent sign-in; get a new one.", status: 401)
            }
            guard let owner = try data.user(provider: provider.rawValue, subject: identity.subject), owner.id == claims.userID else {
                throw GatehouseError(.invalidCredential, "This \(provider.rawValue) account is not the signed-in user's.", status: 401)
            }
        } catch let error as GatehouseError where error.code == .invalidCredential {
            try accounts.countFailedReauthentication(app, claims: claims)
            throw error
        }
        return try accounts.refreshAuthTime(app: app, claims: claims)
    }

    /// Clock skew allowed between a provider and us when judging whether its token is recent.
    static let freshnessLeewaySeconds: Int64 = 60

    /// A provider token that carries a nonce counts once per (issuer, subject, nonce), on every
    /// node: a second use of it is a replay (401 `auth/invalid-credential`).
    private func useNonce(of identity: ExternalIdentity) throws {
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
    private func releasingNonceIfUnavailable<T>(_ identity: ExternalIdentity, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as GatehouseError where error.code == .providerUnavailable {
            if let key = nonceKey(identity) { try? store.releaseProviderNonce(key: key) }
            throw error
        }
    }

    // MARK: - Apple web flow

    /// Starts the web flow: checks the redirect URI, stores a single-use flow, and answers the
    /// Apple URL to redirect to and the browser-binding cookie value.
    public func startWebFlow(
        app: AppContext, redirectURI: String, clientState: String?, codeChallenge: String?, codeChallengeMethod: String?, origin: RequestOrigin
    ) throws -> (url: String, binding: String) {
        // Each call stores a flow, for nothing but the public app key: bounded per IP.
        try limitWebFlow(app, origin)
        try requireMethod(.apple, app)
        guard let servicesID = app.settings.apple.servicesID else { throw notConfigured("Sign in with Apple on the web (apple.services_id)") }
        // The callback redeems Apple's code, which needs the app's key: refuse now, not after the user signed in at Apple.
        guard appleCredentials(app) != nil else { throw notConfigured("Sign in with Apple on the web (apple.team_id, key_id and private_key)") }
        guard app.settings.redirectURIs.contains(redirectURI) else {
            throw GatehouseError(.invalidRedirectURI, "redirect_uri is not one of the app's redirect_uris.")
        }
        if let clientState, clientState.utf8.count > 512 { throw GatehouseError.validation("state", "Must be at most 512 characters.") }
        if codeChallenge == nil, app.settings.requiresPKCE(redirectURI: redirectURI) {
            throw GatehouseError.validation(
                "code_challenge", "Required: this app signs in on the web with PKCE (S256). Send code_challenge and code_challenge_method=S256.")
        }
        if let codeChallenge {
            guard codeChallengeMethod == "S256", (43...128).contains(codeChallenge.utf8.count), Base64URL.decode(codeChallenge) != nil else {
                throw GatehouseError.validation("code_challenge", "Must be a base64url S256 challenge with code_challenge_method=S256.")
            }
        }
        let state = SecureRandom.token(), binding = SecureRandom.token()
        let nonce = Digest.hex(Digest.sha256(Array(SecureRandom.token().utf8)))
        let now = clock.nowMillis()
        try store.app(app.id).insertWebFlow(
            WebFlow(
                id: hash(state), appID: app.id, bindingHash: hash(binding), nonce: nonce, redirectURI: redirectURI, clientState: clientState,
                codeChallenge: codeChallenge, createdAt: now, expiresAt: now + Self.flowLifetimeMillis))
        let url = providers.appleAuthorizeURL(servicesID: servicesID, redirectURI: callbackURL, state: state, nonce: nonce)
        return (url, binding)
    }

    public var callbackURL: String { Self.callbackURL(publicURL: publicURL) }
    /// The Apple web flow's callback on a server at `publicURL`: the `redirect_uri` its codes are redeemed with.
    public static func callbackURL(publicURL: String) -> String { publicURL + "/v1/auth/oauth/apple/callback" }

    /// What Apple posted back.
    public struct Callback: Sendable {
        public var state: String?
        public var code: String?
        public var idToken: String?
        public var user: String?
        public var error: String?
        public var binding: String?
        public init(state: String?, code: String?, idToken: String?, user: String?, error: String?, binding: String?) {
            self.state = state
            self.code = code
            self.idToken = idToken
            self.user = user
            self.error = error
            self.binding = binding
        }
    }

    /// Finishes the web flow. Throws `auth/invalid-flow` (no redirect) for an unknown, expired or used
    /// state or a missing/wrong binding cookie; otherwise answers where to send the browser:
    /// `redirect_uri?login_code=…&state=…` or `redirect_uri?error=…&state=…`.
    public func finishWebFlow(_ callback: Callback, origin: RequestOrigin) throws -> String {
        let invalidFlow = GatehouseError(.invalidFlow, "This sign-in link is not valid any more. Start again from the app.")
        guard let state = callback.state, state.utf8.count <= 256, let binding = callback.binding, binding.utf8.count <= 256 else { throw invalidFlow }
        // Counted against the flow's app before the flow is used up, so that a callback refused
        // here (429) leaves the flow for the browser's retry. An unknown state writes nothing.
        if let appID = try store.webFlowApp(id: hash(state), now: clock.nowMillis()), let app = try? directory.app(id: appID) {
            try limitWebFlow(app, origin)
        }
        guard let flow = try store.takeWebFlow(id: hash(state), bindingHash: hash(binding), now: clock.nowMillis()) else { throw invalidFlow }
        func redirect(_ parameters: [(String, String)]) -> String {
            var all = parameters
            if let clientState = flow.clientState { all.append(("state", clientState)) }
            let query = all.map { "\($0.0)=\(formEncode($0.1))" }.joined(separator: "&")
            return flow.redirectURI + (flow.redirectURI.contains("?") ? "&" : "?") + query
        }
        if let error = callback.error {
            return redirect([("error", error == "user_cancelled_authorize" ? "user_cancelled_authorize" : "access_denied")])
        }
        guard let app = try? directory.app(id: flow.appID) else { return redirect([("error", "server_error")]) }
        // Switched off since the flow began: nothing is asked of Apple for it.
        guard !app.isDisabled else { return redirect([("error", "access_denied")]) }
        do {
            guard let code = callback.code else { return redirect([("error", "access_denied")]) }
            // The app's own configuration is missing: the server's fault, not the user's.
            guard let servicesID = app.settings.apple.servicesID, let credentials = appleCredentials(app) else {
                return redirect([("error", "server_error")])
            }
            let exchanged = try providers.exchangeAppleCode(code, clientID: servicesID, redirectURI: callbackURL, credentials: credentials)
            let identity = try providers.verifyApple(exchanged.idToken, audiences: [servicesID], expectedNonceHash: flow.nonce)
            // Apple also posted this token through the browser: it must not sign in a second time
            // at /v1/auth/oauth/apple (where the Services ID is an audience too).
            try useNonce(of: identity)
            let names = Self.appleUserNames(callback.user)
            let data = store.app(app.id)
            let existing = try data.user(provider: Provider.apple.rawValue, subject: identity.subject)
            let (user, isNew) = try account(
                app: app, data, provider: .apple, identity: identity, existing: existing, firstName: names.first, lastName: names.last, origin: origin)
            try keepAppleToken(app: app, data, user: user.id, identity: identity, refreshToken: exchanged.refreshToken)
            if let ban = user.ban, ban.holds(at: clock.nowMillis()) { return redirect([("error", "user_disabled")]) }
            let loginCode = SecureRandom.token()
            let now = clock.nowMillis()
            try data.insertLoginCode(
                LoginCode(
                    codeHash: hash(loginCode), userID: user.id, method: .apple, isNewUser: isNew, codeChallenge: flow.codeChallenge, createdAt: now,
                    expiresAt: now + Self.loginCodeLifetimeMillis))
            return redirect([("login_code", loginCode)])
        } catch let error as GatehouseError {
            switch error.code {
            case .providerUnavailable: return redirect([("error", "server_error")])
            default: return redirect([("error", "access_denied")])
            }
        } catch {
            // The flow is used up: the browser must land on the app's page, not on a problem document.
            return redirect([("error", "server_error")])
        }
    }

    /// `POST /v1/auth/exchange`: a login code (one-time, 60 s) for a session; PKCE when the flow had a challenge.
    public func exchange(app: AppContext, loginCode: String, codeVerifier: String?, origin: RequestOrigin) throws -> SessionGrant {
        // The web flow is Apple's; it is counted here, where its session opens, not at the callback.
        try accounts.metrics.countingSignIn(.apple) { try redeem(app: app, loginCode: loginCode, codeVerifier: codeVerifier, origin: origin) }
    }

    private func redeem(app: AppContext, loginCode: String, codeVerifier: String?, origin: RequestOrigin) throws -> SessionGrant {
        let refused = GatehouseError(.invalidLoginCode, "The login code is unknown, used, expired, or the code_verifier does not match.")
        guard loginCode.utf8.count <= 256 else { throw refused }
        let data = store.app(app.id)
        guard let code = try data.takeLoginCode(hash: hash(loginCode), now: clock.nowMillis()) else { throw refused }
        switch code.codeChallenge {
        case nil:
            // A verifier for a flow started without a challenge is a PKCE downgrade (RFC 9700
            // 4.8.2): the page expected its own flow, so this code was swapped in.
            guard codeVerifier == nil else { throw refused }
        case let challenge?:
            guard let verifier = codeVerifier, (43...128).contains(verifier.utf8.count),
                constantTimeEquals(Array(Base64URL.encode(Digest.sha256(Array(verifier.utf8))).utf8), Array(challenge.utf8))
            else { throw refused }
        }
        guard let user = try data.user(code.userID) else { throw refused }
        return try accounts.startSession(app: app, data, user: user, method: code.method, isNewUser: code.isNewUser, origin: origin)
    }

    // MARK: -

    private func limitWebFlow(_ app: AppContext, _ origin: RequestOrigin) throws {
        try limiter.hit(
            store.app(app.id), bucket: "web_flow", subject: rateLimitSubject(ip: origin.ip), limit: app.settings.rateLimits.webFlowPerMinutePerIP)
    }

    private func keepAppleToken(app: AppContext, _ data: any AppScopedStore, user: UserID, identity: ExternalIdentity, refreshToken: String?) throws {
        guard let refreshToken else { return }
        let sealed = sealer.seal(refreshToken, app: app.id, field: StoredProviderToken.appleFieldName(user: user, clientID: identity.audience))
        _ = try data.saveProviderToken(user, provider: "apple", clientID: identity.audience, sealedToken: sealed, now: clock.nowMillis())
    }

    private func appleCredentials(_ app: AppContext) -> AppleCredentials? { app.settings.apple.credentials }

    private func requireMethod(_ provider: Provider, _ app: AppContext) throws {
        guard app.settings.signInMethods.contains(provider.method) else {
            throw GatehouseError(.signInMethodDisabled, "This app does not offer \(provider.rawValue) sign-in.")
        }
    }

    private func checkLength(_ token: String, field: String) throws {
        if token.trimmingCharacters(in: .whitespaces).isEmpty || token.utf8.count > Self.maxTokenLength {
            throw GatehouseError.validation(field, "Must be a token of at most \(Self.maxTokenLength) characters.")
        }
    }

    private func notConfigured(_ what: String) -> GatehouseError {
        GatehouseError(.providerNotConfigured, "\(what) is not configured for this app.")
    }

    private func hash(_ secret: String) -> String { Digest.hex(Digest.sha256(Array(secret.utf8))) }

    /// Apple's `user` form field (JSON, first authorization only): `{"name": {"firstName", "lastName"}, "email"}`.
    static func appleUserNames(_ user: String?) -> (first: String?, last: String?) {
        guard let user, user.utf8.count <= 4096, let json = try? JSON.parse(Array(user.utf8)), let name = json["name"] else { return (nil, nil) }
        let first = name["firstName"]?.stringValue.flatMap { try? InputRules.name($0, field: "first_name") }
        let last = name["lastName"]?.stringValue.flatMap { try? InputRules.name($0, field: "last_name") }
        return (first ?? nil, last ?? nil)
    }
}

/// `application/x-www-form-urlencoded` value encoding: everything but unreserved characters.
func formEncode(_ value: String) -> String {
    var out = ""
    for byte in value.utf8 {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            out.unicodeScalars.append(Unicode.Scalar(byte))
        default:
            out += String(format: "%%%02X", byte)
        }
    }
    return out
}
