import GatehouseCore
import GatehouseCrypto
import GatehouseOutbound

/// GitHub's REST API at one base URL (`GATEHOUSE_PROVIDER_URL_GITHUB`, by default
/// `https://api.github.com`): who the holder of an OAuth access token is, and whether the token
/// belongs to the app's own OAuth app.
///
/// GitHub issues no ID token and its user ids are global: without a check, a token that any
/// other GitHub app obtained from a user would sign that user in here. So every token is first
/// checked with GitHub's "check a token" (`POST /applications/{client_id}/token`, basic
/// authentication with the client id and secret), which answers only for tokens of that client.
public final class GitHubClient: Sendable {
    /// GitHub's real API.
    public static let defaultBaseURL = "https://api.github.com"
    /// The REST API version every request asks for.
    public static let apiVersion = "2022-11-28"

    /// GitHub's site, where the web flow's authorize and token endpoints are.
    public static let defaultLoginURL = "https://github.com"

    /// The base URL without a trailing slash.
    public let baseURL: String
    /// The site's base URL (`GATEHOUSE_PROVIDER_URL_GITHUB_AUTH`), without a trailing slash.
    public let loginURL: String
    private let client: OutboundHTTPClient

    /// Creates a client for `baseURL` and `loginURL` (a trailing `/` is ignored).
    public init(baseURL: String = GitHubClient.defaultBaseURL, loginURL: String = GitHubClient.defaultLoginURL, client: OutboundHTTPClient) {
        self.baseURL = trimmedURL(baseURL)
        self.loginURL = trimmedURL(loginURL)
        self.client = client
    }

    /// Where the web flow sends the browser: `<site>/login/oauth/authorize` with the scopes and
    /// the PKCE challenge (S256), which GitHub binds the code to.
    public func authorizeURL(clientID: String, redirectURI: String, state: String, scopes: [String], codeChallenge: String) -> String {
        let e = PercentEncoding.encode
        return loginURL + "/login/oauth/authorize?client_id=\(e(clientID))&redirect_uri=\(e(redirectURI))"
            + "&scope=\(e(scopes.joined(separator: " ")))&state=\(e(state))&code_challenge=\(e(codeChallenge))&code_challenge_method=S256"
    }

    /// Redeems a web flow's code at `POST <site>/login/oauth/access_token` (client id and secret,
    /// code, callback, PKCE verifier) for its access token. GitHub answers a refused code with 200 and an `error`
    /// (`bad_verification_code`): ``ProviderError/rejected(_:)``; our credentials or callback
    /// refused, or anything unusable, is ``ProviderError/unavailable(_:)``.
    public func redeem(code: String, clientID: String, clientSecret: String, redirectURI: String, codeVerifier: String) throws(ProviderError) -> String {
        let response = try client.postForm(
            loginURL + "/login/oauth/access_token",
            fields: [
                ("client_id", clientID), ("client_secret", clientSecret), ("code", code), ("redirect_uri", redirectURI), ("code_verifier", codeVerifier),
            ],
            headers: [("Accept", "application/json")])
        let body = (try? JSON.parse(response.body))?.objectValue
        if response.status == 200, let token = body?["access_token"]?.stringValue, AccessTokenFormat.isPlausible(token) { return token }
        throw TokenEndpointAnswer.failure(status: response.status, error: body?["error"]?.stringValue, "GitHub /login/oauth/access_token")
    }

    /// The user behind `accessToken`, once the token is known to belong to one of `clientIDs`.
    ///
    /// 1. `POST <base>/applications/{client_id}/token` `{"access_token"}` with `clientSecret`, for
    ///    each client id in turn until one answers 200 (that id is the identity's `audience`).
    ///    A 404 means "not a token of this client". Every client answering 404 throws
    ///    ``ProviderError/invalidToken(_:)`` (a token of another app, or no token at all).
    /// 2. `GET <base>/user`: the subject is the numeric `id` (as a decimal string; it must be the
    ///    user the check named), the display name `name`, else `login`.
    /// 3. `GET <base>/user/emails`: the email is the one marked both `primary` and `verified`;
    ///    an unverified address is never taken, and no email is given when the primary one is
    ///    unverified or the token may not read emails (403/404: no `user:email` scope).
    ///
    /// Every request sends `Accept: application/vnd.github+json` and
    /// `X-GitHub-Api-Version: 2022-11-28` (the client's `User-Agent` is `Gatehouse`). A 401 from
    /// `/user` or `/user/emails` is an invalid token. A network failure, a timeout, an oversized or
    /// unreadable body, a 5xx, a rate limit (429, or 403 with `x-ratelimit-remaining: 0`), or
    /// GitHub refusing our client credentials (401/403 from the check, or 422) throws
    /// ``ProviderError/unavailable(_:)``.
    public func profile(accessToken: String, clientIDs: [String], clientSecret: String) throws(ProviderError) -> ProviderIdentity {
        guard AccessTokenFormat.isPlausible(accessToken) else { throw .invalidToken("malformed access token") }
        guard !clientSecret.isEmpty else { throw .unavailable("no GitHub client secret to check the token's app with") }
        let (audience, checkedUserID) = try checkedClient(accessToken: accessToken, clientIDs: clientIDs, clientSecret: clientSecret)
        let user = try self.user(accessToken: accessToken)
        if let checkedUserID, checkedUserID != user.id {
            throw .invalidToken("GitHub /user names another user than the token check")
        }
        let email = try primaryVerifiedEmail(accessToken: accessToken)
        var identity = ProviderIdentity(subject: String(user.id), email: email, emailVerified: email != nil, audience: audience)
        identity.displayName = user.name
        return identity
    }

    // MARK: - The three calls

    /// The first of `clientIDs` the token belongs to, and the user id the check names (nil when
    /// its answer has none).
    private func checkedClient(accessToken: String, clientIDs: [String], clientSecret: String) throws(ProviderError) -> (String, Int64?) {
        var seen: Set<String> = []
        var failure: ProviderError?
        for clientID in clientIDs where !clientID.isEmpty && seen.insert(clientID).inserted {
            let response: OutboundResponse
            do {
                response = try client.post(
                    baseURL + "/applications/\(PercentEncoding.encode(clientID))/token",
                    body: JSON.object(["access_token": .string(accessToken)]).serialized(),
                    headers: headers(authorization: "Basic " + Self.standardBase64(Array("\(clientID):\(clientSecret)".utf8)))
                        + [("Content-Type", "application/json")])
            } catch {
                failure = error
                continue
            }
            switch response.status {
            case 200:
                let body = (try? JSON.parse(response.body))?.objectValue
                guard let body else { throw .unavailable("GitHub token check answered a body that is not a JSON object") }
                // GitHub answers for the client in the path; an answer naming another is not one to trust.
                if let named = body["app"]?["client_id"]?.stringValue, named != clientID {
                    throw .invalidToken("GitHub token check named another client")
                }
                return (clientID, Self.positiveInt(body["user"]?["id"]))
            case 404:
                continue
            default:
                // 401/403: our client id or secret is refused; 422: "validation failed, or the endpoint has been spammed".
                failure = .unavailable("GitHub token check answered HTTP \(response.status)")
            }
        }
        throw failure ?? .invalidToken(seen.isEmpty ? "no GitHub client id to check the token with" : "the token belongs to no client of this app")
    }

    private func user(accessToken: String) throws(ProviderError) -> (id: Int64, name: String?) {
        let response = try client.get(baseURL + "/user", headers: headers(authorization: "Bearer \(accessToken)"))
        guard response.status == 200 else { throw Self.failure(response, endpoint: "/user") }
        guard let body = (try? JSON.parse(response.body))?.objectValue else {
            throw .unavailable("GitHub /user answered a body that is not a JSON object")
        }
        guard let id = Self.positiveInt(body["id"]) else { throw .unavailable("GitHub /user answered without a numeric id") }
        return (id, AccessTokenFormat.name(body["name"]) ?? AccessTokenFormat.name(body["login"]))
    }

    private func primaryVerifiedEmail(accessToken: String) throws(ProviderError) -> String? {
        let response = try client.get(baseURL + "/user/emails", headers: headers(authorization: "Bearer \(accessToken)"))
        switch response.status {
        case 200: break
        case 403 where !Self.isRateLimited(response), 404: return nil  // the token may not read emails
        default: throw Self.failure(response, endpoint: "/user/emails")
        }
        guard let list = (try? JSON.parse(response.body))?.arrayValue else {
            throw .unavailable("GitHub /user/emails answered a body that is not a JSON array")
        }
        let primary = list.first { $0["primary"] == .bool(true) && $0["verified"] == .bool(true) }
        return AccessTokenFormat.email(primary?["email"])
    }

    // MARK: - Helpers

    private func headers(authorization: String) -> [(String, String)] {
        [("Authorization", authorization), ("Accept", "application/vnd.github+json"), ("X-GitHub-Api-Version", Self.apiVersion)]
    }

    private static func failure(_ response: OutboundResponse, endpoint: String) -> ProviderError {
        if response.status == 401 { return .invalidToken("GitHub \(endpoint) answered HTTP 401") }
        let limited = isRateLimited(response) ? " (rate limited)" : ""
        return .unavailable("GitHub \(endpoint) answered HTTP \(response.status)\(limited)")
    }

    private static func isRateLimited(_ response: OutboundResponse) -> Bool {
        response.status == 429 || (response.status == 403 && response.header("x-ratelimit-remaining") == "0")
    }

    private static func positiveInt(_ value: JSON?) -> Int64? {
        if case .int(let number)? = value, number > 0 { number } else { nil }
    }

    /// Standard base64 with padding (RFC 4648 §4), as HTTP basic authentication wants it: the
    /// url-safe encoding with its two symbols swapped back and the padding restored.
    static func standardBase64(_ bytes: [UInt8]) -> String {
        let urlSafe = Base64URL.encode(bytes)
        let swapped = String(urlSafe.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
        return swapped + String(repeating: "=", count: (4 - swapped.count % 4) % 4)
    }
}
