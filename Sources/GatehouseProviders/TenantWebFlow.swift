import Foundation
import GatehouseCore
import GatehouseCrypto
import GatehouseOutbound

/// The domain's ``TenantWebFlows``: the ID-token kinds through ``OIDCVerifier`` (endpoints from
/// the discovery document, the code redeemed at its token endpoint, the ID token verified as a
/// native one with the flow's nonce), Naver and GitHub through their clients (fixed endpoints, the
/// code's access token read as a native access token is). Errors map to ``ProviderFailure`` as
/// ``AccessTokenProfileReader``'s do. Every call is admitted under ``OIDCVerifier``'s per-app
/// bound (and, for `oidc` issuers, the bound on all tenants' issuers together).
public struct TenantWebFlow: TenantWebFlows {
    /// Told why a call to `provider` could not be made (for the log; the reason never holds a
    /// token, code or secret).
    public typealias UnavailableObserver = @Sendable (_ provider: AppSettings.OIDCProvider, _ reason: String) -> Void

    private let oidc: OIDCVerifier
    private let naver: NaverClient
    private let github: GitHubClient
    private let onUnavailable: UnavailableObserver?

    public init(oidc: OIDCVerifier, naver: NaverClient, github: GitHubClient, onUnavailable: UnavailableObserver? = nil) {
        self.oidc = oidc
        self.naver = naver
        self.github = github
        self.onUnavailable = onUnavailable
    }

    public func authorizeURL(
        app: AppID, provider: AppSettings.OIDCProvider, callbackURL: String, state: String, nonce: String, codeVerifier: String
    ) throws(ProviderFailure) -> String {
        let clientID = provider.clientIDs.first ?? ""
        let challenge = PKCE.challenge(codeVerifier)
        do {
            switch provider.kind {
            case .naver: return naver.authorizeURL(clientID: clientID, redirectURI: callbackURL, state: state)
            case .github:
                return github.authorizeURL(
                    clientID: clientID, redirectURI: callbackURL, state: state, scopes: Self.scopes(["read:user", "user:email"], provider), codeChallenge: challenge)
            case .oidc, .kakao, .line, .microsoft:
                return try oidc.admitting(app, provider) { () throws(ProviderError) in
                    try oidc.authorizeURL(
                        provider, clientID: clientID, redirectURI: callbackURL, state: state, nonce: nonce, scopes: Self.scopes(provider), codeChallenge: challenge)
                }
            }
        } catch {
            throw failure(error, provider)
        }
    }

    public func redeem(
        code: String, app: AppID, provider: AppSettings.OIDCProvider, callbackURL: String, state: String, nonce: String, codeVerifier: String
    ) throws(ProviderFailure) -> ExternalIdentity {
        let clientID = provider.clientIDs.first ?? ""
        let secret = provider.clientSecret ?? ""
        do {
            return try oidc.admitting(app, provider) { () throws(ProviderError) -> ExternalIdentity in
                switch provider.kind {
                case .naver:
                    let token = try naver.redeem(code: code, clientID: clientID, clientSecret: secret, state: state)
                    return try naver.profile(accessToken: token, audience: clientID).external
                case .github:
                    let token = try github.redeem(code: code, clientID: clientID, clientSecret: secret, redirectURI: callbackURL, codeVerifier: codeVerifier)
                    return try github.profile(accessToken: token, clientIDs: [clientID], clientSecret: secret).external
                case .oidc, .kakao, .line, .microsoft:
                    return try oidc.redeem(
                        code: code, provider: provider, clientID: clientID, redirectURI: callbackURL, nonce: nonce, codeVerifier: codeVerifier
                    ).external
                }
            }
        } catch {
            throw failure(error, provider)
        }
    }

    /// The scopes asked for: the kind's own, then the provider's `scopes` (each once).
    static func scopes(_ provider: AppSettings.OIDCProvider) -> [String] {
        let own: [String] = switch provider.kind {
        // Kakao's profile and email are consent items the app turns on at Kakao, asked for as scopes.
        case .kakao: ["openid"]
        // LINE's `email` needs LINE's approval of the channel first.
        case .line: ["openid", "profile"]
        default: ["openid", "email", "profile"]
        }
        return scopes(own, provider)
    }

    static func scopes(_ own: [String], _ provider: AppSettings.OIDCProvider) -> [String] {
        own + provider.scopes.filter { !own.contains($0) }
    }

    private func failure(_ error: ProviderError, _ provider: AppSettings.OIDCProvider) -> ProviderFailure {
        if let why = error.unreachableReason { onUnavailable?(provider, why) }
        return error.failure
    }
}

extension OIDCVerifier {
    /// The provider's authorization URL (its discovery document's `authorization_endpoint`):
    /// `response_type=code`, the client id, the callback, the scopes, `state`, `nonce`, and the
    /// PKCE challenge where the provider takes one.
    func authorizeURL(
        _ provider: AppSettings.OIDCProvider, clientID: String, redirectURI: String, state: String, nonce: String, scopes: [String], codeChallenge: String
    ) throws(ProviderError) -> String {
        let endpoints = try webEndpoints(of: provider)
        let e = PercentEncoding.encode
        var fields = [
            ("response_type", "code"), ("client_id", clientID), ("redirect_uri", redirectURI), ("scope", scopes.joined(separator: " ")),
            ("state", state), ("nonce", nonce),
        ]
        if endpoints.takesPKCE { fields += [("code_challenge", codeChallenge), ("code_challenge_method", "S256")] }
        let query = fields.map { "\($0.0)=\(e($0.1))" }.joined(separator: "&")
        return endpoints.authorization + (endpoints.authorization.contains("?") ? "&" : "?") + query
    }

    /// Redeems `code` at the provider's token endpoint (`client_secret_post` where the document
    /// lists it or the kind is Kakao's, LINE's or Microsoft's, else `client_secret_basic`; a public
    /// client sends its client id alone) and verifies the ID token it answers with `nonce`.
    /// A 400 about the code (`invalid_grant` and the like) is ``ProviderError/rejected(_:)``; our
    /// credentials refused, a 5xx, or an answer without an ID token is ``ProviderError/unavailable(_:)``.
    func redeem(
        code: String, provider: AppSettings.OIDCProvider, clientID: String, redirectURI: String, nonce: String, codeVerifier: String
    ) throws(ProviderError) -> ProviderIdentity {
        let endpoints = try webEndpoints(of: provider)
        var fields = [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI)]
        if endpoints.takesPKCE { fields.append(("code_verifier", codeVerifier)) }
        var headers = [("Accept", "application/json")]
        if let secret = provider.clientSecret, !secret.isEmpty, !endpoints.secretInBody {
            let e = PercentEncoding.encode
            headers.append(("Authorization", "Basic " + Data("\(e(clientID)):\(e(secret))".utf8).base64EncodedString()))
        } else {
            fields.append(("client_id", clientID))
            if let secret = provider.clientSecret, !secret.isEmpty { fields.append(("client_secret", secret)) }
        }
        let response = try endpoints.client.postForm(endpoints.token, fields: fields, headers: headers)
        let body = (try? JSON.parse(response.body))?.objectValue
        guard response.status == 200 else { throw TokenEndpointAnswer.failure(status: response.status, error: body?["error"]?.stringValue, "the token endpoint") }
        guard let idToken = body?["id_token"]?.stringValue, !idToken.isEmpty else { throw .unavailable("the token endpoint answered without an id_token") }
        return try verifyAdmitted(idToken, provider: provider, nonce: nonce)
    }

    /// The web flow's endpoints from the discovery document of `provider` (the issuer checked as
    /// for a verification); both must be plain `https` URLs (or `http` where the source allows
    /// it). PKCE is sent where the document lists S256, and always to LINE and Microsoft (which
    /// take it); the secret in the body where the document lists `client_secret_post`, and
    /// always to Kakao, LINE and Microsoft.
    private func webEndpoints(of provider: AppSettings.OIDCProvider) throws(ProviderError) -> (
        authorization: String, token: String, secretInBody: Bool, takesPKCE: Bool, client: OutboundHTTPClient
    ) {
        let (source, discoveryURL) = try source(of: provider)
        let document = try source.discovery.document(url: discoveryURL)
        let origin = OutboundHTTPClient.origin(discoveryURL)
        guard Self.acceptable(discoveryIssuer: document.issuer, for: provider) else {
            throw .unavailable("the discovery document of \(origin) names another issuer")
        }
        guard let authorization = document.authorizationEndpoint, Self.isEndpoint(authorization, httpsOnly: source.httpsOnly),
            let token = document.tokenEndpoint, Self.isEndpoint(token, httpsOnly: source.httpsOnly)
        else { throw .unavailable("the discovery document of \(origin) has no usable authorization_endpoint and token_endpoint") }
        let secretInBody = provider.kind != .oidc || document.takesSecretInBody
        let takesPKCE = document.takesPKCE || provider.kind == .line || provider.kind == .microsoft
        return (authorization, token, secretInBody, takesPKCE, source.client)
    }

    /// An absolute `https` (or allowed `http`) URL with a host, and no credentials, fragment,
    /// space or control character: a value safe to put in a `Location` header and to post to.
    static func isEndpoint(_ url: String, httpsOnly: Bool) -> Bool {
        guard isFetchable(url, httpsOnly: httpsOnly), url.utf8.count <= 2048, url.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }),
            let parts = URLComponents(string: url), parts.host?.isEmpty == false, parts.user == nil, parts.password == nil, parts.fragment == nil
        else { return false }
        return true
    }
}

/// How a token endpoint's refusal is read (RFC 6749 5.2): a 400 about the grant is the code's
/// fault (`rejected`: a retry will not help); the client's own credentials refused, a 5xx or any
/// other status is the provider's or our configuration's (`unavailable`).
enum TokenEndpointAnswer {
    static func failure(status: Int, error: String?, _ endpoint: String) -> ProviderError {
        let printable = error.map { String($0.prefix(64).filter { $0.isASCII && !$0.isWhitespace }) }
        if let printable, ["invalid_client", "unauthorized_client", "incorrect_client_credentials", "redirect_uri_mismatch", "server_error"].contains(printable) {
            return .unavailable("\(endpoint) answered HTTP \(status) \(printable)")
        }
        // A 200 that carried neither a token nor an error is the provider's fault, not the code's.
        if status == 400 || (status == 200 && printable != nil) { return .rejected("\(endpoint) answered \(printable ?? "HTTP \(status)")") }
        return .unavailable("\(endpoint) answered HTTP \(status)" + (printable.map { " \($0)" } ?? ""))
    }
}

/// RFC 7636's S256.
enum PKCE {
    static func challenge(_ verifier: String) -> String { Base64URL.encode(Digest.sha256(Array(verifier.utf8))) }
}

extension ProviderIdentity {
    /// The domain's identity: the same facts, the token's own (issuer, times, nonce) included.
    public var external: ExternalIdentity {
        var external = ExternalIdentity(
            subject: subject, email: email, emailVerified: emailVerified, isPrivateRelayEmail: isPrivateRelayEmail, audience: audience,
            firstName: name?.first, lastName: name?.last)
        external.displayName = displayName
        external.token = ExternalIdentity.TokenFacts(issuer: issuer, issuedAt: issuedAt, expiresAt: expiresAt, authTime: authTime, nonce: nonce)
        return external
    }
}
