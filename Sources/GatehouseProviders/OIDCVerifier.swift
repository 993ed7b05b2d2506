import GatehouseCore
import GatehouseCrypto
import GatehouseOutbound
import Synchronization

/// Verifies the ID tokens of the providers tenants define (`oidc_providers`: kinds `oidc`,
/// `kakao`, `line`, `microsoft`).
///
/// The keys come from the `jwks_uri` of the issuer's discovery document
/// (`<issuer>/.well-known/openid-configuration`), both cached per URL with the rules of
/// ``JWKSCache`` (the discovery document by ``DiscoveryCache``). A discovery document whose
/// `issuer` is not the one the provider must have is a provider failure (`unavailable`), not
/// the user's. `oidc` issuers are URLs a tenant sets: they are fetched with a client of their own
/// (the tenant address policy) into bounded caches. Every app has at most
/// ``maxInFlightPerApp`` verifications running at once, so a tenant whose issuer is slow holds
/// that many threads and no more (the rest answer `unavailable` at once).
public final class OIDCVerifier: Sendable {
    /// Microsoft's issuer for multi-tenant apps: `{tenantid}` stands for the token's `tid`.
    public static let microsoftIssuerTemplate = "https://login.microsoftonline.com/{tenantid}/v2.0"

    /// Where one group of providers' documents and keys are fetched from.
    public struct Source: Sendable {
        /// Fetches the documents and keys, and posts to the token endpoint.
        let client: OutboundHTTPClient
        let jwks: JWKSCache
        let discovery: DiscoveryCache
        /// Whether a `jwks_uri` must be `https`.
        let httpsOnly: Bool

        /// `client` fetches the documents and keys; caches hold at most `maxURLs` URLs each, and
        /// `maxKeysPerSet` keys of each key set.
        public init(client: OutboundHTTPClient, clock: any Clock, httpsOnly: Bool, maxURLs: Int = .max, maxKeysPerSet: Int = .max) {
            self.client = client
            jwks = JWKSCache(client: client, clock: clock, maxURLs: maxURLs, maxKeysPerSet: maxKeysPerSet)
            discovery = DiscoveryCache(client: client, clock: clock, maxURLs: maxURLs)
            self.httpsOnly = httpsOnly
        }
    }

    private let checks: ProviderVerifier
    private let fixedKinds: Source
    private let tenantIssuers: Source
    private let providerURLs: [String: String]
    private let inFlight = Mutex<[AppID: Int]>([:])
    /// Calls for one app running at once, past which they are refused (`unavailable`).
    let maxInFlightPerApp: Int
    /// Calls to servers tenants chose (`oidc` issuers, and the test messages of ``TestMail``)
    /// running at once, whatever their apps.
    let tenantCalls: TenantCallBudget
    var maxInFlightTenantIssuers: Int { tenantCalls.limit }

    /// `checks` supplies the claim checks shared with Apple and Google (its clock and leeway);
    /// `fixedKinds` fetches for `kakao`, `line` and `microsoft` from `providerURLs` (by kind,
    /// ``Configuration/providerURLs``); `tenantIssuers` for `oidc` issuers. `maxInFlightPerApp`:
    /// less than the threads that run provider calls, so that other apps keep some;
    /// `tenantCalls` (default: a budget of `maxInFlightPerApp`): the bound on all apps' `oidc`
    /// issuers together, shared with the other calls to servers tenants chose.
    public init(
        checks: ProviderVerifier, fixedKinds: Source, tenantIssuers: Source, providerURLs: [String: String], maxInFlightPerApp: Int,
        tenantCalls: TenantCallBudget? = nil
    ) {
        self.maxInFlightPerApp = max(1, maxInFlightPerApp)
        self.tenantCalls = tenantCalls ?? TenantCallBudget(limit: maxInFlightPerApp)
        self.checks = checks
        self.fixedKinds = fixedKinds
        self.tenantIssuers = tenantIssuers
        self.providerURLs = providerURLs
    }

    /// Verifies `token` as an ID token of `provider` (see the type's notes): the signature (RS256
    /// or ES256 by the issuer's key chosen by `kid`; for `line` also HS256 keyed with the channel
    /// secret, compared in constant time), `iss` exactly the discovery document's (Microsoft's
    /// `{tenantid}` filled with the token's `tid`), `aud` one of the client ids, `exp`/`iat`/`nbf`
    /// within the leeway, a non-empty `sub`, and a `nonce` claim equal to `nonce` (raw, as Google's).
    /// The email counts as verified only when the provider vouches for it: `email_verified` for
    /// `oidc` and `kakao`, Microsoft's `xms_edov`, never for `line`.
    public func verify(_ token: String, app: AppID, provider: AppSettings.OIDCProvider, nonce: String) throws(ProviderError) -> ProviderIdentity {
        try admitting(app, provider) { () throws(ProviderError) in try verifyAdmitted(token, provider: provider, nonce: nonce) }
    }

    /// Runs `body` (calls to `provider`'s endpoints) if `app` has fewer than ``maxInFlightPerApp``
    /// running (for an `oidc` issuer, a URL a tenant chose: a third of ``maxInFlightTenantIssuers``,
    /// at least 2), and for an `oidc` issuer if fewer than ``maxInFlightTenantIssuers`` of every
    /// app's are: so neither one app nor several apps with slow issuers of their own can hold
    /// every provider thread. Refused: `unavailable` at once.
    func admitting<T>(_ app: AppID, _ provider: AppSettings.OIDCProvider, _ body: () throws(ProviderError) -> T) throws(ProviderError) -> T {
        let tenantIssuer = provider.kind == .oidc
        // An app's own issuers get a third of the shared bound (at least 2): it takes three apps
        // whose issuers hang to hold all of it, not two.
        let perApp = tenantIssuer ? min(maxInFlightPerApp, max(2, maxInFlightTenantIssuers / 3)) : maxInFlightPerApp
        let admitted = inFlight.withLock { counts in
            guard counts[app, default: 0] < perApp, !tenantIssuer || tenantCalls.acquire() else { return false }
            counts[app, default: 0] += 1
            return true
        }
        guard admitted else { throw .unavailable("too many calls to tenants' providers at once") }
        defer {
            inFlight.withLock { counts in
                let left = counts[app, default: 1] - 1
                counts[app] = left > 0 ? left : nil
            }
            if tenantIssuer { tenantCalls.release() }
        }
        return try body()
    }

    func verifyAdmitted(_ token: String, provider: AppSettings.OIDCProvider, nonce: String) throws(ProviderError) -> ProviderIdentity {
        guard provider.kind.hasIDTokens else { throw .invalidToken("a \(provider.kind.rawValue) provider has no ID tokens") }
        let parsed: JWT.Parsed
        do {
            parsed = try JWT.parse(token)
        } catch {
            throw .invalidToken("malformed token: \(error.reason)")
        }
        let issuer: String
        switch parsed.header.alg {
        case "HS256" where provider.kind == .line:
            guard let secret = provider.clientSecret, !secret.isEmpty else { throw .invalidToken("no channel secret to check an HS256 token with") }
            let mac = Digest.hmacSHA256(key: Array(secret.utf8), data: parsed.signingInput)
            guard constantTimeEquals(mac, parsed.signature) else { throw .invalidToken("bad signature") }
            issuer = AppSettings.OIDCProvider.Kind.line.fixedIssuer!
        case SignatureAlgorithm.rs256.rawValue, SignatureAlgorithm.es256.rawValue:
            let (source, discoveryURL) = try source(of: provider)
            let document = try source.discovery.document(url: discoveryURL)
            guard Self.acceptable(discoveryIssuer: document.issuer, for: provider) else {
                throw .unavailable("the discovery document of \(OutboundHTTPClient.origin(discoveryURL)) names another issuer")
            }
            guard Self.isFetchable(document.jwksURI, httpsOnly: source.httpsOnly) else {
                throw .unavailable("the discovery document of \(OutboundHTTPClient.origin(discoveryURL)) has no usable jwks_uri")
            }
            guard let kid = parsed.header.kid, !kid.isEmpty else { throw .invalidToken("no kid in header") }
            guard let key = try source.jwks.key(url: document.jwksURI, kid: kid) else { throw .invalidToken("unknown kid \(ProviderVerifier.loggable(kid))") }
            guard JWT.verify(parsed, with: key) else { throw .invalidToken("bad signature") }
            issuer = document.issuer
        default:
            throw .invalidToken("alg \(ProviderVerifier.loggable(parsed.header.alg)) is not accepted")
        }
        guard let claims = (try? JSON.parse(parsed.payload))?.objectValue else { throw .invalidToken("claims are not a JSON object") }
        try checks.check(issuer: claims, oneOf: [try Self.expectedIssuer(issuer, claims)])
        let audience = try checks.check(audience: claims, oneOf: provider.clientIDs)
        try checks.checkTimes(claims)
        let subject = try checks.nonEmptySubject(claims)
        guard let claimed = claims["nonce"]?.stringValue else { throw .invalidToken("nonce claim missing") }
        guard constantTimeEquals(Array(claimed.utf8), Array(nonce.utf8)) else { throw .invalidToken("nonce does not match") }
        let email = claims["email"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 }
        let verified: Bool
        switch provider.kind {
        case .oidc, .kakao: verified = ProviderVerifier.flag(claims["email_verified"])
        // Microsoft sends no email_verified: its `email` may be any address the tenant typed in;
        // only `xms_edov` (the tenant's domain is verified) vouches for it.
        case .microsoft: verified = ProviderVerifier.flag(claims["xms_edov"])
        // LINE's docs do not say its email is verified: never taken as such.
        case .line, .naver, .github: verified = false
        }
        let first = claims["given_name"]?.stringValue
        let last = claims["family_name"]?.stringValue
        return ProviderVerifier.withTokenFacts(
            ProviderIdentity(
                subject: subject, email: email, emailVerified: email != nil && verified, audience: audience,
                name: first == nil && last == nil ? nil : ProviderIdentity.Name(first: first, last: last)),
            claims)
    }

    /// The source and discovery URL of a provider.
    func source(of provider: AppSettings.OIDCProvider) throws(ProviderError) -> (Source, String) {
        switch provider.kind {
        case .oidc:
            guard let issuer = provider.issuer else { throw .unavailable("no issuer configured") }
            return (tenantIssuers, Self.trimmed(issuer) + "/.well-known/openid-configuration")
        case .kakao, .line:
            let base = providerURLs[provider.kind.rawValue] ?? provider.kind.fixedIssuer!
            return (fixedKinds, Self.trimmed(base) + "/.well-known/openid-configuration")
        case .microsoft:
            let base = providerURLs["microsoft"] ?? "https://login.microsoftonline.com"
            return (fixedKinds, Self.trimmed(base) + "/\(provider.issuer ?? "common")/v2.0/.well-known/openid-configuration")
        case .naver, .github:
            throw .invalidToken("a \(provider.kind.rawValue) provider has no ID tokens")
        }
    }

    /// Whether a discovery document's `issuer` is the one `provider` must have: its own issuer
    /// (`oidc`), the fixed one (`kakao`, `line`), and for Microsoft the tenant's
    /// `https://login.microsoftonline.com/<tenant id>/v2.0`, or for `common`, `organizations` and
    /// `consumers` the `{tenantid}` template or one tenant's issuer (`consumers` names Microsoft
    /// accounts' tenant).
    static func acceptable(discoveryIssuer issuer: String, for provider: AppSettings.OIDCProvider) -> Bool {
        switch provider.kind {
        case .oidc: return issuer == provider.issuer
        case .kakao, .line: return issuer == provider.kind.fixedIssuer
        case .microsoft:
            let tenant = provider.issuer ?? "common"
            if AppSettings.OIDCProvider.isTenantGUID(tenant) { return issuer.lowercased() == "https://login.microsoftonline.com/\(tenant)/v2.0" }
            if issuer == microsoftIssuerTemplate { return true }
            let prefix = "https://login.microsoftonline.com/", suffix = "/v2.0"
            guard issuer.hasPrefix(prefix), issuer.hasSuffix(suffix), issuer.count > prefix.count + suffix.count else { return false }
            return AppSettings.OIDCProvider.isTenantGUID(String(issuer.dropFirst(prefix.count).dropLast(suffix.count)))
        case .naver, .github: return false
        }
    }

    /// The `iss` a token must carry: the discovery document's issuer, with Microsoft's
    /// `{tenantid}` replaced by the token's own `tid` (a tenant GUID).
    static func expectedIssuer(_ issuer: String, _ claims: [String: JSON]) throws(ProviderError) -> String {
        guard issuer.contains("{tenantid}") else { return issuer }
        guard let tid = claims["tid"]?.stringValue, AppSettings.OIDCProvider.isTenantGUID(tid) else { throw .invalidToken("tid missing") }
        return issuer.replacingOccurrences(of: "{tenantid}", with: tid)
    }

    static func isFetchable(_ url: String, httpsOnly: Bool) -> Bool {
        let lower = url.lowercased()
        return lower.hasPrefix("https://") || (!httpsOnly && lower.hasPrefix("http://"))
    }

    private static func trimmed(_ url: String) -> String { url.hasSuffix("/") ? String(url.dropLast()) : url }
}

/// Discovery documents (`issuer`, `jwks_uri`) cached per URL: kept for the response's
/// `Cache-Control: max-age` (1 h when absent, at most 24 h, as ``JWKSCache``); a failed fetch is
/// not repeated for 30 s (meanwhile the last good document serves, or the call is `unavailable`);
/// at most `maxURLs` URLs (a new one pushes out an arbitrary other).
public final class DiscoveryCache: Sendable {
    public struct Document: Sendable, Equatable {
        public var issuer: String
        public var jwksURI: String
        /// The web flow's endpoints, when the document names them.
        public var authorizationEndpoint: String?
        public var tokenEndpoint: String?
        /// Whether `token_endpoint_auth_methods_supported` lists `client_secret_post`.
        public var takesSecretInBody = false
        /// Whether `code_challenge_methods_supported` lists `S256` (RFC 7636).
        public var takesPKCE = false
    }

    private struct Entry: Sendable {
        var document: Document?
        var expiresAt: Int64 = 0
        var lastAttemptAt: Int64?
        var lastError: String?
    }

    static let retryMillis: Int64 = 30_000
    private let client: OutboundHTTPClient
    private let clock: any Clock
    private let maxURLs: Int
    private let entries = Mutex<[String: Entry]>([:])

    public init(client: OutboundHTTPClient, clock: any Clock, maxURLs: Int = .max) {
        self.client = client
        self.clock = clock
        self.maxURLs = max(1, maxURLs)
    }

    /// The document at `url`, fetched when not cached or expired (see the type's rules).
    public func document(url: String) throws(ProviderError) -> Document {
        let now = clock.nowMillis()
        let seen = entries.withLock { $0[url] } ?? Entry()
        if let document = seen.document, now < seen.expiresAt { return document }
        if seen.lastError != nil, let last = seen.lastAttemptAt, now >= last, now - last < Self.retryMillis {
            if let document = seen.document { return document }
            throw .unavailable("no discovery document from \(OutboundHTTPClient.origin(url)): \(seen.lastError!)")
        }
        let result = fetch(url)
        return try entries.withLock { entries throws(ProviderError) -> Document in
            var entry = entries[url] ?? Entry()
            if entries[url] == nil, entries.count >= maxURLs, let victim = entries.keys.randomElement() { entries[victim] = nil }
            entry.lastAttemptAt = now
            switch result {
            case .success(let fetched):
                entry.document = fetched.document
                entry.expiresAt = now + fetched.maxAgeSeconds * 1000
                entry.lastError = nil
                entries[url] = entry
                return fetched.document
            case .failure(let error):
                entry.lastError = error.description
                entries[url] = entry
                if let document = entry.document { return document }
                throw error
            }
        }
    }

    private func fetch(_ url: String) -> Result<(document: Document, maxAgeSeconds: Int64), ProviderError> {
        let response: OutboundResponse
        do {
            response = try client.get(url, headers: [("Accept", "application/json")])
        } catch {
            return .failure(.unavailable(error.description))
        }
        guard response.status == 200 else { return .failure(.unavailable("discovery answered HTTP \(response.status)")) }
        guard let document = try? JSON.parse(response.body), let issuer = document["issuer"]?.stringValue, !issuer.isEmpty,
            let jwksURI = document["jwks_uri"]?.stringValue, !jwksURI.isEmpty
        else { return .failure(.unavailable("discovery document without issuer and jwks_uri")) }
        var parsed = Document(issuer: issuer, jwksURI: jwksURI)
        parsed.authorizationEndpoint = document["authorization_endpoint"]?.stringValue
        parsed.tokenEndpoint = document["token_endpoint"]?.stringValue
        parsed.takesSecretInBody = document["token_endpoint_auth_methods_supported"]?.arrayValue?.contains("client_secret_post") == true
        parsed.takesPKCE = document["code_challenge_methods_supported"]?.arrayValue?.contains("S256") == true
        return .success((parsed, JWKSCache.maxAge(response.header("cache-control"))))
    }
}
