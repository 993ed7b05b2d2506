import Foundation

extension AppSettings {
    /// A provider the tenant defines (`oidc_providers[]`, API.md "More providers"): its `id` is the
    /// identity provider's name (``IdentityProvider``), the `sign_in_methods` entry that turns it
    /// on and the path segment of `POST /v1/auth/oidc/{id}`.
    public struct OIDCProvider: Sendable, Equatable {
        /// What speaks at the other end, which decides the issuer, the token checks and the email rule.
        public enum Kind: String, Sendable, CaseIterable {
            /// Any issuer with a discovery document and a JWKS.
            case oidc
            /// Kakao Login (OpenID Connect, RS256, issuer `https://kauth.kakao.com`).
            case kakao
            /// LINE Login: the native SDK's ID tokens are HS256 under the channel secret.
            case line
            /// Naver: no ID token; an access token and the profile API.
            case naver
            /// Microsoft identity platform v2.0: the `{tenantid}` issuer template.
            case microsoft
            /// GitHub: no ID token; an access token, the user and verified emails API.
            case github

            /// Whether the kind's native sign-in takes an ID token (else an access token).
            public var hasIDTokens: Bool {
                switch self {
                case .oidc, .kakao, .line, .microsoft: true
                case .naver, .github: false
                }
            }

            /// Whether the kind's token endpoint redeems a web flow's code only with the client
            /// secret (LINE, Naver, GitHub); the others may be public clients.
            public var webFlowNeedsClientSecret: Bool {
                switch self {
                case .line, .naver, .github: true
                case .oidc, .kakao, .microsoft: false
                }
            }

            /// The issuer a kind always has (the real one, whatever URL its documents come from in tests).
            public var fixedIssuer: String? {
                switch self {
                case .kakao: "https://kauth.kakao.com"
                case .line: "https://access.line.me"
                default: nil
                }
            }
        }

        public var id: String
        public var kind: Kind
        /// The audiences its tokens may carry (LINE: the channel id).
        public var clientIDs: [String]
        /// Secret (LINE: the channel secret that signs HS256 ID tokens); sealed when stored.
        public var clientSecret: String?
        /// `oidc`: the issuer URL; `kakao`/`line`: the fixed issuer; `microsoft`: the tenant
        /// (`common`, `organizations`, `consumers` or a tenant GUID); nil for the others.
        public var issuer: String?
        public var scopes: [String]

        public init(id: String, kind: Kind, clientIDs: [String], clientSecret: String? = nil, issuer: String? = nil, scopes: [String] = []) {
            self.id = id
            self.kind = kind
            self.clientIDs = clientIDs
            self.clientSecret = clientSecret
            self.issuer = issuer
            self.scopes = scopes
        }

        /// Most providers an app defines.
        public static let maxCount = 20
        /// The Microsoft tenants that are not one tenant: their tokens' issuer carries the user's `tid`.
        public static let microsoftMultiTenants: Set<String> = ["common", "organizations", "consumers"]

        /// Names a provider may not take: every built-in sign-in method, identity provider and source of tokens.
        public static var reservedIDs: Set<String> {
            Set(SignInMethod.allCases.map(\.rawValue) + IdentityProvider.builtIn.map(\.rawValue) + ["firebase"])
        }

        /// `[a-z][a-z0-9-]{1,30}`.
        public static func isValidID(_ id: String) -> Bool {
            let u = Array(id.utf8)
            guard (2...31).contains(u.count), (97...122).contains(u[0]) else { return false }
            return u.allSatisfy { (97...122).contains($0) || (48...57).contains($0) || $0 == 45 }
        }

        /// A Microsoft tenant GUID (8-4-4-4-12 hex digits).
        public static func isTenantGUID(_ s: String) -> Bool {
            let parts = s.split(separator: "-", omittingEmptySubsequences: false)
            guard parts.map(\.count) == [8, 4, 4, 4, 12] else { return false }
            return parts.allSatisfy { $0.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) || (65...70).contains($0) } }
        }
    }
}

extension AppSettings.OIDCProvider {
    /// `oidc_providers`: at most ``maxCount``, ids unique.
    static func decodeList(_ r: inout FieldReader, _ context: SettingsDecoding) -> [Self] {
        guard let raw = r.raw("oidc_providers") else { return [] }
        guard case .array(let items) = raw, items.count <= maxCount else {
            r.fail("oidc_providers", "Must be an array of at most \(maxCount) providers.")
            return []
        }
        var providers: [Self] = []
        for (i, item) in items.enumerated() {
            var f = FieldReader(item, path: "oidc_providers[\(i)]")
            let provider = decode(&f, context)
            f.rejectUnknown()
            r.absorb(f.errors)
            guard let provider else { continue }
            if providers.contains(where: { $0.id == provider.id }) {
                r.fail(path: "oidc_providers[\(i)].id", "Another provider has the id \(provider.id).")
            } else {
                providers.append(provider)
            }
        }
        return providers
    }

    /// One provider; nil when it has a problem (in `f`).
    private static func decode(_ f: inout FieldReader, _ context: SettingsDecoding) -> Self? {
        guard f.errors.isEmpty else { return nil }  // not an object
        let id = f.string("id", maxLength: 64)
        if let id {
            if !isValidID(id) {
                f.fail("id", "Must be 2 to 31 lowercase letters, digits or hyphens, starting with a letter.")
            } else if reservedIDs.contains(id) {
                f.fail("id", "\(id) is a built-in sign-in method; choose another id.")
            }
        } else if !f.errors.contains(where: { $0.field == f.field("id") }) {
            f.fail("id", "Required.")
        }
        var kind: Kind?
        if let v = f.string("kind", maxLength: 32) {
            kind = Kind(rawValue: v)
            if kind == nil { f.fail("kind", "Unknown kind \(v); use \(Kind.allCases.map(\.rawValue).joined(separator: ", ")).") }
        } else if !f.errors.contains(where: { $0.field == f.field("kind") }) {
            f.fail("kind", "Required: \(Kind.allCases.map(\.rawValue).joined(separator: ", ")).")
        }
        var clientIDs: [String] = []
        if let v = f.stringArray("client_ids", maxCount: 50, maxLength: 255) {
            for c in v where c.isEmpty || !c.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) { f.fail("client_ids", "\(c) is not a valid client id.") }
            clientIDs = uniqued(v)
        }
        if clientIDs.isEmpty, !f.errors.contains(where: { $0.field == f.field("client_ids") }) { f.fail("client_ids", "Required: at least one client id.") }
        var scopes: [String] = []
        if let v = f.stringArray("scopes", maxCount: 20, maxLength: 100) {
            for s in v where s.isEmpty || !s.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != 0x22 && $0 != 0x5C }) {
                f.fail("scopes", "\(s) is not a valid scope.")
            }
            scopes = uniqued(v)
        }
        let given = f.string("issuer", maxLength: 2048)
        var issuer: String?
        switch kind {
        case .oidc?:
            if let given, context.storedBefore || isIssuerURL(given, allowPrivate: context.allowPrivateOutbound) {
                issuer = given  // as given: `iss` is compared exactly, and some issuers end with `/`
            } else if !f.errors.contains(where: { $0.field == f.field("issuer") }) {
                f.fail("issuer", context.allowPrivateOutbound
                    ? "Required: the issuer, an https URL (http for localhost) without query or fragment."
                    : "Required: the issuer, an https URL without credentials, query or fragment.")
            }
        case .kakao?, .line?:
            let fixed = kind!.fixedIssuer!
            if let given, given != fixed { f.fail("issuer", "A \(kind!.rawValue) provider's issuer is \(fixed); leave it out.") }
            issuer = fixed
        case .microsoft?:
            let tenant = given ?? "common"
            if microsoftMultiTenants.contains(tenant) || isTenantGUID(tenant) {
                issuer = tenant.lowercased()
            } else {
                f.fail("issuer", "For microsoft: the tenant, common, organizations, consumers or a tenant id (GUID).")
            }
        case .naver?, .github?:
            if given != nil { f.fail("issuer", "A \(kind!.rawValue) provider has no issuer; leave it out.") }
        case nil:
            break
        }
        // The stored secret is kept (`{"set": true}`) only for the same kind and issuer: else the
        // secret, which no read shows, could be sent to a token endpoint the writer chose.
        let current = context.current?.oidcProviders.first(where: { $0.id == id && $0.kind == kind && $0.issuer == issuer })?.clientSecret
        let secret = context.secret(&f, "client_secret", current: current)
        if kind == .line, secret == nil, !f.errors.contains(where: { $0.field.hasPrefix(f.field("client_secret")) }) {
            f.fail("client_secret", "Required for line: the channel secret, which signs the SDK's ID tokens.")
        }
        if kind == .github, secret == nil, !f.errors.contains(where: { $0.field.hasPrefix(f.field("client_secret")) }) {
            // GitHub's user ids are the same in every OAuth app: only the app's own secret can
            // tell that a token was issued to this app rather than to any other.
            f.fail("client_secret", "Required for github: the OAuth app's secret, which checks that a token was issued to it.")
        }
        guard let id, let kind, f.errors.isEmpty else { return nil }
        return Self(id: id, kind: kind, clientIDs: clientIDs, clientSecret: secret, issuer: issuer, scopes: scopes)
    }

    func json(at index: Int, secrets: SecretRendering) -> JSON {
        [
            "id": .string(id), "kind": .string(kind.rawValue), "client_ids": .strings(clientIDs),
            "client_secret": secrets.render(clientSecret, "oidc_providers[\(index)].client_secret"),
            "issuer": .optional(issuer), "scopes": .strings(scopes),
        ]
    }
}

/// An issuer URL: https (http only for `localhost`/`127.0.0.1` when private outbound addresses
/// are allowed), a host, no credentials, query or fragment.
func isIssuerURL(_ s: String, allowPrivate: Bool) -> Bool {
    guard let c = URLComponents(string: s), let scheme = c.scheme?.lowercased(), let host = c.host, !host.isEmpty,
        c.user == nil, c.password == nil, c.query == nil, c.fragment == nil
    else { return false }
    switch scheme {
    case "https": return true
    case "http": return allowPrivate && ["localhost", "127.0.0.1"].contains(host.lowercased())
    default: return false
    }
}

extension AppSettings.OIDCProvider {
    /// Whether `other`'s users have this provider's subjects: the same kind and issuer, or a
    /// Microsoft provider narrowed from `common` or `organizations` to one tenant (Microsoft's
    /// subjects are the app registration's, whatever the tenant; the narrower one only takes
    /// fewer of them).
    public func hasSameSubjects(as other: Self) -> Bool {
        guard kind == other.kind else { return false }
        if issuer == other.issuer { return true }
        let multiTenant: Set<String?> = [nil, "common", "organizations"]
        let named: Set<String?> = [nil, "common", "organizations", "consumers"]
        return kind == .microsoft && multiTenant.contains(issuer) && !named.contains(other.issuer)
    }
}
