import GatehouseCore
import GatehouseCrypto
import GatehouseHTTP
import Synchronization

/// A Naver member as the fake knows them.
public struct FakeNaverMember: Sendable {
    /// The member's own key (their Naver login, which Naver never gives to applications).
    public var key: String
    /// The contact email Naver hands out (the member may set any address; Naver vouches for none).
    public var email: String?
    public var name: String?
    public var nickname: String?

    /// Creates a member.
    public init(key: String = "ada", email: String? = "ada@naver.com", name: String? = "김에이다", nickname: String? = "ada") {
        self.key = key
        self.email = email
        self.name = name
        self.nickname = nickname
    }
}

/// Naver Login's profile API on `127.0.0.1`: `GET /v1/nid/me`. Point
/// `GATEHOUSE_PROVIDER_URL_NAVER` at ``baseURL``.
///
/// Like Naver, a member has another `id` in every application (client id): ``memberID(_:clientID:)``.
/// A token from ``issueToken(for:clientID:)`` answers `{"resultcode": "00", "message": "success",
/// "response": {"id", "email", "name", "nickname"}}` with the id of the member *in the client the
/// token was issued to*; an unknown or revoked token, or a request without `Authorization: Bearer`,
/// answers 401 `{"resultcode": "024", "message": "Authentication failed"}` (Naver's own).
public final class FakeNaver: Sendable {
    /// `http://127.0.0.1:<port>`, the `GATEHOUSE_PROVIDER_URL_NAVER`.
    public let baseURL: String
    private let http: FakeHTTPServer
    private let state: NaverState

    /// Starts the fake.
    public init() throws {
        let state = NaverState()
        self.state = state
        http = try FakeHTTPServer { request, recorder in
            if request.method == "POST", request.path == "/oauth2.0/token" { return state.redeem(request) }
            guard request.method == "GET", request.path == "/v1/nid/me" else { return nil }
            guard let authorization = request.headers["Authorization"], authorization.hasPrefix("Bearer ") else {
                return FakeHTTPServer.json(401, ["resultcode": "028", "message": "Authentication header not exists"])
            }
            guard let grant = state.tokens.withLock({ $0[String(authorization.dropFirst(7))] }) else {
                return FakeHTTPServer.json(401, ["resultcode": "024", "message": "Authentication failed"])
            }
            var profile: [String: JSON] = ["id": .string(FakeNaver.memberID(grant.member, clientID: grant.clientID))]
            if let email = grant.member.email { profile["email"] = .string(email) }
            if let name = grant.member.name { profile["name"] = .string(name) }
            if let nickname = grant.member.nickname { profile["nickname"] = .string(nickname) }
            return FakeHTTPServer.json(200, ["resultcode": "00", "message": "success", "response": .object(profile)])
        }
        baseURL = http.baseURL
    }

    /// Stops the server.
    public func stop() { http.stop() }

    /// An access token of `member` issued to the application `clientID` (another client id than
    /// the app's makes "a token of another application").
    public func issueToken(for member: FakeNaverMember, clientID: String) -> String {
        let token = "AAAAN" + SecureRandom.token(byteCount: 24)
        state.tokens.withLock { $0[token] = NaverState.Grant(member: member, clientID: clientID) }
        return token
    }

    /// The web flow: a code for `member` signing in to the application `clientID` (whose secret is
    /// `clientSecret`) with the authorization request's `state`. `POST /oauth2.0/token` redeems
    /// it once, for that client, secret and state, into a token as ``issueToken(for:clientID:)``
    /// makes; anything else answers 200 with Naver's `{"error": "invalid_request", …}`
    /// (`invalid_client` for a wrong secret). Serve both URLs from this fake: point
    /// `GATEHOUSE_PROVIDER_URL_NAVER_AUTH` at ``baseURL`` too.
    public func issueCode(for member: FakeNaverMember, clientID: String, clientSecret: String, state flowState: String) -> String {
        let code = "naver-code-" + SecureRandom.token(byteCount: 12)
        state.codes.withLock { $0[code] = NaverState.Code(grant: NaverState.Grant(member: member, clientID: clientID), secret: clientSecret, state: flowState) }
        return code
    }

    /// Revokes `token` (as when it expires or the member unlinks the application): 401 from then on.
    public func revoke(_ token: String) { _ = state.tokens.withLock { $0.removeValue(forKey: token) } }

    /// The `id` Naver gives `member` in the application `clientID`: different in every application.
    public static func memberID(_ member: FakeNaverMember, clientID: String) -> String {
        Base64URL.encode(Digest.sha256(Array("\(clientID)\u{0}\(member.key)".utf8)).prefix(24))
    }

    /// Requests to `/v1/nid/me` so far.
    public var profileCalls: Int { http.requestCount("GET", "/v1/nid/me") }
    /// Requests the fake was not set up for; a test should end with this empty.
    public var errors: [String] { http.errors }
    /// The next `count` requests answer `status` (503 by default).
    public func failNextRequests(_ count: Int, status: Int = 503) { http.failNextRequests(count, status: status) }
    /// While `down`, every request answers 503.
    public func setDown(_ down: Bool) { http.setDown(down) }
}

final class NaverState: Sendable {
    struct Grant: Sendable {
        var member: FakeNaverMember
        var clientID: String
    }

    struct Code: Sendable {
        var grant: Grant
        var secret: String
        var state: String
    }

    let tokens = Mutex<[String: Grant]>([:])
    let codes = Mutex<[String: Code]>([:])

    /// `POST /oauth2.0/token`: Naver answers its errors with 200.
    func redeem(_ request: HTTPRequest) -> HTTPResponse {
        guard let form = FakeHTTPServer.formFields(request.body), form["grant_type"] == "authorization_code", let code = form["code"],
            let issued = codes.withLock({ $0[code] }), issued.grant.clientID == form["client_id"], issued.state == form["state"]
        else { return FakeHTTPServer.json(200, ["error": "invalid_request", "error_description": "no valid code"]) }
        guard form["client_secret"] == issued.secret else { return FakeHTTPServer.json(200, ["error": "invalid_client", "error_description": "bad secret"]) }
        _ = codes.withLock { $0.removeValue(forKey: code) }
        let token = "AAAAN" + SecureRandom.token(byteCount: 24)
        tokens.withLock { $0[token] = issued.grant }
        return FakeHTTPServer.json(200, ["access_token": .string(token), "refresh_token": "r", "token_type": "bearer", "expires_in": "3600"])
    }
}
