import Foundation
import GatehouseCrypto

/// The web flow (API.md "Apple web flow", "More providers"): started here for Apple or one of the
/// providers the app defines, the provider's callback, and the login code the page exchanges for a
/// session. One flow for every provider: what differs is where the browser is sent
/// (``IdentityProviders/appleAuthorizeURL(servicesID:redirectURI:state:nonce:)`` or
/// ``TenantWebFlows/authorizeURL(app:provider:callbackURL:state:nonce:codeVerifier:)``) and how the code comes
/// back as an identity (``redeemedIdentity(_:app:flow:state:code:user:)``).
extension ProviderSignInService {
    /// Starts the web flow: checks the redirect URI, stores a single-use flow, and answers the
    /// provider's URL to redirect to and the browser-binding cookie value.
    public func startWebFlow(
        app: AppContext, provider: Provider = .apple, redirectURI: String, clientState: String?, codeChallenge: String?, codeChallengeMethod: String?,
        origin: RequestOrigin
    ) throws -> (url: String, binding: String) {
        // Each call stores a flow, for nothing but the public app key: bounded per IP.
        try limitWebFlow(app, origin)
        try requireMethod(provider, app)
        // The callback redeems the provider's code: refuse now, not after the user signed in there.
        try requireWebFlowConfigured(app, provider)
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
        let url: String
        var providerVerifier: String?
        if let settings = provider.settings, let webFlows {
            let verifier = SecureRandom.token()
            providerVerifier = verifier
            // An issuer that cannot be asked for its endpoints stores no flow.
            url = try answering(webFlows.authorizeURL(
                app: app.id, provider: settings, callbackURL: callbackURL(of: provider), state: state, nonce: nonce, codeVerifier: verifier))
        } else {
            url = providers.appleAuthorizeURL(servicesID: app.settings.apple.servicesID ?? "", redirectURI: callbackURL, state: state, nonce: nonce)
        }
        let now = clock.nowMillis()
        try store.app(app.id).identities.insertWebFlow(
            WebFlow(
                id: hash(state), appID: app.id, provider: provider.rawValue, bindingHash: hash(binding), nonce: nonce, redirectURI: redirectURI,
                clientState: clientState, codeChallenge: codeChallenge, providerVerifier: providerVerifier, createdAt: now,
                expiresAt: now + Self.flowLifetimeMillis))
        return (url, binding)
    }

    /// What the provider's web flow needs of the app's settings: Apple's Services ID and key; a
    /// tenant provider's client secret where its token endpoint takes no code without one.
    private func requireWebFlowConfigured(_ app: AppContext, _ provider: Provider) throws {
        guard let settings = provider.settings else {
            guard app.settings.apple.servicesID != nil else { throw notConfigured("Sign in with Apple on the web (apple.services_id)") }
            guard appleCredentials(app) != nil else { throw notConfigured("Sign in with Apple on the web (apple.team_id, key_id and private_key)") }
            return
        }
        guard webFlows != nil else { throw notConfigured("The web flow of \(provider.rawValue)") }
        if settings.kind.webFlowNeedsClientSecret, settings.clientSecret?.isEmpty ?? true {
            throw notConfigured("The web flow of \(provider.rawValue) (its client_secret)")
        }
    }

    public var callbackURL: String { Self.callbackURL(publicURL: publicURL) }
    /// The Apple web flow's callback on a server at `publicURL`: the `redirect_uri` its codes are redeemed with.
    public static func callbackURL(publicURL: String) -> String { publicURL + "/v1/auth/oauth/apple/callback" }
    /// The callback of a provider's web flow: the `redirect_uri` registered at the provider.
    public func callbackURL(of provider: Provider) -> String {
        provider.settings == nil ? callbackURL : publicURL + "/v1/auth/oidc/\(provider.rawValue)/callback"
    }

    /// What the provider sent back through the browser.
    public struct Callback: Sendable {
        public var state: String?
        public var code: String?
        public var idToken: String?
        /// Apple's `user` (the name, at the first authorization only).
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

    /// Finishes the web flow at the callback of `provider` (`apple` or a tenant provider's id).
    /// Throws `auth/invalid-flow` (no redirect) for an unknown, expired or used state, a flow of
    /// another provider, or a missing/wrong binding cookie; otherwise answers where to send the
    /// browser: `redirect_uri?login_code=…&state=…` or `redirect_uri?error=…&state=…`.
    public func finishWebFlow(_ callback: Callback, provider providerName: String = "apple", origin: RequestOrigin) throws -> String {
        let invalidFlow = GatehouseError(.invalidFlow, "This sign-in link is not valid any more. Start again from the app.")
        guard let state = callback.state, state.utf8.count <= 256, let binding = callback.binding, binding.utf8.count <= 256 else { throw invalidFlow }
        // Counted against the flow's app before the flow is used up, so that a callback refused
        // here (429) leaves the flow for the browser's retry. An unknown state writes nothing.
        if let appID = try store.webFlowApp(id: hash(state), provider: providerName, now: clock.nowMillis()), let app = try? directory.app(id: appID) {
            try limitWebFlow(app, origin)
        }
        guard let flow = try store.takeWebFlow(id: hash(state), provider: providerName, bindingHash: hash(binding), now: clock.nowMillis()) else {
            throw invalidFlow
        }
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
        // Switched off since the flow began: nothing is asked of the provider for it.
        guard !app.isDisabled else { return redirect([("error", "access_denied")]) }
        // The provider's settings now: removed since the flow began is the server's refusal, not the user's.
        guard let provider = providerName == Provider.apple.rawValue ? .apple : Provider.tenant(providerName, in: app) else {
            return redirect([("error", "server_error")])
        }
        do {
            guard let code = callback.code, !code.isEmpty, code.utf8.count <= 4096 else { return redirect([("error", "access_denied")]) }
            try requireMethod(provider, app)
            // The app's own configuration is missing: the server's fault, not the user's.
            do { try requireWebFlowConfigured(app, provider) } catch { return redirect([("error", "server_error")]) }
            let redeemed = try redeemedIdentity(provider, app: app, flow: flow, state: state, code: code, user: callback.user)
            let identity = redeemed.identity
            // The provider also sent this ID token through the browser (Apple) or may hand it to
            // the page: it must not sign in a second time natively.
            try useNonce(of: identity)
            let data = store.app(app.id)
            let existing = try owner(data, provider: provider, identity: identity, origin: origin)
            let (user, isNew) = try account(
                app: app, data, provider: provider, identity: identity, existing: existing, firstName: redeemed.firstName, lastName: redeemed.lastName,
                origin: origin)
            try keepAppleToken(app: app, data, user: user.id, identity: identity, refreshToken: redeemed.appleRefreshToken)
            if let ban = user.ban, ban.holds(at: clock.nowMillis()) { return redirect([("error", "user_disabled")]) }
            let loginCode = SecureRandom.token()
            let now = clock.nowMillis()
            try data.identities.insertLoginCode(
                LoginCode(
                    codeHash: hash(loginCode), userID: user.id, method: provider.method, provider: provider.rawValue, isNewUser: isNew,
                    codeChallenge: flow.codeChallenge, createdAt: now, expiresAt: now + Self.loginCodeLifetimeMillis))
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

    /// Who the provider's code names: Apple's code redeemed with the app's key (its refresh token
    /// kept for revocation, the name from Apple's `user` field), or a tenant provider's through
    /// ``TenantWebFlows``. The ID token must carry the flow's nonce.
    private func redeemedIdentity(
        _ provider: Provider, app: AppContext, flow: WebFlow, state: String, code: String, user: String?
    ) throws -> (identity: ExternalIdentity, firstName: String?, lastName: String?, appleRefreshToken: String?) {
        if let settings = provider.settings, let webFlows {
            guard let verifier = flow.providerVerifier else { throw notConfigured("The web flow of \(provider.rawValue)") }
            let identity = try answering(webFlows.redeem(
                code: code, app: app.id, provider: settings, callbackURL: callbackURL(of: provider), state: state, nonce: flow.nonce, codeVerifier: verifier))
            return (identity, nil, nil, nil)
        }
        guard let servicesID = app.settings.apple.servicesID, let credentials = appleCredentials(app) else {
            throw notConfigured("Sign in with Apple on the web")
        }
        let exchanged = try answering(providers.exchangeAppleCode(code, clientID: servicesID, redirectURI: callbackURL, credentials: credentials))
        let identity = try answering(providers.verifyApple(exchanged.idToken, audiences: [servicesID], expectedNonceHash: flow.nonce))
        let names = Self.appleUserNames(user)
        return (identity, names.first, names.last, exchanged.refreshToken)
    }

    /// `POST /v1/auth/exchange`: a login code (one-time, 60 s) for a session; PKCE when the flow had a challenge.
    /// The sign-in is counted here, where its session opens, under the code's method: a code that
    /// is unknown, used or expired names no method and is not counted as a sign-in.
    public func exchange(app: AppContext, loginCode: String, codeVerifier: String?, origin: RequestOrigin) throws -> SessionGrant {
        let refused = GatehouseError(.invalidLoginCode, "The login code is unknown, used, expired, or the code_verifier does not match.")
        guard loginCode.utf8.count <= 256 else { throw refused }
        let data = store.app(app.id)
        guard let code = try data.identities.takeLoginCode(hash: hash(loginCode), now: clock.nowMillis()) else { throw refused }
        return try metrics.countingSignIn(code.method) { try redeem(app: app, data, code, codeVerifier: codeVerifier, origin: origin, refused: refused) }
    }

    private func redeem(
        app: AppContext, _ data: any AppScopedStore, _ code: LoginCode, codeVerifier: String?, origin: RequestOrigin, refused: GatehouseError
    ) throws -> SessionGrant {
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
        guard let user = try data.users.user(code.userID) else { throw refused }
        return try sessions.startSession(
            app: app, data, user: user, method: code.method, isNewUser: code.isNewUser, origin: origin, detail: ["method": .string(code.provider)]
        ).session()
    }

    func limitWebFlow(_ app: AppContext, _ origin: RequestOrigin) throws {
        try limiter.hit(
            store.app(app.id), bucket: "web_flow", subject: rateLimitSubject(ip: origin.ip), limit: app.settings.rateLimits.webFlowPerMinutePerIP)
    }

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
