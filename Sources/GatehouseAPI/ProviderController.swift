import Foundation
import GatehouseCore
import GatehouseHTTP

/// Sign-in with Apple (native and web flow), Google and Firebase tokens; linking and unlinking.
struct ProviderController {
    let auth: Authenticator
    let providers: ProviderSignInService
    let sessions: AuthController

    static let flowCookie = "gh_flow"

    func register(_ routes: inout Routes) {
        routes.post("/v1/auth/oauth/apple", callsProvider: true, appleSignIn)
        routes.post("/v1/auth/oauth/google", callsProvider: true, googleSignIn)
        // It stores a web flow: not for a HEAD from a link checker.
        routes.get("/v1/auth/oauth/apple/authorize", head: false, appleAuthorize)
        routes.post("/v1/auth/oauth/apple/callback", body: .form, callsProvider: true, appleCallback)
        routes.post("/v1/auth/exchange", exchange)
        routes.post("/v1/me/identities/apple", callsProvider: true, linkApple)
        routes.post("/v1/me/identities/google", callsProvider: true, linkGoogle)
        routes.post("/v1/auth/oidc/{id}", callsProvider: true, tenantSignIn)
        // Asks the issuer for its endpoints, and stores a web flow: not for a HEAD.
        routes.get("/v1/auth/oidc/{id}/authorize", head: false, callsProvider: true, tenantAuthorize)
        // Most providers come back with a GET; a `response_mode=form_post` one with a POST.
        routes.get("/v1/auth/oidc/{id}/callback", head: false, callsProvider: true, tenantCallback)
        routes.post("/v1/auth/oidc/{id}/callback", body: .form, callsProvider: true, tenantCallback)
        // After the literal apple and google routes: any other name is one of the app's own providers.
        routes.post("/v1/me/identities/{provider}", callsProvider: true, linkTenantProvider)
        routes.delete("/v1/me/identities/{provider}", unlink)
    }

    func appleSignIn(_ request: Request) throws -> HTTPResponse {
        let app = try auth.app(request)
        var body = try Body(request)
        let proof = try appleProof(&body, linking: false)
        let first = body.optional("first_name", maxLength: 200)
        let last = body.optional("last_name", maxLength: 200)
        try body.finish()
        return sessions.sessionResponse(app, try providers.signIn(app: app, provider: .apple, proof: proof, firstName: first, lastName: last, origin: request.origin))
    }

    func googleSignIn(_ request: Request) throws -> HTTPResponse {
        let app = try auth.app(request)
        var body = try Body(request)
        let proof = try googleProof(&body, linking: false)
        try body.finish()
        return sessions.sessionResponse(app, try providers.signIn(app: app, provider: .google, proof: proof, firstName: nil, lastName: nil, origin: request.origin))
    }

    /// `POST /v1/auth/oidc/{id}`: `{id_token, nonce}` for the kinds with ID tokens, `{access_token}`
    /// for the others (Naver, GitHub).
    func tenantSignIn(_ request: Request) throws -> HTTPResponse {
        let app = try auth.app(request)
        let provider = try tenantProvider(request.parameters["id"], app)
        var body = try Body(request)
        let proof = try tenantProof(&body, provider)
        try body.finish()
        return sessions.sessionResponse(app, try providers.signIn(app: app, provider: provider, proof: proof, firstName: nil, lastName: nil, origin: request.origin))
    }

    /// The app's provider of that id: 404 for any other (a provider of another app included).
    func tenantProvider(_ id: String?, _ app: AppContext) throws -> ProviderSignInService.Provider {
        guard let id, let provider = ProviderSignInService.Provider.tenant(id, in: app) else {
            throw GatehouseError(.notFound, "This app has no provider of that id.")
        }
        return provider
    }

    /// `{id_token, nonce}` (the kinds with ID tokens; the nonce is required) or `{access_token}`.
    func tenantProof(_ body: inout Body, _ provider: ProviderSignInService.Provider) throws -> ProviderSignInService.Proof {
        if provider.settings?.kind.hasIDTokens == false {
            let token = body.required("access_token", maxLength: 1 << 20)
            try body.check()
            return .accessToken(token)
        }
        let token = body.required("id_token", maxLength: 1 << 20)
        let nonce = body.required("nonce", maxLength: 512)
        try body.check()
        return .oidc(idToken: token, nonce: nonce)
    }

    /// `identity_token` + `nonce` (+ `authorization_code`), or `firebase_id_token`.
    /// Linking takes all three, as API.md lists them: the nonce and the code (for the refresh
    /// token revoked when the account is deleted) are not optional there, and Firebase is not offered.
    func appleProof(_ body: inout Body, linking: Bool) throws -> ProviderSignInService.Proof {
        if !linking, let firebase = body.optional("firebase_id_token", maxLength: 1 << 20) {
            if body.isPresent("identity_token") { throw GatehouseError.validation("firebase_id_token", "Send identity_token or firebase_id_token, not both.") }
            return .firebase(token: firebase)
        }
        let token = body.required("identity_token", maxLength: 1 << 20)
        let nonce = linking ? body.required("nonce", maxLength: 512) : body.optional("nonce", maxLength: 512)
        let code = linking ? body.required("authorization_code", maxLength: 1024) : body.optional("authorization_code", maxLength: 1024)
        try body.check()
        return .apple(identityToken: token, nonce: nonce, authorizationCode: code)
    }

    /// Linking requires the nonce and does not offer Firebase.
    func googleProof(_ body: inout Body, linking: Bool) throws -> ProviderSignInService.Proof {
        if !linking, let firebase = body.optional("firebase_id_token", maxLength: 1 << 20) {
            if body.isPresent("id_token") { throw GatehouseError.validation("firebase_id_token", "Send id_token or firebase_id_token, not both.") }
            return .firebase(token: firebase)
        }
        let token = body.required("id_token", maxLength: 1 << 20)
        let nonce = linking ? body.required("nonce", maxLength: 512) : body.optional("nonce", maxLength: 512)
        try body.check()
        return .google(idToken: token, nonce: nonce)
    }

    // MARK: - Web flow

    func appleAuthorize(_ request: Request) throws -> HTTPResponse {
        try authorize(request, provider: { _ in .apple }, cookiePath: "/v1/auth/oauth/apple/callback")
    }

    /// `GET /v1/auth/oidc/{id}/authorize`: Apple's parameters and answers; an id the app does not
    /// define is 404 (after the app key, which names the app).
    func tenantAuthorize(_ request: Request) throws -> HTTPResponse {
        let id = request.parameters["id"] ?? ""
        return try authorize(request, provider: { try tenantProvider(id, $0) }, cookiePath: "/v1/auth/oidc/\(id)/callback")
    }

    /// Starts a web flow: the app from `app_key`, then 302 to the provider with the binding cookie,
    /// scoped to the provider's callback.
    private func authorize(
        _ request: Request, provider: (AppContext) throws -> ProviderSignInService.Provider, cookiePath: String
    ) throws -> HTTPResponse {
        let query = request.http.query
        for name in ["app_key", "redirect_uri", "state", "code_challenge", "code_challenge_method"] where query.filter({ $0.name == name }).count > 1 {
            throw GatehouseError.validation(name, "Given more than once.")
        }
        guard let key = request.http.queryValue("app_key"), !key.isEmpty else { throw GatehouseError(.missingAppKey, "Pass the app key as app_key.") }
        guard key.utf8.count <= 128, let app = try auth.directory.app(key: key) else { throw GatehouseError(.invalidAppKey, "The app_key is not a key of any active app.") }
        RequestLogContext.current?.appID = app.id.rawValue
        let provider = try provider(app)
        guard let redirectURI = request.http.queryValue("redirect_uri") else { throw GatehouseError.validation("redirect_uri", "Required.") }
        let started = try providers.startWebFlow(
            app: app, provider: provider, redirectURI: redirectURI, clientState: request.http.queryValue("state"),
            codeChallenge: request.http.queryValue("code_challenge"), codeChallengeMethod: request.http.queryValue("code_challenge_method"),
            origin: request.origin)
        var response = HTTPResponse(status: 302)
        response.headers.set("Location", started.url)
        response.headers.set("Cache-Control", "no-store")
        // Apple's form_post is a cross-site POST: the cookie must be SameSite=None to come along
        // (and so for every provider: any of them may post its answer).
        response.headers.add("Set-Cookie", "\(Self.flowCookie)=\(started.binding); HttpOnly; Secure; SameSite=None; Path=\(cookiePath); Max-Age=600")
        return response
    }

    func appleCallback(_ request: Request) throws -> HTTPResponse {
        guard let form = FormBody.parse(request.http.body) else { throw GatehouseError(.invalidFlow, "The callback is not a valid form.") }
        return try callback(request, fields: form, provider: "apple", cookiePath: "/v1/auth/oauth/apple/callback")
    }

    /// A tenant provider's callback: the answer in the query (GET) or a form (POST). An id that is
    /// not a provider id's shape has no flow; any other is looked up with the flow.
    func tenantCallback(_ request: Request) throws -> HTTPResponse {
        let id = request.parameters["id"] ?? ""
        guard AppSettings.OIDCProvider.isValidID(id), !AppSettings.OIDCProvider.reservedIDs.contains(id) else {
            throw GatehouseError(.invalidFlow, "This sign-in link is not valid any more. Start again from the app.")
        }
        let fields: [(String, String)]
        if request.http.method == "POST" {
            guard let form = FormBody.parse(request.http.body) else { throw GatehouseError(.invalidFlow, "The callback is not a valid form.") }
            fields = form
        } else {
            fields = request.http.query.map { ($0.name, $0.value) }
        }
        return try callback(request, fields: fields, provider: id, cookiePath: "/v1/auth/oidc/\(id)/callback")
    }

    /// Finishes a web flow: 303 to the app's redirect URI, the binding cookie cleared.
    private func callback(_ request: Request, fields: [(String, String)], provider: String, cookiePath: String) throws -> HTTPResponse {
        func single(_ name: String) throws -> String? {
            let values = fields.filter { $0.0 == name }.map(\.1)
            if values.count > 1 { throw GatehouseError(.invalidFlow, "The callback repeats \(name).") }
            return values.first
        }
        let callback = ProviderSignInService.Callback(
            state: try single("state"), code: try single("code"), idToken: try single("id_token"), user: try single("user"), error: try single("error"),
            binding: Cookies.parse(request.header("Cookie"))[Self.flowCookie])
        let location = try providers.finishWebFlow(callback, provider: provider, origin: request.origin)
        var response = HTTPResponse(status: 303)
        response.headers.set("Location", location)
        response.headers.set("Cache-Control", "no-store")
        response.headers.add("Set-Cookie", "\(Self.flowCookie)=; HttpOnly; Secure; SameSite=None; Path=\(cookiePath); Max-Age=0")
        return response
    }

    func exchange(_ request: Request) throws -> HTTPResponse {
        let app = try auth.app(request)
        var body = try Body(request)
        let code = body.required("login_code", maxLength: 512)
        let verifier = body.optional("code_verifier", maxLength: 512)
        try body.finish()
        return sessions.sessionResponse(app, try providers.exchange(app: app, loginCode: code, codeVerifier: verifier, origin: request.origin))
    }

    // MARK: - Linking

    func linkApple(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        var body = try Body(request)
        let proof = try appleProof(&body, linking: true)
        try body.finish()
        return identities(try providers.link(app: app, claims: claims, provider: .apple, proof: proof, origin: request.origin))
    }

    func linkGoogle(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        var body = try Body(request)
        let proof = try googleProof(&body, linking: true)
        try body.finish()
        return identities(try providers.link(app: app, claims: claims, provider: .google, proof: proof, origin: request.origin))
    }

    func linkTenantProvider(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        let provider = try tenantProvider(request.parameters["provider"], app)
        var body = try Body(request)
        let proof = try tenantProof(&body, provider)
        try body.finish()
        return identities(try providers.link(app: app, claims: claims, provider: provider, proof: proof, origin: request.origin))
    }

    /// A built-in provider, or one the app defines (or defined: an identity of a provider the app
    /// has since removed can still go).
    func unlink(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        guard let name = request.parameters["provider"],
            let provider = IdentityProvider.builtIn.first(where: { $0.rawValue == name })
                ?? (AppSettings.OIDCProvider.isValidID(name) && !AppSettings.OIDCProvider.reservedIDs.contains(name) ? IdentityProvider(rawValue: name) : nil)
        else {
            throw GatehouseError(.notFound, "No such sign-in method.")
        }
        return identities(try providers.unlink(app: app, claims: claims, provider: provider, origin: request.origin))
    }

    private func identities(_ list: [Identity]) -> HTTPResponse {
        HTTPResponse.json(["data": .array(list.map(AccountJSON.identity)), "next_cursor": .null]).noStore()
    }
}

/// `application/x-www-form-urlencoded` bodies (Apple's form_post): `+` is a space, `%XX` a byte.
enum FormBody {
    static func parse(_ body: [UInt8]) -> [(String, String)]? {
        guard let text = String(validating: body, as: UTF8.self) else { return nil }
        var fields: [(String, String)] = []
        for pair in text.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            // A `%00` makes no field of Apple's, and PostgreSQL text cannot hold it: not a valid form.
            guard let name = decode(parts[0]), let value = decode(parts.count > 1 ? parts[1] : ""),
                !name.utf8.contains(0), !value.utf8.contains(0)
            else { return nil }
            fields.append((name, value))
        }
        return fields
    }

    private static func decode(_ text: Substring) -> String? {
        text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }
}
