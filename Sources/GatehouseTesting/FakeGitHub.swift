import GatehouseCore
import GatehouseCrypto
import GatehouseHTTP
import Synchronization

/// One of a GitHub user's email addresses, with GitHub's flags.
public struct FakeGitHubEmail: Sendable {
    public var email: String
    public var primary: Bool
    public var verified: Bool

    /// Creates an address.
    public init(_ email: String, primary: Bool = false, verified: Bool = true) {
        self.email = email
        self.primary = primary
        self.verified = verified
    }
}

/// A GitHub user as the fake knows them.
public struct FakeGitHubUser: Sendable {
    /// GitHub's global numeric user id.
    public var id: Int64
    public var login: String
    public var name: String?
    /// The profile's public email (`/user`'s `email`), which GitHub does not say is verified.
    public var publicEmail: String?
    public var emails: [FakeGitHubEmail]

    /// Creates a user.
    public init(
        id: Int64 = 583231, login: String = "octocat", name: String? = "The Octocat", publicEmail: String? = nil,
        emails: [FakeGitHubEmail] = [FakeGitHubEmail("octocat@example.com", primary: true, verified: true)]
    ) {
        self.id = id
        self.login = login
        self.name = name
        self.publicEmail = publicEmail
        self.emails = emails
    }
}

/// GitHub's REST API on `127.0.0.1`: `GET /user`, `GET /user/emails` and
/// `POST /applications/{client_id}/token`. Point `GATEHOUSE_PROVIDER_URL_GITHUB` at ``baseURL``.
///
/// Like GitHub: `/user` and `/user/emails` take `Authorization: Bearer <token>` (401
/// `{"message": "Bad credentials"}` for an unknown or revoked token; `/user/emails` answers 404
/// for a token issued without the email scope); the token check takes basic authentication with
/// a client registered by ``registerApp(clientID:clientSecret:)`` (401 otherwise) and a JSON body
/// `{"access_token"}`, and answers 200 with `{id, token, app: {client_id}, user: {login, id},
/// scopes}` for a token of *that* client, 404 for any other token (one of another client too).
/// Every request must carry `Accept: application/vnd.github+json`, `X-GitHub-Api-Version:
/// 2022-11-28` and a `User-Agent`; one without is answered 400 and recorded in ``errors``.
public final class FakeGitHub: Sendable {
    /// `http://127.0.0.1:<port>`, the `GATEHOUSE_PROVIDER_URL_GITHUB`.
    public let baseURL: String
    private let http: FakeHTTPServer
    private let state: GitHubState

    /// Starts the fake.
    public init() throws {
        let state = GitHubState()
        self.state = state
        http = try FakeHTTPServer { request, recorder in GitHubRoutes(state: state, recorder: recorder).respond(request) }
        baseURL = http.baseURL
    }

    /// Stops the server.
    public func stop() { http.stop() }

    /// Lets the token check accept basic authentication with this client id and secret.
    public func registerApp(clientID: String, clientSecret: String) {
        state.apps.withLock { $0[clientID] = clientSecret }
    }

    /// An access token of `user` issued to the OAuth app `clientID` (another client id than the
    /// app's makes "a token of another GitHub app"). Without `emailScope`, `/user/emails` answers 404.
    public func issueToken(for user: FakeGitHubUser, clientID: String, emailScope: Bool = true) -> String {
        let token = "gho_" + SecureRandom.token(byteCount: 27)
        state.tokens.withLock { $0[token] = GitHubState.Grant(user: user, clientID: clientID, emailScope: emailScope) }
        return token
    }

    /// The web flow: a code for `user` authorizing the OAuth app `clientID` (registered with
    /// ``registerApp(clientID:clientSecret:)``) with the authorization request's `redirectURI` and
    /// `codeChallenge` (whose verifier the token request must then carry).
    /// `POST /login/oauth/access_token` (served here too: point `GATEHOUSE_PROVIDER_URL_GITHUB_AUTH`
    /// at ``baseURL``) redeems it once, with the client's secret and that redirect URI, into a token
    /// as ``issueToken(for:clientID:emailScope:)`` makes; otherwise GitHub's 200 with `error`.
    public func issueCode(for user: FakeGitHubUser, clientID: String, redirectURI: String, codeChallenge: String? = nil) -> String {
        let code = "gh-code-" + SecureRandom.token(byteCount: 10)
        state.codes.withLock {
            $0[code] = GitHubState.Code(
                grant: GitHubState.Grant(user: user, clientID: clientID, emailScope: true), redirectURI: redirectURI, codeChallenge: codeChallenge)
        }
        return code
    }

    /// Until called again with `nil`, requests to `path` (`/user`, `/user/emails`, or
    /// `/applications/<client_id>/token`) answer `status`, with `X-RateLimit-Remaining: 0` when
    /// `rateLimited` (GitHub's 403 for an exhausted rate limit).
    public func fail(_ path: String, status: Int?, rateLimited: Bool = false) {
        state.failing.withLock { $0[path] = status.map { ($0, rateLimited) } }
    }

    /// Revokes `token`: 401 from `/user`, 404 from the check.
    public func revoke(_ token: String) { _ = state.tokens.withLock { $0.removeValue(forKey: token) } }

    /// How many `method path` requests arrived.
    public func requestCount(_ method: String, _ path: String) -> Int { http.requestCount(method, path) }
    /// Every request received, as `"METHOD /path"`, in order.
    public var requests: [String] { http.requests }
    /// Requests the fake was not set up for, and requests without GitHub's required headers.
    public var errors: [String] { http.errors }
    /// The next `count` requests answer `status` (503 by default).
    public func failNextRequests(_ count: Int, status: Int = 503) { http.failNextRequests(count, status: status) }
    /// While `down`, every request answers 503.
    public func setDown(_ down: Bool) { http.setDown(down) }
}

final class GitHubState: Sendable {
    struct Grant: Sendable {
        var user: FakeGitHubUser
        var clientID: String
        var emailScope: Bool
    }

    let apps = Mutex<[String: String]>([:])
    struct Code: Sendable {
        var grant: Grant
        var redirectURI: String
        var codeChallenge: String?
    }

    let tokens = Mutex<[String: Grant]>([:])
    let codes = Mutex<[String: Code]>([:])
    let failing = Mutex<[String: (status: Int, rateLimited: Bool)]>([:])
}

private struct GitHubRoutes {
    let state: GitHubState
    let recorder: FakeHTTPServer.Recorder

    func respond(_ request: HTTPRequest) -> HTTPResponse? {
        // github.com's token endpoint (served here too), not the REST API: its own headers.
        if request.method == "POST", request.path == "/login/oauth/access_token" { return redeem(request) }
        guard request.headers["Accept"] == "application/vnd.github+json", request.headers["X-GitHub-Api-Version"] == "2022-11-28",
            request.headers["User-Agent"]?.isEmpty == false
        else {
            _ = recorder.fail("\(request.method) \(request.path) without GitHub's Accept, X-GitHub-Api-Version or User-Agent")
            return FakeHTTPServer.json(400, ["message": "Missing required headers"])
        }
        if let failure = state.failing.withLock({ $0[request.path] }) {
            return FakeHTTPServer.json(
                failure.status, ["message": "failing on purpose"], headers: failure.rateLimited ? [("X-RateLimit-Remaining", "0")] : [])
        }
        switch (request.method, request.path) {
        case ("GET", "/user"):
            guard let grant = bearerGrant(request) else { return badCredentials }
            let user = grant.user
            return FakeHTTPServer.json(200, [
                "login": .string(user.login), "id": .int(user.id), "type": "User",
                "name": JSON.optional(user.name), "email": JSON.optional(user.publicEmail),
            ])
        case ("GET", "/user/emails"):
            guard let grant = bearerGrant(request) else { return badCredentials }
            guard grant.emailScope else { return FakeHTTPServer.json(404, ["message": "Not Found"]) }
            return FakeHTTPServer.json(200, .array(grant.user.emails.map { email in
                ["email": .string(email.email), "primary": .bool(email.primary), "verified": .bool(email.verified), "visibility": "private"]
            }))
        case ("POST", let path) where path.hasPrefix("/applications/") && path.hasSuffix("/token"):
            return checkToken(request, clientID: String(path.dropFirst("/applications/".count).dropLast("/token".count)))
        default:
            return nil
        }
    }

    /// `POST /login/oauth/access_token`: the code once, for its client, secret and redirect URI;
    /// GitHub answers its errors with 200 and `error`.
    private func redeem(_ request: HTTPRequest) -> HTTPResponse {
        guard request.headers["Accept"] == "application/json" else { return recorder.fail("a token request without Accept: application/json") }
        guard let form = FakeHTTPServer.formFields(request.body), let clientID = form["client_id"],
            let secret = state.apps.withLock({ $0[clientID] }), form["client_secret"].map({ constantTimeEquals(Array($0.utf8), Array(secret.utf8)) }) == true
        else { return FakeHTTPServer.json(200, ["error": "incorrect_client_credentials"]) }
        guard let code = form["code"], let issued = state.codes.withLock({ $0[code] }), issued.grant.clientID == clientID,
            issued.redirectURI == form["redirect_uri"], issued.codeChallenge == form["code_verifier"].map({ Base64URL.encode(Digest.sha256(Array($0.utf8))) })
        else { return FakeHTTPServer.json(200, ["error": "bad_verification_code"]) }
        _ = state.codes.withLock { $0.removeValue(forKey: code) }
        let token = "gho_" + SecureRandom.token(byteCount: 27)
        state.tokens.withLock { $0[token] = issued.grant }
        return FakeHTTPServer.json(200, ["access_token": .string(token), "token_type": "bearer", "scope": "read:user,user:email"])
    }

    private var badCredentials: HTTPResponse { FakeHTTPServer.json(401, ["message": "Bad credentials"]) }

    private func bearerGrant(_ request: HTTPRequest) -> GitHubState.Grant? {
        guard let authorization = request.headers["Authorization"], authorization.hasPrefix("Bearer ") else { return nil }
        return state.tokens.withLock { $0[String(authorization.dropFirst(7))] }
    }

    private func checkToken(_ request: HTTPRequest, clientID: String) -> HTTPResponse {
        guard let authorization = request.headers["Authorization"], authorization.hasPrefix("Basic "),
            let decoded = Self.standardBase64Decode(String(authorization.dropFirst(6))),
            let credentials = String(validating: decoded, as: UTF8.self),
            let colon = credentials.firstIndex(of: ":"), String(credentials[..<colon]) == clientID,
            let secret = state.apps.withLock({ $0[clientID] }), constantTimeEquals(Array(credentials[credentials.index(after: colon)...].utf8), Array(secret.utf8))
        else { return badCredentials }
        guard request.headers["Content-Type"]?.hasPrefix("application/json") == true,
            let token = (try? JSON.parse(request.body))?["access_token"]?.stringValue
        else { return FakeHTTPServer.json(422, ["message": "Validation Failed"]) }
        guard let grant = state.tokens.withLock({ $0[token] }), grant.clientID == clientID else {
            return FakeHTTPServer.json(404, ["message": "Not Found"])
        }
        return FakeHTTPServer.json(200, [
            "id": 1, "token": .string(token), "scopes": grant.emailScope ? ["user:email"] : [],
            "app": ["client_id": .string(clientID), "name": "Fake app", "url": "https://example.com"],
            "user": ["login": .string(grant.user.login), "id": .int(grant.user.id)],
        ])
    }

    private static func standardBase64Decode(_ text: String) -> [UInt8]? {
        var urlSafe = String(text.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 })
        while urlSafe.hasSuffix("=") { urlSafe.removeLast() }
        return Base64URL.decode(urlSafe)
    }
}
