import GatehouseCore
import GatehouseCrypto
import GatehouseOutbound

/// Apple's Sign in with Apple REST endpoints at one base URL (`GATEHOUSE_APPLE_URL`, by default
/// `https://appleid.apple.com`): code exchange, revocation, the web authorization URL, and the
/// client secret they need.
public final class AppleClient: Sendable {
    /// The `aud` of every client secret: Apple's real issuer, whatever the base URL.
    public static let clientSecretAudience = "https://appleid.apple.com"
    /// Client secrets are valid this long (Apple allows up to six months; a short life limits a leak).
    public static let clientSecretLifetimeSeconds: Int64 = 300

    /// The base URL without a trailing slash.
    public let baseURL: String
    /// `<base>/auth/keys`, Apple's JWKS: the `appleKeysURL` for ``ProviderVerifier``.
    public var keysURL: String { baseURL + "/auth/keys" }
    private let client: OutboundHTTPClient
    private let clock: any Clock

    /// An app's Sign in with Apple key: the domain's own type (team id = the client secret's
    /// `iss`, key id = its `kid`, the `.p8` PEM — secret, never logged).
    public typealias Credentials = AppleCredentials

    /// Creates a client for `baseURL` (a trailing `/` is ignored).
    public init(baseURL: String, client: OutboundHTTPClient, clock: any Clock) {
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.baseURL = base
        self.client = client
        self.clock = clock
    }

    /// The client secret for `clientID`: an ES256 JWT with header `{alg: ES256, kid: keyID}` and
    /// claims `iss` teamID, `iat` now, `exp` now + 300, `aud` `https://appleid.apple.com`,
    /// `sub` clientID. Throws ``ProviderError/unavailable(_:)`` if the private key cannot be used
    /// (a configuration problem, not the user's).
    public func clientSecret(clientID: String, credentials: Credentials) throws(ProviderError) -> String {
        let now = clock.nowSeconds
        let claims: JSON = [
            "iss": .string(credentials.teamID),
            "iat": .int(now),
            "exp": .int(now + Self.clientSecretLifetimeSeconds),
            "aud": .string(Self.clientSecretAudience),
            "sub": .string(clientID),
        ]
        do {
            let key = try SigningKey(pem: credentials.privateKeyPEM, algorithm: .es256)
            return try JWT.sign(payload: claims.serialized(), key: key, kid: credentials.keyID)
        } catch {
            throw .unavailable("cannot sign the Apple client secret: \(error.code.rawValue)")
        }
    }

    /// Redeems an authorization code at `POST <base>/auth/token` (`grant_type=authorization_code`,
    /// `code`, `client_id`, `client_secret`, and `redirect_uri` when given — the web flow must send
    /// the one it authorized with). Returns Apple's `id_token` (still to be verified) and
    /// `refresh_token` (absent in some answers).
    ///
    /// Apple refusing the code or request (`invalid_grant`, `invalid_request`, any other 400 about
    /// the grant) throws ``ProviderError/rejected(_:)``; Apple refusing *our* credentials
    /// (`invalid_client`, `unauthorized_client`), a network failure, a 5xx or an unreadable answer
    /// throws ``ProviderError/unavailable(_:)``.
    public func exchange(
        code: String, clientID: String, redirectURI: String?, credentials: Credentials
    ) throws(ProviderError) -> (idToken: String, refreshToken: String?) {
        var fields = [
            ("grant_type", "authorization_code"), ("code", code), ("client_id", clientID),
            ("client_secret", try clientSecret(clientID: clientID, credentials: credentials)),
        ]
        if let redirectURI { fields.append(("redirect_uri", redirectURI)) }
        let response = try client.postForm(baseURL + "/auth/token", fields: fields, headers: [("Accept", "application/json")])
        let body = try? JSON.parse(response.body)
        switch response.status {
        case 200:
            guard let idToken = body?["id_token"]?.stringValue, !idToken.isEmpty else {
                throw .unavailable("Apple /auth/token answered without an id_token")
            }
            let refresh = body?["refresh_token"]?.stringValue
            return (idToken, refresh?.isEmpty == false ? refresh : nil)
        default:
            throw Self.failure(status: response.status, body: body, endpoint: "/auth/token")
        }
    }

    /// Revokes a refresh token at `POST <base>/auth/revoke` (`client_id`, `client_secret`, `token`,
    /// `token_type_hint=refresh_token`). Returns on 200. A 400 about the token throws
    /// ``ProviderError/rejected(_:)`` (retrying will not help); anything else, including Apple
    /// refusing our credentials, throws ``ProviderError/unavailable(_:)`` (retry later).
    public func revoke(refreshToken: String, clientID: String, credentials: Credentials) throws(ProviderError) {
        let fields = [
            ("client_id", clientID), ("client_secret", try clientSecret(clientID: clientID, credentials: credentials)),
            ("token", refreshToken), ("token_type_hint", "refresh_token"),
        ]
        let response = try client.postForm(baseURL + "/auth/revoke", fields: fields)
        guard response.status != 200 else { return }
        let body = try? JSON.parse(response.body)
        // A 400 that is not Apple's JSON (a proxy's page) says nothing about the token: retry.
        if response.status == 400, body?["error"]?.stringValue == nil { throw .unavailable("Apple /auth/revoke answered 400 without an error code") }
        throw Self.failure(status: response.status, body: body, endpoint: "/auth/revoke")
    }

    /// `<base>/auth/authorize?client_id=…&redirect_uri=…&response_type=code%20id_token&scope=name%20email&response_mode=form_post&state=…&nonce=…`,
    /// every value percent-encoded strictly (only `A–Z a–z 0–9 - . _ ~` left as they are).
    public func authorizeURL(servicesID: String, redirectURI: String, state: String, nonce: String) -> String {
        let e = PercentEncoding.encode
        return baseURL + "/auth/authorize?client_id=\(e(servicesID))&redirect_uri=\(e(redirectURI))"
            + "&response_type=code%20id_token&scope=name%20email&response_mode=form_post"
            + "&state=\(e(state))&nonce=\(e(nonce))"
    }

    private static func failure(status: Int, body: JSON?, endpoint: String) -> ProviderError {
        let code = body?["error"]?.stringValue
        let printable = code.map { String($0.prefix(64).filter { $0.isASCII && !$0.isWhitespace }) }
        if status == 400, let printable, printable != "invalid_client", printable != "unauthorized_client" {
            return .rejected("Apple \(endpoint) answered \(printable)")
        }
        if status == 400, printable == nil {
            return .rejected("Apple \(endpoint) answered 400")
        }
        return .unavailable("Apple \(endpoint) answered HTTP \(status)" + (printable.map { " \($0)" } ?? ""))
    }
}
