import Foundation
import GatehouseCore
import GatehouseCrypto
import GatehouseHTTP
import Synchronization

/// An OpenID Connect provider on `127.0.0.1`: a discovery document at
/// `…/.well-known/openid-configuration` and its JWKS at `/keys`, with RSA keys of its own
/// (``FakeKeyRing``). As a generic issuer its issuer is ``baseURL``; as Kakao or LINE (point
/// `GATEHOUSE_PROVIDER_URL_KAKAO`/`_LINE` at ``baseURL``) it names the real fixed issuer; as
/// Microsoft (`GATEHOUSE_PROVIDER_URL_MICROSOFT`) it answers `/<tenant>/v2.0/.well-known/…` with
/// the `{tenantid}` template for `common`/`organizations` and the tenant's own issuer for a GUID.
/// ``mintIDToken(sub:aud:nonce:email:emailVerified:tid:issuer:issuedAt:expiresAt:kid:hs256Secret:extraClaims:)``
/// mints RS256 tokens, or HS256 ones under a LINE channel secret.
///
/// The web flow: the discovery document names `<prefix>/authorize` and `<prefix>/token`.
/// ``issueCode(clientID:redirectURI:nonce:sub:email:emailVerified:tid:hs256Secret:)`` plays the user
/// signing in at the provider (the test reads `client_id`, `redirect_uri` and `nonce` from the
/// authorization URL Gatehouse sent the browser to); `POST /token` redeems a code once, for its
/// client and redirect URI, with the client's secret when one is registered
/// (``registerClient(_:secret:)``), by `client_secret_basic` or `client_secret_post` as
/// ``TokenAuth`` allows: an ID token carrying the code's nonce, or 400 `invalid_grant` /
/// 401 `invalid_client`. Any other request is answered 500 and recorded in ``errors``.
public final class FakeOIDCProvider: Sendable {
    /// Who the fake plays.
    public enum Style: Sendable {
        /// Any issuer: the issuer is ``baseURL`` (or `baseURL + path` when given).
        case generic(path: String)
        /// A provider with a fixed issuer (Kakao's, LINE's), served at the root.
        case fixed(issuer: String)
        /// Microsoft's v2.0 endpoints, per tenant.
        case microsoft
    }

    /// How the token endpoint takes the client's secret (and what the discovery document lists).
    public enum TokenAuth: Sendable {
        /// `client_secret_basic` only (listed): a secret in the body is refused.
        case basicOnly
        /// `client_secret_post` only (listed).
        case postOnly
        /// Not listed in the document (Kakao, LINE): both are taken.
        case unlisted
    }

    /// `http://127.0.0.1:<port>`.
    public let baseURL: String
    /// The signing keys.
    public let keys: FakeKeyRing
    /// The issuer a generic or fixed fake names (for Microsoft: the template).
    public let issuer: String
    private let clock: any Clock
    private let codes: FakeAuthorizationCodes

    private let http: FakeHTTPServer

    /// Starts the fake. Tokens are dated by `clock`.
    public init(
        _ style: Style = .generic(path: ""), clock: any Clock = SystemClock(), kidPrefix: String = "oidc-key", tokenAuth: TokenAuth = .unlisted
    ) throws {
        let keys = try FakeKeyRing(kidPrefix: kidPrefix, maxAgeSeconds: 3600)
        self.keys = keys
        self.clock = clock
        let box = BaseURLBox()
        let codes = FakeAuthorizationCodes()
        self.codes = codes
        http = try FakeHTTPServer { request, recorder in
            if request.method == "POST", request.path.hasSuffix("/token") {
                return codes.redeem(request, tokenAuth: tokenAuth, recorder: recorder)
            }
            guard request.method == "GET" else { return nil }
            if request.path == "/keys" { return keys.jwksResponse() }
            guard request.path.hasSuffix("/.well-known/openid-configuration") else { return nil }
            let prefix = String(request.path.dropLast("/.well-known/openid-configuration".count))
            let issuer: String
            switch style {
            case .generic(let path):
                guard prefix == path else { return nil }
                issuer = box.value + path
            case .fixed(let fixed):
                guard prefix.isEmpty else { return nil }
                issuer = fixed
            case .microsoft:
                let parts = prefix.split(separator: "/").map(String.init)
                guard parts.count == 2, parts[1] == "v2.0" else { return nil }
                issuer = ["common", "organizations"].contains(parts[0])
                    ? "https://login.microsoftonline.com/{tenantid}/v2.0" : "https://login.microsoftonline.com/\(parts[0])/v2.0"
            }
            var document: [String: JSON] = [
                "issuer": .string(issuer), "jwks_uri": .string(box.value + "/keys"), "id_token_signing_alg_values_supported": ["RS256"],
                "authorization_endpoint": .string(box.value + prefix + "/authorize"), "token_endpoint": .string(box.value + prefix + "/token"),
            ]
            if case .generic = style { document["code_challenge_methods_supported"] = ["S256"] }
            switch tokenAuth {
            case .basicOnly: document["token_endpoint_auth_methods_supported"] = ["client_secret_basic"]
            case .postOnly: document["token_endpoint_auth_methods_supported"] = ["client_secret_post"]
            case .unlisted: break
            }
            return FakeHTTPServer.json(200, .object(document))
        }
        box.set(http.baseURL)
        baseURL = http.baseURL
        switch style {
        case .generic(let path): issuer = http.baseURL + path
        case .fixed(let fixed): issuer = fixed
        case .microsoft: issuer = "https://login.microsoftonline.com/{tenantid}/v2.0"
        }
    }

    /// Stops the server.
    public func stop() { http.stop() }

    /// An ID token: `iss` (default ``issuer``, with Microsoft's `{tenantid}` filled with `tid`),
    /// `aud`, `sub`, `iat`, `exp` (default `iat + 3600`), `nonce`, and when given `email`,
    /// `email_verified` and `tid`. RS256 with the key ring (`kid` picks a key or names an unknown
    /// one), or HS256 keyed with `hs256Secret` (LINE). `extraClaims` merge last (`null` removes).
    public func mintIDToken(
        sub: String = "provider-user-1", aud: String, nonce: String?, email: String? = nil, emailVerified: JSON? = nil, tid: String? = nil,
        issuer: String? = nil, issuedAt: Int64? = nil, expiresAt: Int64? = nil, kid: String? = nil, hs256Secret: String? = nil,
        extraClaims: [String: JSON] = [:]
    ) -> String {
        let iat = issuedAt ?? clock.nowSeconds
        let iss = issuer ?? (tid.map { self.issuer.replacingOccurrences(of: "{tenantid}", with: $0) } ?? self.issuer)
        let claims = JSON.claims(
            [
                "iss": .string(iss), "aud": .string(aud), "sub": .string(sub), "iat": .int(iat), "exp": .int(expiresAt ?? iat + 3600),
                "nonce": nonce.map(JSON.string), "email": email.map(JSON.string), "email_verified": emailVerified, "tid": tid.map(JSON.string),
            ], extra: extraClaims)
        guard let hs256Secret else { return keys.mint(claims: claims, kid: kid) }
        let header: JSON = ["alg": "HS256", "typ": "JWT"]
        let input = Base64URL.encode(header.serialized()) + "." + Base64URL.encode(claims.serialized())
        return input + "." + Base64URL.encode(Digest.hmacSHA256(key: Array(hs256Secret.utf8), data: Array(input.utf8)))
    }

    /// The token endpoint redeems codes of `clientID` only with `secret` (a client not registered
    /// is a public one: its id alone).
    public func registerClient(_ clientID: String, secret: String) { codes.secrets.withLock { $0[clientID] = secret } }

    /// A code for the user `sub` signing in at the provider to `clientID`, for the authorization
    /// request's `redirectURI`, `nonce` and `code_challenge` (when it had one, the token request
    /// must carry its verifier; when not, none): its ID token (minted when redeemed) carries them, and
    /// the rest as ``mintIDToken(sub:aud:nonce:email:emailVerified:tid:issuer:issuedAt:expiresAt:kid:hs256Secret:extraClaims:)`` mints them.
    public func issueCode(
        clientID: String, redirectURI: String, nonce: String?, codeChallenge: String? = nil, sub: String = "provider-user-1", email: String? = nil,
        emailVerified: JSON? = nil, tid: String? = nil, hs256Secret: String? = nil
    ) -> String {
        let code = "code-" + SecureRandom.token(byteCount: 16)
        let idToken = mintIDToken(sub: sub, aud: clientID, nonce: nonce, email: email, emailVerified: emailVerified, tid: tid, hs256Secret: hs256Secret)
        codes.issued.withLock {
            $0[code] = FakeAuthorizationCodes.Grant(clientID: clientID, redirectURI: redirectURI, codeChallenge: codeChallenge, idToken: idToken)
        }
        return code
    }

    /// `POST …/token` requests received.
    public var tokenRequests: Int { http.requests.filter { $0.hasPrefix("POST ") && $0.hasSuffix("/token") }.count }

    /// `GET /keys` requests received.
    public var keysFetchCount: Int { http.requestCount("GET", "/keys") }
    /// Discovery requests received.
    public var discoveryFetchCount: Int { http.requests.filter { $0.hasSuffix("/.well-known/openid-configuration") }.count }
    /// Unexpected requests; a test should end with this empty.
    public var errors: [String] { http.errors }
    /// Publishes a new signing key (new tokens use it) and returns its kid.
    @discardableResult
    public func rotateKeys(retireOld: Bool = false) throws -> String { try keys.rotate(retireOld: retireOld) }
}

/// The server's own URL, known only once it listens (the handler is made before).
private final class BaseURLBox: Sendable {
    private let url = Mutex<String>("")
    var value: String { url.withLock { $0 } }
    func set(_ value: String) { url.withLock { $0 = value } }
}

/// The codes a fake provider issued, and its token endpoint.
final class FakeAuthorizationCodes: Sendable {
    struct Grant: Sendable {
        var clientID: String
        var redirectURI: String
        var codeChallenge: String?
        var idToken: String
    }

    let issued = Mutex<[String: Grant]>([:])
    let secrets = Mutex<[String: String]>([:])

    /// RFC 6749 4.1.3: the code once, for its client and redirect URI, with the client's secret.
    func redeem(_ request: HTTPRequest, tokenAuth: FakeOIDCProvider.TokenAuth, recorder: FakeHTTPServer.Recorder) -> HTTPResponse {
        guard request.headers["Content-Type"]?.hasPrefix("application/x-www-form-urlencoded") == true,
            let form = FakeHTTPServer.formFields(request.body), form["grant_type"] == "authorization_code", let code = form["code"]
        else { return recorder.fail("a token request that is not an authorization_code form") }
        // The client, from basic authentication or the body (not both).
        var clientID = form["client_id"], secret = form["client_secret"]
        if let authorization = request.headers["Authorization"] {
            guard authorization.hasPrefix("Basic "), form["client_secret"] == nil,
                let decoded = Data(base64Encoded: String(authorization.dropFirst(6))), let pair = String(data: decoded, encoding: .utf8),
                let colon = pair.firstIndex(of: ":")
            else { return FakeHTTPServer.json(401, ["error": "invalid_client"]) }
            clientID = String(pair[..<colon]).removingPercentEncoding
            secret = String(pair[pair.index(after: colon)...]).removingPercentEncoding
            if case .postOnly = tokenAuth { return FakeHTTPServer.json(401, ["error": "invalid_client"]) }
        } else if secret != nil, case .basicOnly = tokenAuth {
            return FakeHTTPServer.json(401, ["error": "invalid_client"])
        }
        guard let clientID else { return FakeHTTPServer.json(401, ["error": "invalid_client"]) }
        if let expected = secrets.withLock({ $0[clientID] }) {
            guard let secret, constantTimeEquals(Array(secret.utf8), Array(expected.utf8)) else { return FakeHTTPServer.json(401, ["error": "invalid_client"]) }
        }
        guard let grant = issued.withLock({ $0.removeValue(forKey: code) }), grant.clientID == clientID, grant.redirectURI == form["redirect_uri"],
            grant.codeChallenge == form["code_verifier"].map({ Base64URL.encode(Digest.sha256(Array($0.utf8))) })
        else {
            return FakeHTTPServer.json(400, ["error": "invalid_grant"])
        }
        return FakeHTTPServer.json(200, [
            "access_token": .string("at-" + SecureRandom.token(byteCount: 16)), "token_type": "Bearer", "expires_in": 3600, "id_token": .string(grant.idToken),
        ])
    }
}
