import GatehouseCore
import GatehouseHTTP

/// Firebase Auth's ID-token keys on `127.0.0.1` as a JWKS: `GET /jwks`. Point
/// `GATEHOUSE_FIREBASE_JWKS_URL` at ``keysURL`` and mint tokens with
/// ``mintIDToken(uid:projectID:signInProvider:providerSubject:email:emailVerified:issuer:audience:issuedAt:expiresAt:kid:signature:headerOverrides:extraClaims:)``.
/// Any other request is answered 500 and recorded in ``errors``.
public final class FakeFirebase: Sendable {
    /// `http://127.0.0.1:<port>`.
    public let baseURL: String
    /// `<baseURL>/jwks`.
    public var keysURL: String { baseURL + "/jwks" }
    /// The signing keys.
    public let keys: FakeKeyRing
    private let clock: any Clock
    private let http: FakeHTTPServer

    /// Starts the fake. Tokens are dated by `clock`; the JWKS says `max-age=<keysMaxAge>` (none when `nil`).
    public init(clock: any Clock = SystemClock(), keysMaxAge: Int? = 21_600) throws {
        let keys = try FakeKeyRing(kidPrefix: "firebase-key", maxAgeSeconds: keysMaxAge)
        self.keys = keys
        self.clock = clock
        http = try FakeHTTPServer { request, _ in
            request.method == "GET" && request.path == "/jwks" ? keys.jwksResponse() : nil
        }
        baseURL = http.baseURL
    }

    /// Stops the server.
    public func stop() { http.stop() }

    /// A Firebase ID token: `iss` `https://securetoken.google.com/<projectID>`, `aud` projectID,
    /// `sub` and `user_id` = `uid`, `iat`, `exp` (default `iat + 3600`), `auth_time`, `email`,
    /// `email_verified`, and `firebase: {sign_in_provider, identities: {<provider>: [providerSubject],
    /// "email": [email]}}`. `issuer`/`audience` override the project-derived ones; `kid`,
    /// `signature`, `headerOverrides` and `extraClaims` (merged last, `null` removes) for attack tests.
    public func mintIDToken(
        uid: String = "FirebaseUid0123456789abcdef", projectID: String, signInProvider: String = "apple.com",
        providerSubject: String? = nil, email: String? = "user@example.com", emailVerified: Bool = true,
        issuer: String? = nil, audience: String? = nil, issuedAt: Int64? = nil, expiresAt: Int64? = nil,
        kid: String? = nil, signature: FakeSignature = .valid, headerOverrides: [String: JSON] = [:],
        extraClaims: [String: JSON] = [:]
    ) -> String {
        let iat = issuedAt ?? clock.nowSeconds
        var identities: [String: JSON] = [:]
        if let providerSubject { identities[signInProvider] = [.string(providerSubject)] }
        if let email { identities["email"] = [.string(email)] }
        let claims = JSON.claims(
            [
                "iss": .string(issuer ?? "https://securetoken.google.com/\(projectID)"), "aud": .string(audience ?? projectID),
                "sub": .string(uid), "user_id": .string(uid), "iat": .int(iat), "exp": .int(expiresAt ?? iat + 3600),
                "auth_time": .int(iat), "email": email.map(JSON.string), "email_verified": email == nil ? nil : .bool(emailVerified),
                "firebase": ["sign_in_provider": .string(signInProvider), "identities": .object(identities)],
            ], extra: extraClaims)
        return keys.mint(claims: claims, kid: kid, signature: signature, headerOverrides: headerOverrides)
    }

    /// `GET /jwks` requests received (injected failures included).
    public var keysFetchCount: Int { http.requestCount("GET", "/jwks") }
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
