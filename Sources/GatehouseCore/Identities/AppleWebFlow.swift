import Foundation
import GatehouseCrypto

/// Sign in with Apple on the web (API.md "Apple web flow"): the flow started here, Apple's
/// callback, and the login code the page exchanges for a session.
extension ProviderSignInService {
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
        try store.app(app.id).identities.insertWebFlow(
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
            let exchanged = try answering(providers.exchangeAppleCode(code, clientID: servicesID, redirectURI: callbackURL, credentials: credentials))
            let identity = try answering(providers.verifyApple(exchanged.idToken, audiences: [servicesID], expectedNonceHash: flow.nonce))
            // Apple also posted this token through the browser: it must not sign in a second time
            // at /v1/auth/oauth/apple (where the Services ID is an audience too).
            try useNonce(of: identity)
            let names = Self.appleUserNames(callback.user)
            let data = store.app(app.id)
            let existing = try owner(data, provider: .apple, identity: identity, origin: origin)
            let (user, isNew) = try account(
                app: app, data, provider: .apple, identity: identity, existing: existing, firstName: names.first, lastName: names.last, origin: origin)
            try keepAppleToken(app: app, data, user: user.id, identity: identity, refreshToken: exchanged.refreshToken)
            if let ban = user.ban, ban.holds(at: clock.nowMillis()) { return redirect([("error", "user_disabled")]) }
            let loginCode = SecureRandom.token()
            let now = clock.nowMillis()
            try data.identities.insertLoginCode(
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
        try metrics.countingSignIn(.apple) { try redeem(app: app, loginCode: loginCode, codeVerifier: codeVerifier, origin: origin) }
    }

    private func redeem(app: AppContext, loginCode: String, codeVerifier: String?, origin: RequestOrigin) throws -> SessionGrant {
        let refused = GatehouseError(.invalidLoginCode, "The login code is unknown, used, expired, or the code_verifier does not match.")
        guard loginCode.utf8.count <= 256 else { throw refused }
        let data = store.app(app.id)
        guard let code = try data.identities.takeLoginCode(hash: hash(loginCode), now: clock.nowMillis()) else { throw refused }
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
        return try sessions.startSession(app: app, data, user: user, method: code.method, isNewUser: code.isNewUser, origin: origin).session()
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
