import GatehouseCore
import GatehouseOutbound

/// Naver Login's profile API at one base URL (`GATEHOUSE_PROVIDER_URL_NAVER`, by default
/// `https://openapi.naver.com`): who the holder of an access token is.
///
/// Naver issues no ID token, and its API offers no way to learn which application (client id) a
/// token was issued to. What protects an app from a token another Naver application obtained is
/// that Naver's member `id` is per application: the same Naver member has another `id` in every
/// application, so such a token names an id no user of this app has.
public final class NaverClient: Sendable {
    /// Naver's real API.
    public static let defaultBaseURL = "https://openapi.naver.com"
    /// Naver's member ids are at most 64 characters (base64 since May 2021, a number before);
    /// anything longer, or with other characters, is not Naver's.
    static let maxSubjectLength = 64

    /// Naver Login's authorization server (the web flow's authorize and token endpoints).
    public static let defaultLoginURL = "https://nid.naver.com"

    /// The base URL without a trailing slash.
    public let baseURL: String
    /// The authorization server's base URL (`GATEHOUSE_PROVIDER_URL_NAVER_AUTH`), without a trailing slash.
    public let loginURL: String
    private let client: OutboundHTTPClient

    /// Creates a client for `baseURL` and `loginURL` (a trailing `/` is ignored).
    public init(baseURL: String = NaverClient.defaultBaseURL, loginURL: String = NaverClient.defaultLoginURL, client: OutboundHTTPClient) {
        self.baseURL = trimmedURL(baseURL)
        self.loginURL = trimmedURL(loginURL)
        self.client = client
    }

    /// Where the web flow sends the browser: `<login>/oauth2.0/authorize` (Naver asks for no scopes).
    public func authorizeURL(clientID: String, redirectURI: String, state: String) -> String {
        let e = PercentEncoding.encode
        return loginURL + "/oauth2.0/authorize?response_type=code&client_id=\(e(clientID))&redirect_uri=\(e(redirectURI))&state=\(e(state))"
    }

    /// Redeems a web flow's code at `POST <login>/oauth2.0/token` (`grant_type=authorization_code`,
    /// the client id and secret, the code and the flow's `state`, as Naver asks) for its access
    /// token. Naver answers a refused code with 200 and an `error`: ``ProviderError/rejected(_:)``;
    /// our credentials refused or anything unusable is ``ProviderError/unavailable(_:)``.
    public func redeem(code: String, clientID: String, clientSecret: String, state: String) throws(ProviderError) -> String {
        let response = try client.postForm(
            loginURL + "/oauth2.0/token",
            fields: [("grant_type", "authorization_code"), ("client_id", clientID), ("client_secret", clientSecret), ("code", code), ("state", state)],
            headers: [("Accept", "application/json")])
        let body = (try? JSON.parse(response.body))?.objectValue
        if response.status == 200, let token = body?["access_token"]?.stringValue, AccessTokenFormat.isPlausible(token) { return token }
        throw TokenEndpointAnswer.failure(status: response.status, error: body?["error"]?.stringValue, "Naver /oauth2.0/token")
    }

    /// The member behind `accessToken`: `GET <base>/v1/nid/me` with `Authorization: Bearer …`.
    ///
    /// Naver answers `{"resultcode": "00", "message": "success", "response": {"id", "email"?,
    /// "name"?, "nickname"?, …}}`. The subject is `response.id`. The email is returned with
    /// `emailVerified` false: it is the member's contact address, which Naver lets the member
    /// change to any address and does not say it verified, so it must never link or merge an
    /// account. The display name is `name`, else `nickname`. `audience` is put in the identity as
    /// it is (Naver cannot confirm it).
    ///
    /// A 401 or 403, a `resultcode` other than `"00"`, or a 200 whose body is not that shape (no
    /// `id`, an id that is not Naver's) throws ``ProviderError/invalidToken(_:)``; a network
    /// failure, a timeout, an oversized body, a 5xx, a 429 or any other status throws
    /// ``ProviderError/unavailable(_:)``.
    public func profile(accessToken: String, audience: String) throws(ProviderError) -> ProviderIdentity {
        guard AccessTokenFormat.isPlausible(accessToken) else { throw .invalidToken("malformed access token") }
        let response = try client.get(
            baseURL + "/v1/nid/me", headers: [("Authorization", "Bearer \(accessToken)"), ("Accept", "application/json")])
        switch response.status {
        case 200: break
        case 401, 403: throw .invalidToken("Naver /v1/nid/me answered HTTP \(response.status)")
        default: throw .unavailable("Naver /v1/nid/me answered HTTP \(response.status)")
        }
        guard let body = (try? JSON.parse(response.body))?.objectValue else {
            throw .unavailable("Naver /v1/nid/me answered a body that is not a JSON object")
        }
        guard let code = body["resultcode"]?.stringValue else { throw .unavailable("Naver /v1/nid/me answered without a resultcode") }
        guard code == "00" else { throw .invalidToken("Naver /v1/nid/me answered resultcode \(AccessTokenFormat.loggable(code))") }
        guard let profile = body["response"]?.objectValue, let id = profile["id"]?.stringValue,
            !id.isEmpty, id.utf8.count <= Self.maxSubjectLength, id.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        else { throw .invalidToken("Naver /v1/nid/me answered success without a usable id") }
        var identity = ProviderIdentity(subject: id, email: AccessTokenFormat.email(profile["email"]), emailVerified: false, audience: audience)
        identity.displayName = AccessTokenFormat.name(profile["name"]) ?? AccessTokenFormat.name(profile["nickname"])
        return identity
    }
}

/// `url` without trailing slashes.
func trimmedURL(_ url: String) -> String {
    var base = url
    while base.hasSuffix("/") { base.removeLast() }
    return base
}

/// Checks shared by the access-token clients.
enum AccessTokenFormat {
    /// The longest access token sent on: Naver's and GitHub's are far shorter.
    static let maxTokenLength = 4096

    /// Printable ASCII without spaces (RFC 6750's `b64token` and more), at most 4 KiB: anything
    /// else cannot be a token and is never put into a header.
    static func isPlausible(_ token: String) -> Bool {
        !token.isEmpty && token.utf8.count <= maxTokenLength && token.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }

    /// A provider's email as given, when it is a string that looks like one address (at most 320
    /// bytes, one `@`, no spaces or control characters); nil otherwise.
    static func email(_ value: JSON?) -> String? {
        guard let text = value?.stringValue, !text.isEmpty, text.utf8.count <= 320,
            text.utf8.allSatisfy({ $0 > 0x20 && $0 != 0x7F }), text.utf8.count(where: { $0 == UInt8(ascii: "@") }) == 1
        else { return nil }
        return text
    }

    /// A provider's name when it is a non-empty string of at most 200 bytes without control characters.
    static func name(_ value: JSON?) -> String? {
        guard let text = value?.stringValue else { return nil }
        let trimmed = text.trimmingSpaces
        guard !trimmed.isEmpty, trimmed.utf8.count <= 200, !trimmed.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else { return nil }
        return trimmed
    }

    /// Provider-supplied text shortened to 32 printable ASCII characters, for logs.
    static func loggable(_ text: String) -> String {
        String(text.unicodeScalars.prefix(32).map { $0.isASCII && $0.value >= 0x20 && $0.value < 0x7F ? Character($0) : "?" })
    }
}

extension String {
    fileprivate var trimmingSpaces: String {
        guard let first = firstIndex(where: { !$0.isWhitespace }), let last = lastIndex(where: { !$0.isWhitespace }) else { return "" }
        return String(self[first...last])
    }
}
