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
/// mints RS256 tokens, or HS256 ones under a LINE channel secret. Any other request is answered
/// 500 and recorded in ``errors``.
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

    /// `http://127.0.0.1:<port>`.
    public let baseURL: String
    /// The signing keys.
    public let keys: FakeKeyRing
    /// The issuer a generic or fixed fake names (for Microsoft: the template).
    public let issuer: String
    private let clock: any Clock

    private let http: FakeHTTPServer

    /// Starts the fake. Tokens are dated by `clock`.
    public init(_ style: Style = .generic(path: ""), clock: any Clock = SystemClock(), kidPrefix: String = "oidc-key") throws {
        let keys = try FakeKeyRing(kidPrefix: kidPrefix, maxAgeSeconds: 3600)
        self.keys = keys
        self.clock = clock
        let box = BaseURLBox()
        http = try FakeHTTPServer { request, _ in
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
            return FakeHTTPServer.json(200, ["issuer": .string(issuer), "jwks_uri": .string(box.value + "/keys"), "id_token_signing_alg_values_supported": ["RS256"]])
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
