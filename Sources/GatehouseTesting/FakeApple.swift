import GatehouseCore
import GatehouseCrypto
import GatehouseHTTP
import GatehouseProviders
import Synchronization

/// A user as the fake Apple knows them, for codes minted by ``FakeApple/issueCode(for:clientID:redirectURI:)``.
public struct FakeAppleUser: Sendable {
    /// Apple's stable user id.
    public var sub: String
    /// The email in the identity token, if shared.
    public var email: String?
    /// Sent as the string `"true"`/`"false"`, as Apple does.
    public var emailVerified: Bool
    /// Sent as `is_private_email: "true"` when set.
    public var isPrivateEmail: Bool
    /// Put verbatim into the `nonce` claim (the web flow's nonce, or a hash the client sent Apple).
    public var nonce: String?

    /// Creates a user.
    public init(
        sub: String = "001234.0123456789abcdef0123456789abcdef.1234", email: String? = "user@example.com",
        emailVerified: Bool = true, isPrivateEmail: Bool = false, nonce: String? = nil
    ) {
        self.sub = sub
        self.email = email
        self.emailVerified = emailVerified
        self.isPrivateEmail = isPrivateEmail
        self.nonce = nonce
    }
}

/// Sign in with Apple on `127.0.0.1`: `GET /auth/keys`, `POST /auth/token`, `POST /auth/revoke`,
/// `GET /auth/authorize`, with its own RSA keys. Point `GATEHOUSE_APPLE_URL` at ``baseURL``.
///
/// `/auth/token` checks the client secret like Apple (an ES256 JWT by a key registered with
/// ``registerClient(teamID:keyID:publicKey:)``, `iss` team, `sub` client_id, `aud`
/// `https://appleid.apple.com`, unexpired), redeems each code from
/// ``issueCode(for:clientID:redirectURI:)`` once (`invalid_grant` otherwise) and answers
/// `access_token`, `token_type`, `expires_in`, `refresh_token`, `id_token`. A client secret by an
/// unregistered key id or an unknown route is a test set-up mistake: 500 and recorded in ``errors``.
public final class FakeApple: Sendable {
    /// The Apple issuer, also the client secret audience.
    public static let issuer = "https://appleid.apple.com"

    /// `http://127.0.0.1:<port>`, the `GATEHOUSE_APPLE_URL`.
    public let baseURL: String
    /// `<baseURL>/auth/keys`.
    public var keysURL: String { baseURL + "/auth/keys" }
    /// The signing keys.
    public let keys: FakeKeyRing
    private let clock: any Clock
    private let http: FakeHTTPServer
    private let state: AppleState

    /// Starts the fake. Tokens are dated by `clock`; the JWKS says `max-age=<keysMaxAge>` (none when `nil`).
    public init(clock: any Clock = SystemClock(), keysMaxAge: Int? = 3600) throws {
        let keys = try FakeKeyRing(kidPrefix: "apple-key", maxAgeSeconds: keysMaxAge)
        let state = AppleState()
        self.keys = keys
        self.clock = clock
        self.state = state
        http = try FakeHTTPServer { request, recorder in
            AppleRoutes(keys: keys, state: state, clock: clock, recorder: recorder).respond(request)
        }
        baseURL = http.baseURL
    }

    /// Stops the server.
    public func stop() { http.stop() }

    // MARK: - Set-up

    /// Lets `/auth/token` and `/auth/revoke` accept client secrets by this `.p8` public key.
    public func registerClient(teamID: String, keyID: String, publicKey: VerificationKey) {
        state.clients.withLock { $0[keyID] = (teamID, publicKey) }
    }

    /// Generates a `.p8` (P-256) key, registers it, and returns credentials that use it.
    public func makeCredentials(teamID: String = "TEAM123456", keyID: String = "KEY1234567") throws -> AppleCredentials {
        let key = try SigningKey.generate(.es256)
        registerClient(teamID: teamID, keyID: keyID, publicKey: key.verificationKey)
        return AppleCredentials(teamID: teamID, keyID: keyID, privateKeyPEM: key.pkcs8PEM())
    }

    /// A single-use authorization code (valid 5 minutes by the fake's clock) that `/auth/token`
    /// redeems for an identity token of `user` with `aud` = the `client_id` it is redeemed with.
    /// With `clientID` / `redirectURI`, the redemption must use exactly those (else `invalid_grant`).
    public func issueCode(for user: FakeAppleUser, clientID: String? = nil, redirectURI: String? = nil) -> String {
        let code = "c" + SecureRandom.token(byteCount: 16) + ".0.fake"
        let grant = AppleState.Grant(
            user: user, clientID: clientID, redirectURI: redirectURI, expiresAt: clock.nowSeconds + 300)
        state.codes.withLock { $0[code] = grant }
        return code
    }

    /// An identity token exactly like Apple's: `iss`, `aud`, `sub`, `iat`, `exp`, `auth_time`,
    /// `nonce_supported`, and when given `nonce` (verbatim), `email`, `email_verified` (pass
    /// `"true"` as Apple does, or a bool), `is_private_email`, `c_hash` (of `code`).
    /// `issuedAt` defaults to now, `expiresAt` to `issuedAt + 600`. For attack tests: `issuer`,
    /// `kid` (an unknown one signs with the current key), `signature`, `headerOverrides`, and
    /// `extraClaims` merged last (`null` removes a claim).
    public func mintIdentityToken(
        sub: String = "001234.0123456789abcdef0123456789abcdef.1234", aud: String, email: String? = "user@example.com",
        emailVerified: JSON? = "true", nonce: String? = nil, isPrivateEmail: JSON? = nil,
        issuedAt: Int64? = nil, expiresAt: Int64? = nil, code: String? = nil, issuer: String = FakeApple.issuer,
        kid: String? = nil, signature: FakeSignature = .valid, headerOverrides: [String: JSON] = [:],
        extraClaims: [String: JSON] = [:]
    ) -> String {
        let iat = issuedAt ?? clock.nowSeconds
        let claims = JSON.claims(
            [
                "iss": .string(issuer), "aud": .string(aud), "sub": .string(sub), "iat": .int(iat),
                "exp": .int(expiresAt ?? iat + 600), "auth_time": .int(iat), "nonce_supported": true,
                "nonce": nonce.map(JSON.string), "email": email.map(JSON.string),
                "email_verified": email == nil ? nil : emailVerified, "is_private_email": isPrivateEmail,
                "c_hash": code.map { .string(Self.halfHash($0)) },
            ], extra: extraClaims)
        return keys.mint(claims: claims, kid: kid, signature: signature, headerOverrides: headerOverrides)
    }

    // MARK: - Server-to-server notifications

    /// A notification JWT exactly like Apple's: signed with the fake's current key (its `kid` from
    /// the JWKS), claims `iss`, `aud`, `iat`, `exp` (`iat` + 1 day, as Apple's), `jti`, and
    /// `events`: a JSON *string* holding `{"type", "sub", "event_time"}` (milliseconds) and, for
    /// the email events, `email` and `is_private_email` (the string `"true"`, as Apple sends it).
    /// `eventTime` defaults to now by the fake's clock. For attack tests: `issuer`, `kid`,
    /// `signature`, `issuedAt`/`expiresAt`, `events` (sent instead of the string built here) and
    /// `extraClaims` merged last (`null` removes a claim).
    public func mintNotification(
        type: String, sub: String, aud: String, email: String? = nil, eventTime: Int64? = nil, issuedAt: Int64? = nil, expiresAt: Int64? = nil,
        issuer: String = FakeApple.issuer, kid: String? = nil, signature: FakeSignature = .valid, events: JSON? = nil, extraClaims: [String: JSON] = [:]
    ) -> String {
        let iat = issuedAt ?? clock.nowSeconds
        var event: [String: JSON] = ["type": .string(type), "sub": .string(sub), "event_time": .int(eventTime ?? clock.nowMillis())]
        if let email {
            event["email"] = .string(email)
            event["is_private_email"] = "true"
        }
        let claims = JSON.claims(
            [
                "iss": .string(issuer), "aud": .string(aud), "iat": .int(iat), "exp": .int(expiresAt ?? iat + 86_400),
                "jti": .string(SecureRandom.token(byteCount: 12)), "events": events ?? .string(JSON.object(event).serializedString),
            ], extra: extraClaims)
        return keys.mint(claims: claims, kid: kid, signature: signature)
    }

    /// Delivers a notification as Apple does: `POST <serverURL>/v1/apps/<appID>/apple/notifications`
    /// with `{"payload": "<JWT>"}` over real HTTP. Returns the server's answer.
    @discardableResult
    public func sendNotification(_ payload: String, to serverURL: String, appID: String) throws -> TestResponse {
        let body: JSON = ["payload": .string(payload)]
        return try TestHTTPClient.send(
            "POST", "\(serverURL)/v1/apps/\(appID)/apple/notifications", headers: [("Content-Type", "application/json"), ("User-Agent", "Apple")],
            body: body.serialized())
    }

    // MARK: - What happened

    /// The form fields of every `/auth/token` request that reached the fake, in order.
    public var tokenCalls: [[String: String]] { state.tokenCalls.withLock { $0 } }
    /// The form fields of every `/auth/revoke` request that reached the fake, in order.
    public var revokeCalls: [[String: String]] { state.revokeCalls.withLock { $0 } }
    /// The query of every `/auth/authorize` request, in order.
    public var authorizeCalls: [[String: String]] { state.authorizeCalls.withLock { $0 } }
    /// Refresh tokens handed out by `/auth/token`.
    public var issuedRefreshTokens: [String] { state.refreshTokens.withLock { $0 } }
    /// `GET /auth/keys` requests received (injected failures included).
    public var keysFetchCount: Int { http.requestCount("GET", "/auth/keys") }
    /// Set-up mistakes and unexpected requests; a test should end with this empty.
    public var errors: [String] { http.errors }

    // MARK: - Outages and rotation

    /// The next `count` requests of any kind answer `status` (503 by default).
    public func failNextRequests(_ count: Int, status: Int = 503) { http.failNextRequests(count, status: status) }
    /// While `down`, every request answers 503.
    public func setDown(_ down: Bool) { http.setDown(down) }
    /// Publishes a new signing key (new tokens use it) and returns its kid.
    @discardableResult
    public func rotateKeys(retireOld: Bool = false) throws -> String { try keys.rotate(retireOld: retireOld) }

    /// `base64url(left half of SHA-256(value))`, as OpenID Connect's `c_hash` / `at_hash`.
    static func halfHash(_ value: String) -> String {
        Base64URL.encode(Digest.sha256(value.utf8).prefix(16))
    }
}

/// The fake's mutable records, each behind its own lock.
final class AppleState: Sendable {
    struct Grant: Sendable {
        var user: FakeAppleUser
        var clientID: String?
        var redirectURI: String?
        var expiresAt: Int64
    }

    let clients = Mutex<[String: (teamID: String, key: VerificationKey)]>([:])
    let codes = Mutex<[String: Grant]>([:])
    let tokenCalls = Mutex<[[String: String]]>([])
    let revokeCalls = Mutex<[[String: String]]>([])
    let authorizeCalls = Mutex<[[String: String]]>([])
    let refreshTokens = Mutex<[String]>([])
}

/// Answers one request to the fake Apple.
private struct AppleRoutes {
    let keys: FakeKeyRing
    let state: AppleState
    let clock: any Clock
    let recorder: FakeHTTPServer.Recorder

    func respond(_ request: HTTPRequest) -> HTTPResponse? {
        switch (request.method, request.path) {
        case ("GET", "/auth/keys"): keys.jwksResponse()
        case ("POST", "/auth/token"): token(request)
        case ("POST", "/auth/revoke"): revoke(request)
        case ("GET", "/auth/authorize"): authorize(request)
        default: nil
        }
    }

    private func token(_ request: HTTPRequest) -> HTTPResponse {
        guard let fields = form(request) else { return error("invalid_request") }
        state.tokenCalls.withLock { $0.append(fields) }
        guard fields["grant_type"] == "authorization_code" else { return error("unsupported_grant_type") }
        guard let clientID = fields["client_id"], let code = fields["code"] else { return error("invalid_request") }
        if let failure = checkClientSecret(fields["client_secret"], clientID: clientID) { return failure }
        let now = clock.nowSeconds
        let grant: AppleState.Grant? = state.codes.withLock { codes in
            guard let grant = codes[code] else { return nil }
            codes[code] = nil  // single use, even when the redemption below fails
            return grant
        }
        guard let grant, now < grant.expiresAt, grant.clientID == nil || grant.clientID == clientID,
            grant.redirectURI == nil || grant.redirectURI == fields["redirect_uri"]
        else { return error("invalid_grant") }

        let accessToken = "a" + SecureRandom.token(byteCount: 16) + ".0.fake"
        let refreshToken = "r" + SecureRandom.token(byteCount: 16) + ".0.fake"
        state.refreshTokens.withLock { $0.append(refreshToken) }
        let user = grant.user
        let claims = JSON.claims(
            [
                "iss": .string(FakeApple.issuer), "aud": .string(clientID), "sub": .string(user.sub), "iat": .int(now),
                "exp": .int(now + 600), "auth_time": .int(now), "nonce_supported": true,
                "nonce": user.nonce.map(JSON.string), "email": user.email.map(JSON.string),
                "email_verified": user.email == nil ? nil : .string(user.emailVerified ? "true" : "false"),
                "is_private_email": user.isPrivateEmail ? "true" : nil, "at_hash": .string(FakeApple.halfHash(accessToken)),
            ], extra: [:])
        return FakeHTTPServer.json(200, [
            "access_token": .string(accessToken), "token_type": "Bearer", "expires_in": 3600,
            "refresh_token": .string(refreshToken), "id_token": .string(keys.mint(claims: claims)),
        ])
    }

    private func revoke(_ request: HTTPRequest) -> HTTPResponse {
        guard let fields = form(request) else { return error("invalid_request") }
        state.revokeCalls.withLock { $0.append(fields) }
        guard let clientID = fields["client_id"], fields["token"]?.isEmpty == false else { return error("invalid_request") }
        if let failure = checkClientSecret(fields["client_secret"], clientID: clientID) { return failure }
        return HTTPResponse(status: 200)
    }

    private func authorize(_ request: HTTPRequest) -> HTTPResponse {
        var query: [String: String] = [:]
        for item in request.query where query[item.name] == nil { query[item.name] = item.value }
        state.authorizeCalls.withLock { $0.append(query) }
        var headers = HTTPHeaders()
        headers.set("Content-Type", "text/html; charset=utf-8")
        return HTTPResponse(status: 200, headers: headers, body: Array("<html><body>Sign in with Apple (fake)</body></html>".utf8))
    }

    /// `nil` when the secret is good; else Apple's `invalid_client`, or a loud 500 for an unregistered key id.
    private func checkClientSecret(_ secret: String?, clientID: String) -> HTTPResponse? {
        guard let secret, let parsed = try? JWT.parse(secret), parsed.header.alg == "ES256", let kid = parsed.header.kid
        else { return error("invalid_client") }
        guard let client = state.clients.withLock({ $0[kid] }) else {
            return recorder.fail("client_secret signed with unregistered Apple key id \(kid): call registerClient first")
        }
        guard JWT.verify(parsed, with: client.key), let claims = try? JSON.parse(parsed.payload) else { return error("invalid_client") }
        let now = clock.nowSeconds
        guard claims["iss"]?.stringValue == client.teamID, claims["sub"]?.stringValue == clientID,
            claims["aud"]?.stringValue == FakeApple.issuer,
            case .int(let iat)? = claims["iat"], case .int(let exp)? = claims["exp"],
            iat <= now + 60, now < exp, exp - iat <= 15_777_000
        else { return error("invalid_client") }
        return nil
    }

    private func form(_ request: HTTPRequest) -> [String: String]? {
        guard request.headers["Content-Type"]?.lowercased().hasPrefix("application/x-www-form-urlencoded") == true else { return nil }
        return FakeHTTPServer.formFields(request.body)
    }

    private func error(_ code: String) -> HTTPResponse {
        FakeHTTPServer.json(400, ["error": .string(code)])
    }
}
