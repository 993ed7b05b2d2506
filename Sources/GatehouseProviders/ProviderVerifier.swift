import GatehouseCore
import GatehouseCrypto
import GatehouseOutbound

/// Verifies ID tokens from Apple, Google and Firebase against their published keys.
///
/// Every check failure throws ``ProviderError/invalidToken(_:)`` (its text is for logs, except
/// the Firebase provider pin); an unreachable key server throws ``ProviderError/unavailable(_:)``.
/// Only RS256 is accepted, the key is chosen by `kid` from the provider's own key URL, and the
/// issuer is always the real one, whatever URL the keys come from.
public final class ProviderVerifier: Sendable {
    /// Apple's issuer.
    public static let appleIssuer = "https://appleid.apple.com"
    /// Google's two issuers.
    public static let googleIssuers: Set<String> = ["accounts.google.com", "https://accounts.google.com"]
    /// How the client-facing Firebase provider-pin detail starts (see ``ProviderError/clientDetail``).
    static let providerPinPrefix = "Expected a "
    /// Clock skew allowed on `exp`, `iat` and `auth_time`, in seconds.
    public static let leewaySeconds: Int64 = 60

    private let jwks: JWKSCache
    private let clock: any Clock
    private let appleKeysURL: String
    private let googleKeysURL: String
    private let firebaseKeysURL: String

    /// Creates a verifier reading keys through `jwks` from the three URLs (Apple's
    /// `<apple>/auth/keys`, Google's certs, Firebase's securetoken JWKS).
    public init(jwks: JWKSCache, clock: any Clock, appleKeysURL: String, googleKeysURL: String, firebaseKeysURL: String) {
        self.jwks = jwks
        self.clock = clock
        self.appleKeysURL = appleKeysURL
        self.googleKeysURL = googleKeysURL
        self.firebaseKeysURL = firebaseKeysURL
    }

    /// Verifies a Sign in with Apple identity token: RS256 by a key from Apple's JWKS, `iss`
    /// `https://appleid.apple.com`, `aud` one of `audiences`, `exp`/`iat` within 60 s of leeway,
    /// a non-empty `sub`, and — when `expectedNonceHash` is given — a `nonce` claim equal to it
    /// (the lowercase hex SHA-256 of the raw nonce the client sent us).
    public func verifyApple(_ token: String, audiences: [String], expectedNonceHash: String?) throws(ProviderError) -> ProviderIdentity {
        let claims = try verifiedClaims(token, keysURL: appleKeysURL)
        try check(issuer: claims, oneOf: [Self.appleIssuer])
        let audience = try check(audience: claims, oneOf: audiences)
        try checkTimes(claims)
        let subject = try nonEmptySubject(claims)
        if let expectedNonceHash {
            guard let nonce = claims["nonce"]?.stringValue else { throw .invalidToken("nonce claim missing") }
            guard constantTimeEquals(Array(nonce.utf8), Array(expectedNonceHash.utf8)) else {
                throw .invalidToken("nonce does not match")
            }
        }
        let email = claims["email"]?.stringValue
        let relay = Self.flag(claims["is_private_email"])
            || email.map { $0.lowercased().hasSuffix("@privaterelay.appleid.com") } ?? false
        return Self.withTokenFacts(
            ProviderIdentity(subject: subject, email: email, emailVerified: Self.flag(claims["email_verified"]), isPrivateRelayEmail: relay, audience: audience),
            claims)
    }

    /// Verifies one of Apple's server-to-server notifications (the body's `payload`): RS256 by a
    /// key from Apple's JWKS (the same cache and unknown-`kid` rule as identity tokens), `iss`
    /// `https://appleid.apple.com`, `aud` one of `audiences`, `exp`/`iat` within 60 s of leeway,
    /// and an `events` claim that is a JSON *string* holding an object with a non-empty `type`
    /// and `sub`, an integer `event_time` (milliseconds) and optionally `email` and
    /// `is_private_email` (a bool or `"true"`/`"false"`). Any other shape is an invalid token.
    public func verifyAppleNotification(_ token: String, audiences: [String]) throws(ProviderError) -> AppleAccountEvent {
        let claims = try verifiedClaims(token, keysURL: appleKeysURL)
        try check(issuer: claims, oneOf: [Self.appleIssuer])
        let audience = try check(audience: claims, oneOf: audiences)
        try checkTimes(claims)
        guard let text = claims["events"]?.stringValue else { throw .invalidToken("events is not a JSON string") }
        guard let events = (try? JSON.parse(Array(text.utf8)))?.objectValue else { throw .invalidToken("events does not hold a JSON object") }
        guard let type = events["type"]?.stringValue, !type.isEmpty, type.utf8.count <= 64 else { throw .invalidToken("events.type missing") }
        guard let subject = events["sub"]?.stringValue, !subject.isEmpty, subject.utf8.count <= 255 else { throw .invalidToken("events.sub missing") }
        guard case .int(let eventTime)? = events["event_time"], eventTime > 0 else { throw .invalidToken("events.event_time missing") }
        let email: String?
        switch events["email"] {
        case nil, .null?: email = nil
        case .string(let value)? where !value.isEmpty && value.utf8.count <= 320: email = value
        default: throw .invalidToken("events.email is not an address")
        }
        let isPrivate: Bool? = events["is_private_email"].flatMap { $0 == .null ? nil : Self.flag($0) }
        return AppleAccountEvent(type: type, subject: subject, eventTime: eventTime, email: email, isPrivateEmail: isPrivate, audience: audience)
    }

    /// Verifies a Google ID token: RS256 by a key from Google's JWKS, `iss` `accounts.google.com`
    /// or `https://accounts.google.com`, `aud` one of `audiences`, `exp`/`iat` within 60 s of
    /// leeway, a non-empty `sub`, and — when `nonce` is given — a `nonce` claim equal to it (raw).
    public func verifyGoogle(_ token: String, audiences: [String], nonce: String?) throws(ProviderError) -> ProviderIdentity {
        let claims = try verifiedClaims(token, keysURL: googleKeysURL)
        try check(issuer: claims, oneOf: Self.googleIssuers)
        let audience = try check(audience: claims, oneOf: audiences)
        try checkTimes(claims)
        let subject = try nonEmptySubject(claims)
        if let nonce {
            guard let claimed = claims["nonce"]?.stringValue else { throw .invalidToken("nonce claim missing") }
            guard constantTimeEquals(Array(claimed.utf8), Array(nonce.utf8)) else { throw .invalidToken("nonce does not match") }
        }
        let first = claims["given_name"]?.stringValue
        let last = claims["family_name"]?.stringValue
        return Self.withTokenFacts(
            ProviderIdentity(
                subject: subject, email: claims["email"]?.stringValue, emailVerified: Self.flag(claims["email_verified"]),
                isPrivateRelayEmail: false, audience: audience,
                name: first == nil && last == nil ? nil : ProviderIdentity.Name(first: first, last: last)),
            claims)
    }

    /// Verifies a Firebase ID token: RS256 by a key from the Firebase JWKS, `iss`
    /// `https://securetoken.google.com/<projectID>`, `aud` == `projectID`, a non-empty `sub`,
    /// `exp`/`iat`/`auth_time` within 60 s of leeway, and `firebase.sign_in_provider` ==
    /// `expectedProvider` (`"apple.com"` or `"google.com"`). A token that passes everything but the
    /// provider pin throws `.invalidToken("Expected a <expected> token but received <actual>")` —
    /// that text is safe to show to the client. The subject is
    /// `firebase.identities[expectedProvider][0]` when present, else `firebase:<uid>`: a Firebase
    /// uid is not the provider's id, and must not be able to equal a native user's subject.
    public func verifyFirebase(_ token: String, projectID: String, expectedProvider: String) throws(ProviderError) -> ProviderIdentity {
        guard !projectID.isEmpty else { throw .invalidToken("no Firebase project id configured") }
        let claims = try verifiedClaims(token, keysURL: firebaseKeysURL)
        try check(issuer: claims, oneOf: ["https://securetoken.google.com/\(projectID)"])
        let audience = try check(audience: claims, oneOf: [projectID])
        try checkTimes(claims)
        let uid = try nonEmptySubject(claims)
        if let authTime = Self.seconds(claims["auth_time"]), authTime > clock.nowSeconds + Self.leewaySeconds {
            throw .invalidToken("auth_time is in the future")
        }
        let firebase = claims["firebase"]
        let provider = firebase?["sign_in_provider"]?.stringValue ?? "none"
        guard provider == expectedProvider else {
            throw .invalidToken("\(Self.providerPinPrefix)\(expectedProvider) token but received \(Self.loggable(provider))")
        }
        let providerSubject = firebase?["identities"]?[expectedProvider]?.arrayValue?.first?.stringValue
        let email = claims["email"]?.stringValue
        let relay = expectedProvider == "apple.com" && (email.map { $0.lowercased().hasSuffix("@privaterelay.appleid.com") } ?? false)
        return Self.withTokenFacts(
            ProviderIdentity(
                subject: providerSubject.flatMap { $0.isEmpty ? nil : $0 } ?? "firebase:\(uid)", email: email,
                emailVerified: Self.flag(claims["email_verified"]), isPrivateRelayEmail: relay, audience: audience),
            claims)
    }

    // MARK: - Checks

    /// Parses, picks the key by `kid` from `keysURL`, checks the signature, and returns the claims object.
    private func verifiedClaims(_ token: String, keysURL: String) throws(ProviderError) -> [String: JSON] {
        let parsed: JWT.Parsed
        do {
            parsed = try JWT.parse(token)
        } catch {
            throw .invalidToken("malformed token: \(error.reason)")
        }
        guard parsed.header.alg == SignatureAlgorithm.rs256.rawValue else {
            throw .invalidToken("alg \(Self.loggable(parsed.header.alg)) is not RS256")
        }
        guard let kid = parsed.header.kid, !kid.isEmpty else { throw .invalidToken("no kid in header") }
        guard let key = try jwks.key(url: keysURL, kid: kid) else { throw .invalidToken("unknown kid \(Self.loggable(kid))") }
        guard key.algorithm == .rs256, JWT.verify(parsed, with: key) else { throw .invalidToken("bad signature") }
        guard let claims = (try? JSON.parse(parsed.payload))?.objectValue else {
            throw .invalidToken("claims are not a JSON object")
        }
        return claims
    }

    func check(issuer claims: [String: JSON], oneOf issuers: Set<String>) throws(ProviderError) {
        guard let issuer = claims["iss"]?.stringValue, issuers.contains(issuer) else { throw .invalidToken("wrong issuer") }
    }

    /// `aud` as a string, or an array of exactly one string.
    func check(audience claims: [String: JSON], oneOf audiences: [String]) throws(ProviderError) -> String {
        let audience: String?
        switch claims["aud"] {
        case .string(let value): audience = value
        case .array(let values) where values.count == 1: audience = values[0].stringValue
        default: audience = nil
        }
        guard let audience, !audience.isEmpty, audiences.contains(audience) else { throw .invalidToken("wrong audience") }
        return audience
    }

    func checkTimes(_ claims: [String: JSON]) throws(ProviderError) {
        let now = clock.nowSeconds
        guard let expiresAt = Self.seconds(claims["exp"]) else { throw .invalidToken("exp missing") }
        guard let issuedAt = Self.seconds(claims["iat"]) else { throw .invalidToken("iat missing") }
        guard now < expiresAt + Self.leewaySeconds else { throw .invalidToken("token expired") }
        guard issuedAt <= now + Self.leewaySeconds else { throw .invalidToken("token issued in the future") }
        // Apple sends no `nbf`, Google may: when a token has one, it holds (RFC 7519 §4.1.5).
        if claims["nbf"] != nil {
            guard let notBefore = Self.seconds(claims["nbf"]), notBefore <= now + Self.leewaySeconds else { throw .invalidToken("token not valid yet") }
        }
    }

    func nonEmptySubject(_ claims: [String: JSON]) throws(ProviderError) -> String {
        guard let subject = claims["sub"]?.stringValue, !subject.isEmpty else { throw .invalidToken("sub missing") }
        return subject
    }

    /// Token-supplied text shortened to 64 printable ASCII characters, so that it cannot forge
    /// log lines or flood them (it also reaches the client in the Firebase pin detail).
    static func loggable(_ text: String) -> String {
        let printable = text.unicodeScalars.prefix(64).map { $0.isASCII && $0.value >= 0x20 && $0.value < 0x7F ? Character($0) : "?" }
        return String(printable) + (text.unicodeScalars.count > 64 ? "…" : "")
    }

    /// The identity with what the (already checked) token says of itself, for freshness and replay checks.
    static func withTokenFacts(_ identity: ProviderIdentity, _ claims: [String: JSON]) -> ProviderIdentity {
        var identity = identity
        identity.issuer = claims["iss"]?.stringValue ?? ""
        identity.issuedAt = seconds(claims["iat"]) ?? 0
        identity.expiresAt = seconds(claims["exp"]) ?? 0
        identity.authTime = seconds(claims["auth_time"])
        identity.nonce = claims["nonce"]?.stringValue
        return identity
    }

    /// A NumericDate claim in whole seconds; nil beyond ±10^15 s (some 30 million years), so that
    /// no sum or product of a claim (the leeway added, milliseconds made) can overflow: a signed
    /// token is no reason to trust its numbers, and an issuer may be a tenant's own.
    static func seconds(_ value: JSON?) -> Int64? {
        switch value {
        case .int(let seconds) where abs(seconds) < 1_000_000_000_000_000: seconds
        case .double(let seconds) where seconds.isFinite && abs(seconds) < 1e15: Int64(seconds.rounded(.down))
        default: nil
        }
    }

    /// A boolean claim Apple may send as a bool or as `"true"`/`"false"`.
    static func flag(_ value: JSON?) -> Bool {
        switch value {
        case .bool(let flag): flag
        case .string(let text): text.lowercased() == "true"
        default: false
        }
    }
}

extension ProviderError {
    /// The text that may be shown to the client as the problem `detail`, or `nil` when only a
    /// generic detail should be shown. Today only the Firebase provider pin has one:
    /// `"Expected a apple.com token but received google.com"`.
    public var clientDetail: String? {
        guard case .invalidToken(let reason) = self, reason.hasPrefix(ProviderVerifier.providerPinPrefix) else { return nil }
        return reason
    }

    /// The domain's view of this failure: a token that does not verify → `invalidToken` (with
    /// ``clientDetail``), a request the provider refuses → `rejected`, a provider that cannot be
    /// reached (or an address refused, which a provider's own URL never is) → `unreachable`.
    public var failure: ProviderFailure {
        switch self {
        case .unavailable(let why), .addressRefused(let why): .unreachable(reason: why)
        case .invalidToken(let why): .invalidToken(reason: why, clientDetail: clientDetail)
        case .rejected(let why): .rejected(reason: why)
        }
    }

    /// Why the provider could not be reached, for the log; nil for the other failures.
    public var unreachableReason: String? {
        switch self {
        case .unavailable(let why), .addressRefused(let why): why
        case .invalidToken, .rejected: nil
        }
    }
}
