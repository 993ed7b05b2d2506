import GatehouseCore
import GatehouseHTTP

/// Google's ID-token keys on `127.0.0.1`: `GET /oauth2/v3/certs`. Point
/// `GATEHOUSE_GOOGLE_JWKS_URL` at ``keysURL`` and mint tokens with ``mintIDToken(sub:aud:email:emailVerified:nonce:givenName:familyName:issuer:issuedAt:expiresAt:kid:signature:headerOverrides:extraClaims:)``.
/// Any other request is answered 500 and recorded in ``errors``.
public final class FakeGoogle: Sendable {
    /// Google's issuer (`accounts.google.com` is also valid).
    public static let issuer = "https://accounts.google.com"

    /// `http://127.0.0.1:<port>`.
    public let baseURL: String
    /// `<baseURL>/oauth2/v3/certs`.
    public var keysURL: String { baseURL + "/oauth2/v3/certs" }
    /// The signing keys.
    public let keys: FakeKeyRing
    private let clock: any Clock
    private let http: FakeHTTPServer

    /// Starts the fake. Tokens are dated by `clock`; the JWKS says `max-age=<keysMaxAge>` (none when `nil`).
    public init(clock: any Clock = SystemClock(), keysMaxAge: Int? = 21_600) throws {
        let keys = try FakeKeyRing(kidPrefix: "google-key", maxAgeSeconds: keysMaxAge)
        self.keys = keys
        self.clock = clock
        http = try FakeHTTPServer { request, _ in
            request.method == "GET" && request.path == "/oauth2/v3/certs" ? keys.jwksResponse() : nil
        }
        baseURL = http.baseURL
    }

    /// Stops the server.
    public func stop() { http.stop() }

    /// A Google ID token: `iss`, `azp` and `aud`, `sub`, `iat`, `exp` (default `iat + 3600`),
    /// and when given `email`, `email_verified` (a bool, as Google sends it), `nonce`, `given_name`,
    /// `family_name`, `name`. For attack tests: `kid`, `signature`, `headerOverrides`, and
    /// `extraClaims` merged last (`null` removes a claim).
    public func mintIDToken(
        sub: String = "109876543210987654321", aud: String, email: String? = "user@gmail.com", emailVerified: JSON? = true,
        nonce: String? = nil, givenName: String? = nil, familyName: String? = nil, issuer: String = FakeGoogle.issuer,
        issuedAt: Int64? = nil, expiresAt: Int64? = nil, kid: String? = nil, signature: FakeSignature = .valid,
        headerOverrides: [String: JSON] = [:], extraClaims: [String: JSON] = [:]
    ) -> String {
        let iat = issuedAt ?? clock.nowSeconds
        let fullName = [givenName, familyName].compactMap { $0 }.joined(separator: " ")
        let claims = JSON.claims(
            [
                "iss": .string(issuer), "azp": .string(aud), "aud": .string(aud), "sub": .string(sub), "iat": .int(iat),
                "exp": .int(expiresAt ?? iat + 3600), "email": email.map(JSON.string),
                "email_verified": email == nil ? nil : emailVerified, "nonce": nonce.map(JSON.string),
                "given_name": givenName.map(JSON.string), "family_name": familyName.map(JSON.string),
                "name": fullName.isEmpty ? nil : .string(fullName),
            ], extra: extraClaims)
        return keys.mint(claims: claims, kid: kid, signature: signature, headerOverrides: headerOverrides)
    }

    /// `GET /oauth2/v3/certs` requests received (injected failures included).
    public var keysFetchCount: Int { http.requestCount("GET", "/oauth2/v3/certs") }
    /// Unexpected requests; a test should end with this empty.
    public var errors: [String] { http.errors }
    /// The next `count` requests answer `status` (503 by default).
    public func failNextRequests(_ count: Int, status: Int = 503) { http.failNextRequests(count, status: status) }
    /// While `down`, every request answers 503.
    public func setDown(_ down: Bool) { http.setDown(down) }
    /// Publishes a new signing key (new tokens use it) and returns its kid.
    @discardableResult
    public func rotateKeys(retireOld: Bool = false) throws -> String { try keys.rotate(retireOld: retireOld) }
}
