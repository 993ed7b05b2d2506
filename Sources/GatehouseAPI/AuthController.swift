import GatehouseCore
import GatehouseHTTP

/// `/v1/auth/*` with passwords: sign-up, sign-in, refresh, sign-out, reauthentication.
struct AuthController {
    let auth: Authenticator
    let passwords: PasswordService
    let sessions: SessionService
    let providers: ProviderSignInService
    let emailFlows: EmailFlowService
    let passkeys: PasskeyService
    let anonymous: AnonymousUsers
    let clock: any Clock

    /// The refresh cookie's name for one app: two web apps on one Gatehouse host keep their own.
    static func refreshCookie(_ app: AppContext) -> String { "gh_refresh_\(app.id.rawValue)" }
    /// The name every app shared before 2026-12-05; still read until
    /// ``legacyRefreshCookieReadUntilMillis``, so browsers holding it are not signed out.
    static let legacyRefreshCookie = "gh_refresh"
    /// 2027-01-05T00:00:00Z: 30 days after the release that renamed the cookie.
    static let legacyRefreshCookieReadUntilMillis: Int64 = 1_799_107_200_000
    static func clearedCookie(_ name: String) -> String { "\(name)=; HttpOnly; Secure; SameSite=Lax; Path=/v1/auth; Max-Age=0" }

    /// Clears the app's refresh cookie. Never the old shared name: it may hold another app's
    /// token (whichever app of the host set it last), which this app's failure says nothing about.
    /// It is cleared only by a refresh that used it and succeeded (its successor moves to the
    /// app's own name), and is no longer read after ``legacyRefreshCookieReadUntilMillis``.
    static func clearRefreshCookies(_ app: AppContext, on response: inout HTTPResponse) {
        response.headers.add("Set-Cookie", clearedCookie(refreshCookie(app)))
    }

    func register(_ routes: inout Routes) {
        routes.post("/v1/auth/signup", hashesPassword: true, signUp)
        routes.post("/v1/auth/signin", hashesPassword: true, signIn)
        routes.post("/v1/auth/anonymous", signInAnonymously)
        routes.post("/v1/auth/refresh", refresh)
        routes.post("/v1/auth/signout", signOut)
        // It may hash a password or wait on a provider's keys: on the network threads, so a
        // hanging key server holds none of the hashing threads (the hasher still bounds hashing).
        routes.post("/v1/auth/reauthenticate", hashesPassword: true, callsProvider: true, reauthenticate)
    }

    func signUp(_ request: Request) throws -> HTTPResponse {
        let app = try auth.app(request)
        var body = try Body(request)
        let email = body.required("email", maxLength: 320)
        let password = body.required("password", maxLength: 4096)
        let first = body.optional("first_name", maxLength: 200)
        let last = body.optional("last_name", maxLength: 200)
        let locale = body.optional("locale", maxLength: 64)
        let displayName = body.optional("display_name", maxLength: 400)
        try body.finish()
        return sessionResponse(
            app,
            try passwords.signUp(
                app: app, email: email, password: password, firstName: first, lastName: last, locale: locale, displayName: displayName,
                origin: request.mailOrigin))
    }

    /// `POST /v1/auth/anonymous`: an empty body, `{}` or `{"locale"}`.
    func signInAnonymously(_ request: Request) throws -> HTTPResponse {
        let app = try auth.app(request)
        var body = try Body(request, allowEmpty: true)
        let locale = body.optional("locale", maxLength: 64)
        try body.finish()
        return sessionResponse(app, try anonymous.signIn(app: app, locale: locale, origin: request.origin))
    }

    func signIn(_ request: Request) throws -> HTTPResponse {
        let app = try auth.app(request)
        var body = try Body(request)
        let email = body.required("email", maxLength: 320)
        let password = body.required("password", maxLength: 4096)
        try body.finish()
        return sessionResponse(app, try passwords.signIn(app: app, email: email, password: password, origin: request.origin))
    }

    func refresh(_ request: Request) throws -> HTTPResponse {
        let app = try auth.app(request)
        var body = try Body(request, allowEmpty: true)
        // Any length: a token that is not one of ours is 401 auth/invalid-refresh-token (API.md), not a validation error.
        let given = body.optional("refresh_token", maxLength: 8192)
        try body.finish()
        var cookie: String?
        var fromLegacyCookie = false
        if app.settings.refreshCookie.setsCookie {
            let cookies = Cookies.parse(request.header("Cookie"))
            cookie = cookies[Self.refreshCookie(app)]
            if cookie == nil, clock.nowMillis() < Self.legacyRefreshCookieReadUntilMillis, let legacy = cookies[Self.legacyRefreshCookie] {
                cookie = legacy
                fromLegacyCookie = true
            }
        }
        guard let token = given ?? cookie else {
            throw GatehouseError.validation("refresh_token", "Required (or the \(Self.refreshCookie(app)) cookie).")
        }
        do {
            var response = sessionResponse(app, try sessions.refresh(app: app, refreshToken: token, origin: request.origin))
            // The successor goes under the app's own name; the old shared one is dropped.
            if fromLegacyCookie && given == nil { response.headers.add("Set-Cookie", Self.clearedCookie(Self.legacyRefreshCookie)) }
            return response
        } catch let error as GatehouseError where error.status == 401 && app.settings.refreshCookie.setsCookie {
            // A cookie that no longer refreshes is dropped, or the browser would send it forever.
            var response = Problem.response(error, instance: request.http.path, requestID: request.requestID)
            Self.clearRefreshCookies(app, on: &response)
            return response
        }
    }

    func signOut(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        var body = try Body(request, allowEmpty: true)
        let scopeText = body.optional("scope") ?? "current"
        try body.finish()
        guard let scope = SessionService.SignOutScope(rawValue: scopeText) else {
            throw GatehouseError.validation("scope", "Must be current, others or all.")
        }
        try sessions.signOut(app: app, claims: claims, scope: scope, origin: request.origin)
        var response = HTTPResponse.noContent
        if app.settings.refreshCookie.setsCookie && scope != .others {
            Self.clearRefreshCookies(app, on: &response)
        }
        return response
    }

    func reauthenticate(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        var body = try Body(request)
        let access: (token: String, expiresIn: Int64)
        if let name = body.optional("provider", maxLength: 64) {
            guard let provider = ProviderSignInService.Provider(rawValue: name) ?? ProviderSignInService.Provider.tenant(name, in: app) else {
                throw GatehouseError.validation("provider", "Must be apple, google or the id of one of the app's oidc_providers.")
            }
            let proof: ProviderSignInService.Proof
            if provider == .apple {
                proof = .apple(identityToken: body.required("identity_token", maxLength: 1 << 20), nonce: body.optional("nonce", maxLength: 512), authorizationCode: nil)
            } else if provider == .google {
                proof = .google(idToken: body.required("id_token", maxLength: 1 << 20), nonce: body.optional("nonce", maxLength: 512))
            } else {
                proof = .oidc(idToken: body.required("id_token", maxLength: 1 << 20), nonce: body.optional("nonce", maxLength: 512))
            }
            try body.finish()
            access = try providers.reauthenticate(app: app, claims: claims, provider: provider, proof: proof, origin: request.origin)
        } else if body.isPresent("passkey") {
            let credential = body.requiredObject("passkey")
            try body.finish()
            access = try passkeys.reauthenticate(app: app, claims: claims, credential: credential, origin: request.origin)
        } else if let code = body.optional("code", maxLength: 64) {
            try body.finish()
            access = try emailFlows.reauthenticate(app: app, claims: claims, code: code, origin: request.origin)
        } else {
            let password = body.required("password", maxLength: 4096)
            try body.finish()
            access = try passwords.reauthenticate(app: app, claims: claims, password: password, origin: request.origin)
        }
        return HTTPResponse.data(["access_token": .string(access.token), "expires_in": .int(access.expiresIn)]).noStore()
    }

    /// The session response: 201 when the call created the account, 200 otherwise.
    func sessionResponse(_ app: AppContext, _ grant: SessionGrant) -> HTTPResponse {
        var fields: [String: JSON] = [
            "access_token": .string(grant.accessToken), "token_type": "Bearer", "expires_in": .int(grant.expiresIn),
            "refresh_token": app.settings.refreshCookie.inBody ? .string(grant.refreshToken) : .null, "is_new_user": .bool(grant.isNewUser),
            "user": UserObject.json(grant.user, grant.identities),
        ]
        // Only when it did (API.md, "Deleting the account").
        if grant.isRestored { fields["is_restored"] = true }
        var response = HTTPResponse.data(.object(fields), status: grant.isNewUser ? 201 : 200).noStore()
        if app.settings.refreshCookie.setsCookie {
            response.headers.add(
                "Set-Cookie",
                "\(Self.refreshCookie(app))=\(grant.refreshToken); HttpOnly; Secure; SameSite=Lax; Path=/v1/auth; Max-Age=\(app.settings.refreshTokenTTLSeconds)")
        }
        return response
    }
}
