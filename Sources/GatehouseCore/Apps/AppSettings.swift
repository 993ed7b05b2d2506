import Foundation
import GatehouseCrypto

/// Everything an app (tenant) configures: the same JSON in `PATCH /v1/admin/app`, in
/// `POST /v1/admin/apps` and in a file under `Tenants/`. Secrets are held in clear in memory only;
/// they are sealed with the master key when stored and shown to admins as `{"set": true}`.
public struct AppSettings: Sendable, Equatable {
    public var name: String
    public var allowSignup = true
    public var signInMethods: [SignInMethod] = SignInMethod.defaults
    /// The ids of ``oidcProviders`` that `sign_in_methods` names: the tenant's providers it offers.
    public var signInProviders: [String] = []
    public var requireVerifiedEmail = false
    public var recentLoginSeconds: Int64 = 300
    public var accessTokenTTLSeconds: Int64 = 900
    public var refreshTokenTTLSeconds: Int64 = 30 * 86400
    /// A session not refreshed for this long cannot be refreshed any more; nil: no idle timeout.
    public var refreshTokenIdleSeconds: Int64?
    public var deletionGraceDays: Int64 = 0
    /// `POST /v1/auth/anonymous` may make accounts with no sign-in method (upgraded in place later).
    public var allowAnonymous = false
    /// An anonymous account not seen (no sign-in, no refresh) for this many days is erased.
    public var anonymousTTLDays: Int64 = 30
    public var emailCollision = "reject"
    public var passwordMinLength: Int64 = 8
    /// Whether `GET /v1/admin/users/export?include_hashes=true` may put the users' password
    /// hashes in the export (`allow_hash_export`); off, it is 403 `admin/hash-export-disabled`.
    public var allowHashExport = false
    public var allowedOrigins: [String] = []
    public var redirectURIs: [String] = []
    public var refreshCookie = RefreshCookie.off
    /// PKCE on the Apple web flow: `authorize` must carry a `code_challenge`. Enforced whatever
    /// this says for a redirect URI that is not `https` (see ``requiresPKCE(redirectURI:)``).
    public var requirePKCE = true
    /// The algorithm of the app's signing keys (an extension of API.md's list: `RS256` default, `ES256`).
    public var signingAlgorithm: SignatureAlgorithm = .rs256
    public var files = Files()
    public var rateLimits = RateLimits()
    public var apple = Apple()
    public var google = Google()
    public var firebase = Firebase()
    /// Providers the tenant defines (`oidc_providers`).
    public var oidcProviders: [OIDCProvider] = []
    public var email = Email()
    public var webhooks: [Webhook] = []
    /// Second factors: the policy and the factors users may enrol.
    public var mfa = MFA()
    /// Passkeys' relying party (null: passkeys are off).
    public var passkeys: Passkeys?

    /// Where token responses put the refresh token (`refresh_cookie`: `false`, `true` or `"only"`).
    public enum RefreshCookie: Sendable, Equatable {
        /// In the body only.
        case off
        /// In the body and the `gh_refresh` cookie.
        case alongside
        /// In the cookie only: the body's `refresh_token` is null, so no script can read it.
        case only

        public var setsCookie: Bool { self != .off }
        public var inBody: Bool { self != .only }
    }

    public init(name: String) { self.name = name }

    /// What `anonymous_ttl_days` may be: a day (an access token lives at most one) to ten years.
    public static let anonymousTTLDaysRange: ClosedRange<Int64> = 1...3650

    /// Whether a web flow to `redirectURI` must use PKCE: when the app asks for it, and always for
    /// a redirect URI that is not `https` (an app scheme or a loopback `http` page, where another
    /// program on the device can receive the login code).
    public func requiresPKCE(redirectURI: String) -> Bool {
        requirePKCE || !redirectURI.lowercased().hasPrefix("https://")
    }
}

extension AppSettings {
    /// Decodes and validates a whole settings object. Fields that are absent take their default.
    /// Unknown fields are rejected. Throws `request/validation-failed` with every field's problem.
    /// Each section decodes itself (next to its type), in the document's order of checks.
    /// `extraKeys` are accepted and ignored (for example `app_key` in a Tenants file).
    /// `caps` are the platform's ceilings (``Configuration/platformCaps``).
    /// `allowPrivateOutbound` (`GATEHOUSE_ALLOW_PRIVATE_OUTBOUND`) lets a webhook URL be `http` or
    /// name a private address; settings read from storage are not checked against it.
    public static func decode(
        _ json: JSON, source: SettingsSource, caps: PlatformCaps, extraKeys: Set<String> = [], allowPrivateOutbound: Bool = false
    ) throws(GatehouseError) -> AppSettings {
        let context = SettingsDecoding(source: source, caps: caps, allowPrivateOutbound: allowPrivateOutbound)
        var r = FieldReader(json)
        for key in extraKeys { _ = r.raw(key) }
        var s = AppSettings(name: "")
        let providerNames = s.decodeSignIn(&r, context)
        s.decodeSessions(&r)
        s.decodeAccounts(&r)
        s.decodeWebClients(&r)
        if let v = r.string("signing_algorithm") {
            if let alg = SignatureAlgorithm(rawValue: v) { s.signingAlgorithm = alg } else { r.fail("signing_algorithm", "Must be RS256 or ES256.") }
        }
        s.files = r.section("files", context, Files.decode) ?? s.files
        s.rateLimits = r.section("rate_limits", context, RateLimits.decode) ?? s.rateLimits
        s.apple = r.section("apple", context, Apple.decode) ?? s.apple
        s.google = r.section("google", context, Google.decode) ?? s.google
        s.firebase = r.section("firebase", context, Firebase.decode) ?? s.firebase
        s.oidcProviders = OIDCProvider.decodeList(&r, context)
        s.signInProviders = s.providerMethods(providerNames, &r)
        s.email = r.section("email", context, Email.decode) ?? s.email
        s.webhooks = Webhook.decodeList(&r, context)
        s.mfa = r.section("mfa", context, MFA.decode) ?? s.mfa
        s.passkeys = r.section("passkeys", context, Passkeys.decode) ?? nil
        if case .storage = source {} else if s.allowAnonymous, s.mfa.policy == .required {
            // An anonymous account has no first factor to add a second to, and its upgrade
            // (a password, an address, a provider) keeps its session: under `required` that
            // session would be a permanent account's that never passed a second step.
            r.fail("allow_anonymous", "Must be false while mfa.policy is required: anonymous accounts have no second step.")
        }
        r.rejectUnknown()
        if !r.errors.isEmpty { throw .validation(r.errors) }
        return s
    }

    /// The app's name and who may sign up or in, and how. Returns the `sign_in_methods` entries
    /// that are no built-in method: ids of the app's `oidc_providers`, checked once those are read.
    private mutating func decodeSignIn(_ r: inout FieldReader, _ context: SettingsDecoding) -> [String] {
        var others: [String] = []
        let name = r.string("name", maxLength: 100)?.trimmingCharacters(in: .whitespaces)
        // A name stored before format characters were refused still loads (else every request
        // of that app would fail, the PATCH that could mend it included); a change must mend it.
        if let name, !context.storedBefore, InputRules.hasControlOrFormatCharacters(name) {
            r.fail("name", InputRules.nameCharactersMessage)  // shown to users on consent pages and in mails
        } else if let name, !name.isEmpty {
            self.name = name
        } else if !r.errors.contains(where: { $0.field == "name" }) {
            r.fail("name", "Required: a name of 1 to 100 characters.")
        }
        if let v = r.bool("allow_signup") { allowSignup = v }
        if let v = r.stringArray("sign_in_methods", maxCount: SignInMethod.configurable.count + OIDCProvider.maxCount) {
            others = uniqued(v).filter { SignInMethod(rawValue: $0).map(SignInMethod.configurable.contains) != true }
            signInMethods = uniqued(v).compactMap(SignInMethod.init(rawValue:)).filter(SignInMethod.configurable.contains)
        }
        if let v = r.bool("require_verified_email") { requireVerifiedEmail = v }
        if let v = r.bool("allow_anonymous") { allowAnonymous = v }
        return others
    }

    /// The `sign_in_methods` entries that name none of the built-in methods must each be the id of
    /// one of the app's `oidc_providers`.
    private func providerMethods(_ names: [String], _ r: inout FieldReader) -> [String] {
        let all = SignInMethod.configurable.map(\.rawValue)
        var ids: [String] = []
        for m in names {
            if oidcProviders.contains(where: { $0.id == m }) {
                ids.append(m)
            } else {
                r.fail("sign_in_methods", "Unknown sign-in method \(m); use \(all.joined(separator: ", ")) or the id of one of oidc_providers.")
            }
        }
        return ids
    }

    /// Sessions and their tokens: recent login, lifetimes, the idle timeout.
    private mutating func decodeSessions(_ r: inout FieldReader) {
        if let v = r.int("recent_login_seconds", 1...86400) { recentLoginSeconds = v }
        if let v = r.int("access_token_ttl_seconds", 60...TokenService.maxAccessTokenLifetimeSeconds) { accessTokenTTLSeconds = v }
        if let v = r.int("refresh_token_ttl_seconds", 300...(366 * 86400)) { refreshTokenTTLSeconds = v }
        if let v = r.int("refresh_token_idle_seconds", 300...(366 * 86400)) {
            // Shorter than an access token's life, a client that refreshes when its token expires
            // would always find its session idle.
            if v < accessTokenTTLSeconds, !r.errors.contains(where: { $0.field == "access_token_ttl_seconds" }) {
                r.fail("refresh_token_idle_seconds", "Must be at least access_token_ttl_seconds (\(accessTokenTTLSeconds)), or null.")
            } else {
                refreshTokenIdleSeconds = v
            }
        }
    }

    /// Accounts: the deletion grace period, anonymous accounts' life, shared addresses, passwords.
    private mutating func decodeAccounts(_ r: inout FieldReader) {
        if let v = r.int("deletion_grace_days", 0...365) { deletionGraceDays = v }
        if let v = r.int("anonymous_ttl_days", Self.anonymousTTLDaysRange) { anonymousTTLDays = v }
        if let v = r.string("email_collision") {
            if ["reject", "separate"].contains(v) { emailCollision = v } else { r.fail("email_collision", "Must be reject or separate.") }
        }
        if let v = r.int("password_min_length", 8...128) { passwordMinLength = v }
        if let v = r.bool("allow_hash_export") { allowHashExport = v }
    }

    /// Browser and app clients: CORS origins, redirect URIs, the refresh cookie, PKCE.
    private mutating func decodeWebClients(_ r: inout FieldReader) {
        if let v = r.stringArray("allowed_origins", maxCount: 100) {
            for (i, origin) in v.enumerated() where !isOrigin(origin) {
                r.fail(path: "allowed_origins[\(i)]", "Must be an origin: scheme://host[:port], no path.")
            }
            allowedOrigins = uniqued(v.map { $0.lowercased() })
        }
        if let v = r.stringArray("redirect_uris", maxCount: 100, maxLength: 2048) {
            for (i, uri) in v.enumerated() where !isRedirectURI(uri) {
                r.fail(path: "redirect_uris[\(i)]", "Must be an https URL (http only for localhost) or an app scheme with a dot, without a fragment.")
            }
            redirectURIs = uniqued(v)
        }
        if let v = r.raw("refresh_cookie") {
            switch v {
            case .bool(let on): refreshCookie = on ? .alongside : .off
            case .string("only"): refreshCookie = .only
            default: r.fail("refresh_cookie", "Must be false, true or \"only\".")
            }
        }
        if let v = r.bool("require_pkce") { requirePKCE = v }
    }

    /// The settings as JSON, with secrets rendered as asked.
    public func json(secrets: SecretRendering) -> JSON {
        [
            "name": .string(name),
            "allow_signup": .bool(allowSignup),
            "sign_in_methods": .strings(signInMethods.map(\.rawValue) + signInProviders),
            "require_verified_email": .bool(requireVerifiedEmail),
            "allow_anonymous": .bool(allowAnonymous),
            "recent_login_seconds": .int(recentLoginSeconds),
            "access_token_ttl_seconds": .int(accessTokenTTLSeconds),
            "refresh_token_ttl_seconds": .int(refreshTokenTTLSeconds),
            "refresh_token_idle_seconds": refreshTokenIdleSeconds.map(JSON.int) ?? .null,
            "deletion_grace_days": .int(deletionGraceDays),
            "anonymous_ttl_days": .int(anonymousTTLDays),
            "email_collision": .string(emailCollision),
            "password_min_length": .int(passwordMinLength),
            "allow_hash_export": .bool(allowHashExport),
            "allowed_origins": .strings(allowedOrigins),
            "redirect_uris": .strings(redirectURIs),
            "refresh_cookie": refreshCookie == .only ? "only" : .bool(refreshCookie == .alongside),
            "require_pkce": .bool(requirePKCE),
            "signing_algorithm": .string(signingAlgorithm.rawValue),
            "files": files.json,
            "rate_limits": rateLimits.json,
            "apple": apple.json(secrets: secrets),
            "google": google.json,
            "firebase": firebase.json(secrets: secrets),
            "oidc_providers": .array(oidcProviders.enumerated().map { i, provider in provider.json(at: i, secrets: secrets) }),
            "email": email.json(secrets: secrets),
            "webhooks": .array(webhooks.enumerated().map { i, hook in hook.json(at: i, secrets: secrets) }),
            "mfa": mfa.json,
            "passkeys": passkeys?.json ?? .null,
        ]
    }
}

// MARK: - Field rules

private func isLoopbackHost(_ host: String) -> Bool { ["localhost", "127.0.0.1", "[::1]", "::1"].contains(host) }

/// `scheme://host[:port]` with nothing after it.
func isOrigin(_ s: String) -> Bool {
    guard let c = URLComponents(string: s), let scheme = c.scheme?.lowercased(), ["http", "https"].contains(scheme),
        let host = c.host, !host.isEmpty, c.user == nil, c.password == nil, c.path.isEmpty, c.query == nil, c.fragment == nil
    else { return false }
    return true
}

func isRedirectURI(_ s: String) -> Bool {
    guard let c = URLComponents(string: s), let scheme = c.scheme?.lowercased(), c.fragment == nil, c.user == nil, c.password == nil else {
        return false
    }
    switch scheme {
    case "https": return c.host?.isEmpty == false
    case "http": return isLoopbackHost(c.host ?? "")
    default: return scheme.contains(".")  // RFC 8252 private-use scheme, e.g. com.example.app:/callback
    }
}
