import Foundation
import GatehouseCore
import GatehouseCrypto
import GatehouseTesting
import Testing

/// Gatehouse with an app that defines one provider of every kind, each played by a fake over real
/// HTTP with its authorization codes and token endpoint: the web flow of API.md "More providers".
final class WebFlowWorld {
    static let redirect = "https://app.example.com/auth/callback"
    static let acmeClient = "acme-web", acmeSecret = "acme-secret-1"
    static let kakaoClient = "kakao-rest-key"
    static let lineChannel = "1650000001", lineSecret = "line-secret-2"
    static let msClient = "00000000-aaaa-bbbb-cccc-000000000002", msSecret = "ms-secret-3"
    static let naverClient = "naver-client", naverSecret = "naver-secret-4"
    static let githubClient = "Iv1.github-client", githubSecret = "github-secret-5"
    static let tenant = "11111111-2222-3333-4444-555555555555"
    static let verifier = "a-long-enough-code-verifier-0123456789-abcdefghijklmnop"
    static let challenge = Base64URL.encode(Digest.sha256(Array(verifier.utf8)))

    let clock = ManualClock()
    let acme: FakeOIDCProvider
    let kakao: FakeOIDCProvider
    let line: FakeOIDCProvider
    let microsoft: FakeOIDCProvider
    let naver: FakeNaver
    let github: FakeGitHub
    let server: TestServer
    let app: TestServer.CreatedApp

    init(_ kind: TestDatabaseKind) throws {
        // The generic issuer takes the secret by basic authentication only; Microsoft by post only.
        acme = try FakeOIDCProvider(.generic(path: "/realms/acme"), clock: clock, kidPrefix: "acme-key", tokenAuth: .basicOnly)
        kakao = try FakeOIDCProvider(.fixed(issuer: "https://kauth.kakao.com"), clock: clock, kidPrefix: "kakao-key")
        line = try FakeOIDCProvider(.fixed(issuer: "https://access.line.me"), clock: clock, kidPrefix: "line-key")
        microsoft = try FakeOIDCProvider(.microsoft, clock: clock, kidPrefix: "ms-key", tokenAuth: .postOnly)
        naver = try FakeNaver()
        github = try FakeGitHub()
        acme.registerClient(Self.acmeClient, secret: Self.acmeSecret)
        line.registerClient(Self.lineChannel, secret: Self.lineSecret)
        microsoft.registerClient(Self.msClient, secret: Self.msSecret)
        github.registerApp(clientID: Self.githubClient, clientSecret: Self.githubSecret)
        let urls = ["kakao": kakao.baseURL, "line": line.baseURL, "microsoft": microsoft.baseURL, "naver": naver.baseURL, "naver_auth": naver.baseURL,
                    "github": github.baseURL, "github_auth": github.baseURL]
        server = try TestServer(kind, clock: clock) {
            $0.allowPrivateOutbound = true  // the generic issuer is on 127.0.0.1
            for (kind, url) in urls { $0.providerURLs[kind] = url }
        }
        app = try server.createApp(Self.settings(acmeIssuer: acme.issuer))
    }

    static func settings(acmeIssuer: String) -> JSON {
        [
            "name": "Photos", "rate_limits": ["auth_per_minute_per_ip": 1000], "redirect_uris": [.string(redirect)],
            "sign_in_methods": ["password", "acme", "kakao", "line", "ms", "naver", "github"],
            "oidc_providers": [
                ["id": "acme", "kind": "oidc", "client_ids": [.string(acmeClient)], "client_secret": .string(acmeSecret), "issuer": .string(acmeIssuer),
                 "scopes": ["offline_access", "email"]],
                ["id": "kakao", "kind": "kakao", "client_ids": [.string(kakaoClient)], "scopes": ["account_email"]],
                ["id": "line", "kind": "line", "client_ids": [.string(lineChannel)], "client_secret": .string(lineSecret)],
                ["id": "ms", "kind": "microsoft", "client_ids": [.string(msClient)], "client_secret": .string(msSecret), "issuer": "common"],
                ["id": "naver", "kind": "naver", "client_ids": [.string(naverClient)], "client_secret": .string(naverSecret)],
                ["id": "github", "kind": "github", "client_ids": [.string(githubClient)], "client_secret": .string(githubSecret)],
            ],
        ]
    }

    func stop() {
        server.stop()
        for fake in [acme, kakao, line, microsoft] { fake.stop() }
        naver.stop()
        github.stop()
    }

    /// What the authorize call set up: the provider's URL and its query, and the binding cookie.
    struct Started {
        let location: URLComponents
        let cookie: String
        func value(_ name: String) -> String? { location.queryItems?.first { $0.name == name }?.value }
        var state: String { value("state") ?? "" }
        var nonce: String { value("nonce") ?? "" }
        var redirectURI: String { value("redirect_uri") ?? "" }
    }

    func authorize(_ id: String, appKey: String? = nil, pkce: Bool = true) throws -> TestResponse {
        var query = "app_key=\(appKey ?? app.appKey)&redirect_uri=\(Self.redirect.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)&state=page-state"
        if pkce { query += "&code_challenge=\(Self.challenge)&code_challenge_method=S256" }
        return try server.request("GET", "/v1/auth/oidc/\(id)/authorize?\(query)")
    }

    func start(_ id: String) throws -> Started {
        let response = try authorize(id)
        #expect(response.status == 302, "\(id): \(response.text)")
        let location = try #require(response.header("Location").flatMap { URLComponents(string: $0) })
        let cookie = try #require(response.header("Set-Cookie"))
        #expect(cookie.contains("Path=/v1/auth/oidc/\(id)/callback") && cookie.contains("HttpOnly") && cookie.contains("SameSite=None"))
        return Started(location: location, cookie: String(cookie.prefix { $0 != ";" }))
    }

    /// The provider sends the browser back: a GET with the query (most providers) or a form POST.
    func callback(_ id: String, _ fields: [(String, String)], cookie: String?, post: Bool = false) throws -> TestResponse {
        let encoded = fields.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)" }.joined(separator: "&")
        var headers: [(String, String)] = cookie.map { [("Cookie", $0)] } ?? []
        if post {
            headers.append(("Content-Type", "application/x-www-form-urlencoded"))
            return try server.request("POST", "/v1/auth/oidc/\(id)/callback", headers: headers, body: Array(encoded.utf8))
        }
        return try server.request("GET", "/v1/auth/oidc/\(id)/callback?\(encoded)", headers: headers)
    }

    /// The page's redirect target's query.
    func landing(_ response: TestResponse) throws -> [String: String] {
        #expect(response.status == 303, "\(response.text)")
        let target = try #require(response.header("Location").flatMap { URLComponents(string: $0) })
        #expect(target.host == "app.example.com")
        return Dictionary((target.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { a, _ in a })
    }

    func exchange(_ loginCode: String) throws -> TestResponse {
        try server.request("POST", "/v1/auth/exchange", appKey: app.appKey, json: ["login_code": .string(loginCode), "code_verifier": .string(Self.verifier)])
    }

    /// The user signing in at the provider the flow went to: a code for the flow's client,
    /// callback and nonce (and state, for Naver).
    func code(_ id: String, _ started: Started, sub: String, email: String? = nil, emailVerified: JSON? = nil) throws -> String {
        let client = started.value("client_id") ?? ""
        let (uri, nonce, challenge) = (started.redirectURI, started.nonce, started.value("code_challenge"))
        switch id {
        case "acme":
            return acme.issueCode(clientID: client, redirectURI: uri, nonce: nonce, codeChallenge: challenge, sub: sub, email: email, emailVerified: emailVerified)
        case "kakao":
            return kakao.issueCode(clientID: client, redirectURI: uri, nonce: nonce, codeChallenge: challenge, sub: sub, email: email, emailVerified: emailVerified)
        // LINE's web login signs its ID tokens with HS256 under the channel secret.
        case "line": return line.issueCode(clientID: client, redirectURI: uri, nonce: nonce, codeChallenge: challenge, sub: sub, hs256Secret: Self.lineSecret)
        case "ms": return microsoft.issueCode(clientID: client, redirectURI: uri, nonce: nonce, codeChallenge: challenge, sub: sub, tid: Self.tenant)
        case "naver":
            return naver.issueCode(for: FakeNaverMember(key: sub, email: email), clientID: client, clientSecret: Self.naverSecret, state: started.state)
        case "github":
            return github.issueCode(for: FakeGitHubUser(id: Int64(sub) ?? 1, login: "u\(sub)"), clientID: client, redirectURI: uri, codeChallenge: challenge)
        default: throw TestFailure("no provider \(id)")
        }
    }

    var fakeErrors: [String] { acme.errors + kakao.errors + line.errors + microsoft.errors + naver.errors + github.errors }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

@Suite("The web flow of the providers a tenant defines")
struct TenantWebFlowTests {
    static let kinds: [(id: String, sub: String)] = [
        ("acme", "acme-1"), ("kakao", "kakao-1"), ("line", "U-line-1"), ("ms", "ms-1"), ("naver", "naver-member-1"), ("github", "4242"),
    ]

    /// Every kind: authorize (302 to the provider's endpoint with the app's client id, the
    /// provider's callback, state and nonce), the provider's code back at the callback, a login
    /// code, the exchange (201, then 200 for the same user the next time), `amr` `ext`, the
    /// identity and the events named by the provider's id.
    @Test(arguments: TestDatabase.kinds)
    func everyKindSignsUpThenInThroughTheWebFlow(_ kind: TestDatabaseKind) throws {
        let world = try WebFlowWorld(kind)
        defer { world.stop() }
        for (id, sub) in Self.kinds {
            var userID: JSON?
            for round in 0..<2 {
                let started = try world.start(id)
                #expect(started.redirectURI == "\(TestServer.publicURL)/v1/auth/oidc/\(id)/callback", "\(id)")
                #expect(started.value("state")?.isEmpty == false && started.value("state") != "page-state", "\(id): the provider gets Gatehouse's own state")
                let code = try world.code(id, started, sub: sub)
                // Most come back with a GET; LINE here with a form POST (response_mode=form_post).
                let landing = try world.landing(try world.callback(id, [("code", code), ("state", started.state)], cookie: started.cookie, post: id == "line"))
                #expect(landing["state"] == "page-state", "\(id)")
                let loginCode = try #require(landing["login_code"], "\(id): \(landing)")
                let session = try world.exchange(loginCode)
                #expect(session.status == (round == 0 ? 201 : 200), "\(id): \(session.text)")
                let user = try #require(session.data?["user"])
                #expect(user["identities"] == [.string(id)], "\(id)")
                let access = try #require(session.data?["access_token"]?.stringValue)
                #expect(try JSON.parse(JWT.parse(access).payload)["amr"] == ["ext"], "\(id)")
                // The sessions list names the provider, as it says `google` for Google.
                let sessions = try world.server.request("GET", "/v1/me/sessions", appKey: world.app.appKey, bearer: access)
                #expect(sessions.data?.arrayValue?.first { $0["current"] == true }?["method"] == .string(id), "\(id): \(sessions.text)")
                if round == 0 { userID = user["id"] } else { #expect(user["id"] == userID, "\(id)") }
            }
            let events = try world.server.gatehouse.database.query("SELECT type, data FROM events WHERE user_id = \(userID?.stringValue ?? "")").map {
                (type: try $0.string("type"), method: (try? JSON.parse(Array((try $0.optionalString("data") ?? "").utf8)))?["method"])
            }
            #expect(events.filter { $0.type == "user.signed_in" }.count == 2, "\(id)")
            #expect(events.filter { ["user.signed_in", "user.signed_up"].contains($0.type) }.allSatisfy { $0.method == .string(id) }, "\(id): \(events)")
        }
        #expect(world.fakeErrors.isEmpty, "\(world.fakeErrors)")
    }

    /// Each kind's authorization request: the kind's endpoint and scopes, the app's client id.
    @Test
    func theAuthorizationRequestOfEachKind() throws {
        let world = try WebFlowWorld(.sqlite)
        defer { world.stop() }
        let acme = try world.start("acme")
        #expect(acme.location.path == "/realms/acme/authorize" && acme.value("client_id") == WebFlowWorld.acmeClient)
        #expect(acme.value("response_type") == "code" && acme.value("scope") == "openid email profile offline_access")
        #expect(acme.nonce.count >= 32)
        // PKCE to the provider where it takes it: the issuer lists S256; LINE, Microsoft and GitHub do.
        #expect(acme.value("code_challenge_method") == "S256" && acme.value("code_challenge")?.count == 43)
        let kakao = try world.start("kakao")
        #expect(kakao.value("scope") == "openid account_email" && kakao.value("code_challenge") == nil)
        let line = try world.start("line")
        #expect(line.value("scope") == "openid profile" && line.value("code_challenge_method") == "S256")
        let ms = try world.start("ms")
        #expect(ms.location.path == "/common/v2.0/authorize" && ms.value("client_id") == WebFlowWorld.msClient && ms.value("code_challenge") != nil)
        let naver = try world.start("naver")
        #expect(naver.location.path == "/oauth2.0/authorize" && naver.value("client_id") == WebFlowWorld.naverClient && naver.value("response_type") == "code")
        #expect(naver.value("nonce") == nil)
        let github = try world.start("github")
        #expect(github.location.path == "/login/oauth/authorize" && github.value("scope") == "read:user user:email")
        #expect(github.value("code_challenge_method") == "S256" && github.value("code_challenge") != acme.value("code_challenge"))
    }

    /// Refused: a code for another client (a token from another app's provider), a code whose ID
    /// token carries another flow's nonce, a LINE token signed with the wrong secret, a state
    /// taken to another provider's callback, a wrong cookie; each lands on the page with an error
    /// (or is `auth/invalid-flow` when there is no flow to land from), and signs no one in.
    @Test(arguments: TestDatabase.kinds)
    func whatDoesNotMatchTheFlowIsRefused(_ kind: TestDatabaseKind) throws {
        let world = try WebFlowWorld(kind)
        defer { world.stop() }
        func error(_ id: String, code: (WebFlowWorld.Started) -> String) throws -> String? {
            let started = try world.start(id)
            return try world.landing(try world.callback(id, [("code", code(started)), ("state", started.state)], cookie: started.cookie))["error"]
        }
        // A code another client got (the provider refuses it for ours).
        #expect(try error("acme") { world.acme.issueCode(clientID: "another-apps-client", redirectURI: $0.redirectURI, nonce: $0.nonce) } == "access_denied")
        // An ID token with another nonce (a code from another flow).
        #expect(try error("acme") { world.acme.issueCode(clientID: WebFlowWorld.acmeClient, redirectURI: $0.redirectURI, nonce: "other-flow") } == "access_denied")
        // LINE's HS256 under another secret.
        #expect(try error("line") {
            world.line.issueCode(clientID: WebFlowWorld.lineChannel, redirectURI: $0.redirectURI, nonce: $0.nonce, hs256Secret: "not-the-channel-secret")
        } == "access_denied")
        // A Naver code of another application's member id: Naver refuses it for our client.
        #expect(try error("naver") {
            world.naver.issueCode(for: FakeNaverMember(key: "x"), clientID: "other-naver-app", clientSecret: "s", state: $0.state)
        } == "access_denied")
        // A GitHub code for another redirect URI.
        #expect(try error("github") { _ in
            world.github.issueCode(for: FakeGitHubUser(id: 7), clientID: WebFlowWorld.githubClient, redirectURI: "https://elsewhere.example/cb")
        } == "access_denied")
        // A code issued in another flow (leaked, then injected into this one): its PKCE challenge is
        // the other flow's, so the provider refuses our verifier.
        for id in ["acme", "github", "line"] {
            let other = try world.start(id)
            let leaked = try world.code(id, other, sub: "victim")
            let mine = try world.start(id)
            #expect(try world.landing(try world.callback(id, [("code", leaked), ("state", mine.state)], cookie: mine.cookie))["error"] == "access_denied", "\(id)")
        }
        // The provider says no (the user cancelled).
        let cancelled = try world.start("kakao")
        #expect(try world.landing(try world.callback("kakao", [("error", "access_denied"), ("state", cancelled.state)], cookie: cancelled.cookie))["error"] == "access_denied")

        // A flow of one provider taken to another's callback: no flow there, and still usable at its own.
        let started = try world.start("acme")
        let code = try world.code("acme", started, sub: "acme-9")
        #expect(try world.callback("kakao", [("code", code), ("state", started.state)], cookie: started.cookie).problemCode == "auth/invalid-flow")
        // Without the browser's cookie: nothing used up.
        #expect(try world.callback("acme", [("code", code), ("state", started.state)], cookie: nil).problemCode == "auth/invalid-flow")
        #expect(try world.callback("acme", [("code", code), ("state", started.state)], cookie: "gh_flow=someone-elses").problemCode == "auth/invalid-flow")
        let landing = try world.landing(try world.callback("acme", [("code", code), ("state", started.state)], cookie: started.cookie))
        #expect(landing["login_code"] != nil)
        // Used once.
        #expect(try world.callback("acme", [("code", code), ("state", started.state)], cookie: started.cookie).problemCode == "auth/invalid-flow")
        let users = try world.server.gatehouse.database.query("SELECT COUNT(*) AS n FROM users WHERE app_id = \(world.app.id)")
        #expect(try users.first?.int64("n") == 1)
    }

    /// The start is refused as the native sign-in is: an id the app does not define (another
    /// app's included) is 404, a provider not in `sign_in_methods` is 403, a redirect URI not the
    /// app's is 400, and a provider whose token endpoint needs the secret but has none is not configured.
    @Test(arguments: TestDatabase.kinds)
    func theStartIsRefusedAsTheNativeSignInIs(_ kind: TestDatabaseKind) throws {
        let world = try WebFlowWorld(kind)
        defer { world.stop() }
        let other = try world.server.createApp([
            "name": "Other", "redirect_uris": [.string(WebFlowWorld.redirect)], "sign_in_methods": ["password", "mine"],
            "oidc_providers": [["id": "mine", "kind": "naver", "client_ids": ["other-naver"]]],
        ])
        #expect(try world.authorize("mine").status == 404)
        #expect(try world.authorize("acme", appKey: other.appKey).status == 404)
        #expect(try world.authorize("mine", appKey: other.appKey).problemCode == "auth/provider-not-configured")
        #expect(try world.server.request("PATCH", "/v1/admin/app", bearer: world.app.secretKey, json: ["sign_in_methods": ["password", "kakao"]]).status == 200)
        #expect(try world.authorize("acme").problemCode == "auth/sign-in-method-disabled")
        let query = "app_key=\(world.app.appKey)&redirect_uri=https%3A%2F%2Fevil.example%2Fcb&code_challenge=\(WebFlowWorld.challenge)&code_challenge_method=S256"
        #expect(try world.server.request("GET", "/v1/auth/oidc/kakao/authorize?\(query)").problemCode == "auth/invalid-redirect-uri")
        #expect(try world.server.request("GET", "/v1/auth/oidc/kakao/authorize?redirect_uri=x").problemCode == "app/missing-key")
        // A HEAD (a link checker) stores no flow.
        #expect(try world.server.request("HEAD", "/v1/auth/oidc/kakao/authorize?app_key=\(world.app.appKey)").status == 405)
    }

    /// A flow started before the provider was switched off lands with `access_denied`, and one
    /// whose issuer went away lands with `server_error`; nothing is signed in.
    @Test(arguments: TestDatabase.kinds)
    func aProviderSwitchedOffOrDownMidFlowLandsWithAnError(_ kind: TestDatabaseKind) throws {
        let world = try WebFlowWorld(kind)
        defer { world.stop() }
        let started = try world.start("kakao")
        let naver = try world.start("naver")
        let code = try world.code("kakao", started, sub: "k-off")
        #expect(try world.server.request("PATCH", "/v1/admin/app", bearer: world.app.secretKey, json: ["sign_in_methods": ["password", "naver"]]).status == 200)
        #expect(try world.landing(try world.callback("kakao", [("code", code), ("state", started.state)], cookie: started.cookie))["error"] == "access_denied")

        let naverCode = try world.code("naver", naver, sub: "n-down")
        world.naver.setDown(true)
        #expect(try world.landing(try world.callback("naver", [("code", naverCode), ("state", naver.state)], cookie: naver.cookie))["error"] == "server_error")
        world.naver.setDown(false)
        #expect(try world.server.gatehouse.database.query("SELECT COUNT(*) AS n FROM users WHERE app_id = \(world.app.id)").first?.int64("n") == 0)
    }

    /// The authorize (302) and both callbacks' (303) answers are as docs/openapi.json says.
    @Test
    func theAnswersAreAsTheDocumentSays() throws {
        let world = try WebFlowWorld(.sqlite)
        defer { world.stop() }
        var exchanges: [OpenAPIConformance.Exchange] = []
        for (id, post) in [("acme", false), ("line", true)] {
            let authorize = try world.authorize(id)
            exchanges.append(OpenAPIConformance.Exchange("GET", "/v1/auth/oidc/{id}/authorize", requestBody: nil, requestContentType: nil, authorize))
            let started = try world.start(id)
            let back = try world.callback(id, [("code", try world.code(id, started, sub: "doc-\(id)")), ("state", started.state)], cookie: started.cookie, post: post)
            #expect(back.status == 303)
            let body = post ? Array("code=x&state=y".utf8) : nil
            exchanges.append(OpenAPIConformance.Exchange(
                post ? "POST" : "GET", "/v1/auth/oidc/{id}/callback", requestBody: body, requestContentType: post ? "application/x-www-form-urlencoded" : nil, back))
        }
        #expect(try OpenAPIConformance.problems(document: DocumentationTests.root.appendingPathComponent("docs/openapi.json"), exchanges) == [])
    }

    /// A provider's stored secret is kept by `{"set": true}` only while its kind and issuer stay:
    /// else whoever writes the settings could send it to a token endpoint of their own.
    @Test
    func theSecretIsKeptOnlyForTheSameKindAndIssuer() throws {
        let world = try WebFlowWorld(.sqlite)
        defer { world.stop() }
        func patch(issuer: String, secret: JSON) throws -> TestResponse {
            var providers = try #require(WebFlowWorld.settings(acmeIssuer: world.acme.issuer)["oidc_providers"]?.arrayValue)
            providers[0] = ["id": "acme", "kind": "oidc", "client_ids": [.string(WebFlowWorld.acmeClient)], "client_secret": secret, "issuer": .string(issuer)]
            return try world.server.request("PATCH", "/v1/admin/app", bearer: world.app.secretKey, json: ["oidc_providers": .array(providers)])
        }
        #expect(try patch(issuer: world.acme.issuer, secret: ["set": true]).status == 200)
        let moved = try patch(issuer: "http://127.0.0.1:9/elsewhere", secret: ["set": true])
        #expect(moved.status == 400 && moved.json?["errors"]?.arrayValue?.first?["field"] == "oidc_providers[0].client_secret", "\(moved.text)")
        #expect(try patch(issuer: "http://127.0.0.1:9/elsewhere", secret: "a-new-secret").status == 200)
    }

    /// The page's PKCE binds the login code: without the verifier, or with another, no session.
    @Test
    func theLoginCodeNeedsThePagesVerifier() throws {
        let world = try WebFlowWorld(.sqlite)
        defer { world.stop() }
        let started = try world.start("github")
        let landing = try world.landing(try world.callback("github", [("code", try world.code("github", started, sub: "99")), ("state", started.state)], cookie: started.cookie))
        let loginCode = try #require(landing["login_code"])
        let wrong = try world.server.request("POST", "/v1/auth/exchange", appKey: world.app.appKey, json: ["login_code": .string(loginCode)])
        #expect(wrong.problemCode == "auth/invalid-login-code")
        #expect(try world.exchange(loginCode).problemCode == "auth/invalid-login-code")
    }
}
