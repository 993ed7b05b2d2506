import Foundation
import GatehouseCrypto

/// Everything an app (tenant) configures: the same JSON in `PATCH /v1/admin/app`, in
/// `POST /v1/admin/apps` and in a file under `Tenants/`. Secrets are held in clear in memory only;
/// they are sealed with the master key when stored and shown to admins as `{"set": true}`.
public struct AppSettings: Sendable, Equatable {
    public var name: String
    public var allowSignup = true
    public var signInMethods: [SignInMethod] = SignInMethod.defaults
    public var requireVerifiedEmail = false
    public var recentLoginSeconds: Int64 = 300
    public var accessTokenTTLSeconds: Int64 = 900
    public var refreshTokenTTLSeconds: Int64 = 30 * 86400
    /// A session not refreshed for this long cannot be refreshed any more; nil: no idle timeout.
    public var refreshTokenIdleSeconds: Int64?
    public var deletionGraceDays: Int64 = 0
    public var emailCollision = "reject"
    public var passwordMinLength: Int64 = 8
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
    public var email = Email()
    public var webhooks: [Webhook] = []

    public struct Files: Sendable, Equatable {
        public var maxBytes: Int64 = 5 * 1024 * 1024
        /// The highest `max_bytes` an app may set.
        public static let maxBytesCeiling: Int64 = 100 * 1024 * 1024
        public var photoTypes: [String] = Files.allPhotoTypes
        public static let allPhotoTypes = ["image/jpeg", "image/png", "image/webp", "image/gif"]
        /// Files (photo included) one user may hold, and their bytes in all: over either an
        /// upload is 403 `files/quota-exceeded`. At most ``PlatformCaps/current``'s.
        public var maxFilesPerUser: Int64 = 200
        public var maxBytesPerUser: Int64 = 100 * 1024 * 1024
        /// The sniffed types a file uploaded `public` may have (else 415 `files/unsupported-type`).
        public var publicTypes: [String] = Files.allPhotoTypes
    }
    /// The platform's ceilings on the per-app upload caps, from the server's environment
    /// (`GATEHOUSE_MAX_UPLOADS_PER_HOUR_PER_USER`, `GATEHOUSE_MAX_FILES_PER_USER`,
    /// `GATEHOUSE_MAX_BYTES_PER_USER`; checked at start by ``Configuration``). A setting above its
    /// ceiling is refused when saved and lowered to it when read from storage.
    public struct PlatformCaps: Sendable, Equatable {
        public var uploadsPerHourPerUser: Int64 = 1000
        public var filesPerUser: Int64 = 10_000
        public var bytesPerUser: Int64 = 10 * 1024 * 1024 * 1024

        public init() {}

        /// The variables and the bounds each may be set within.
        static var variables: [(name: String, range: ClosedRange<Int64>, keyPath: WritableKeyPath<PlatformCaps, Int64>)] { [
            ("GATEHOUSE_MAX_UPLOADS_PER_HOUR_PER_USER", 1...1_000_000, \.uploadsPerHourPerUser),
            ("GATEHOUSE_MAX_FILES_PER_USER", 1...100_000_000, \.filesPerUser),
            ("GATEHOUSE_MAX_BYTES_PER_USER", 1024...(1 << 50), \.bytesPerUser),
        ] }

        /// The ceilings an environment sets, and the problems of the values that are not numbers
        /// in their bounds (those keep their defaults).
        public static func read(_ environment: [String: String]) -> (caps: PlatformCaps, problems: [String]) {
            var caps = PlatformCaps()
            var problems: [String] = []
            for (name, range, keyPath) in variables {
                guard let text = environment[name], !text.isEmpty else { continue }
                if let value = Int64(text), range.contains(value) {
                    caps[keyPath: keyPath] = value
                } else {
                    problems.append("\(name) must be an integer from \(range.lowerBound) to \(range.upperBound).")
                }
            }
            return (caps, problems)
        }

        /// This process's ceilings, read once from its environment.
        public static let current = read(ProcessInfo.processInfo.environment).caps
    }
    public struct RateLimits: Sendable, Equatable {
        public var authPerMinutePerIP: Int64 = 10
        /// The Apple web flow's `authorize` and callback, per IP (each `authorize` stores a flow).
        public var webFlowPerMinutePerIP: Int64 = 30
        /// The highest either may be set to: each sign-in costs an argon2id hash or a provider
        /// check on CPU that every app shares.
        public static let maxPerMinutePerIP: Int64 = 1000
        /// Mail the app may queue in a fixed hour (codes and notices); past it, mail is not queued.
        /// `GATEHOUSE_MAX_MAIL_PER_HOUR` bounds what an admin may set (``AppService``).
        public var mailPerHour: Int64 = 500
        /// The most `mail_per_hour` can ever be read as, whatever the platform's maximum.
        public static let mailPerHourCeiling: Int64 = 1_000_000
        /// Uploads (`POST /v1/files`, `POST /v1/me/photo`) one user may make an hour, refused or
        /// not; over it 429 `auth/too-many-requests`. At most ``PlatformCaps/current``'s.
        public var uploadsPerHourPerUser: Int64 = 60
    }
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
    public struct Apple: Sendable, Equatable {
        public var clientIDs: [String] = []
        public var servicesID: String?
        public var teamID: String?
        public var keyID: String?
        /// The `.p8` key (PKCS#8 PEM, P-256), secret.
        public var privateKey: String?
        public var requireNonce = true
    }
    public struct Google: Sendable, Equatable {
        public var clientIDs: [String] = []
    }
    public struct Firebase: Sendable, Equatable {
        public var projectID: String?
    }
    public struct Email: Sendable, Equatable {
        public var smtpURL: String?
        public var smtpUsername: String?
        /// Secret.
        public var smtpPassword: String?
        public var from: String?
        public var locale = "en"
    }
    public struct Webhook: Sendable, Equatable {
        public var url: String
        /// Secret: signs deliveries. `whsec_` and the base64 of 24–64 random bytes.
        public var secret: String
        /// Webhook types (``EventType/webhookCatalogue``); `*` (every type) in a list stored by an
        /// earlier version.
        public var events: [String]
        /// Secret: the secret `secret` replaced, kept (sealed, in storage only: never shown to an
        /// admin) so that deliveries are signed with both for ``secretOverlapMillis`` after the
        /// change (retries in flight, receivers mid-rotation).
        public var previousSecret: String?
        /// When (Unix milliseconds) `previousSecret` was replaced.
        public var secretReplacedAt: Int64?

        /// How long a replaced secret still signs deliveries: 24 hours.
        public static let secretOverlapMillis: Int64 = 24 * 3600 * 1000

        public init(url: String, secret: String, events: [String], previousSecret: String? = nil, secretReplacedAt: Int64? = nil) {
            self.url = url
            self.secret = secret
            self.events = events
            self.previousSecret = previousSecret
            self.secretReplacedAt = previousSecret == nil ? nil : secretReplacedAt
        }

        /// The keys a delivery at `now` is signed with: the current secret's, then the replaced
        /// secret's within 24 hours of the change.
        public func signingKeys(now: Int64) -> [[UInt8]] {
            guard let previous = livePreviousSecret(now: now) else { return [signingKey] }
            return [signingKey, Self.key(ofSecret: previous) ?? Array(previous.utf8)]
        }

        /// The replaced secret while it still signs (and differs from the current one), else nil.
        func livePreviousSecret(now: Int64) -> String? {
            guard let previousSecret, let secretReplacedAt, previousSecret != secret,
                now >= secretReplacedAt, now - secretReplacedAt < Self.secretOverlapMillis
            else { return nil }
            return previousSecret
        }

        /// Whether this webhook is subscribed to `type` (a webhook type).
        public func wants(_ type: EventType) -> Bool { events.contains(type.rawValue) || events.contains("*") }

        /// The HMAC key a `whsec_` secret stands for (its 24–64 decoded bytes), or nil.
        public static func key(ofSecret secret: String) -> [UInt8]? {
            guard secret.hasPrefix("whsec_") else { return nil }
            var text = String(secret.dropFirst(6))
            guard !text.isEmpty, text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return nil }
            while text.utf8.count % 4 != 0 { text += "=" }
            guard let data = Data(base64Encoded: text), (24...64).contains(data.count) else { return nil }
            return Array(data)
        }

        /// The key deliveries are signed with: the decoded bytes of a `whsec_` secret; for a
        /// secret stored by an earlier version in another form, its UTF-8 bytes.
        public var signingKey: [UInt8] { Self.key(ofSecret: secret) ?? Array(secret.utf8) }
    }

    public init(name: String) { self.name = name }

    /// Whether a web flow to `redirectURI` must use PKCE: when the app asks for it, and always for
    /// a redirect URI that is not `https` (an app scheme or a loopback `http` page, where another
    /// program on the device can receive the login code).
    public func requiresPKCE(redirectURI: String) -> Bool {
        requirePKCE || !redirectURI.lowercased().hasPrefix("https://")
    }
}


/// Where a settings document comes from, which decides how secrets may be given.
public enum SettingsSource {
    /// The admin API. Secrets are plain strings; `{"set": true}` keeps the current value (so a
    /// settings object read with GET can be sent back); `_file`/`_env` forms are refused, since a
    /// tenant admin must never read the server's files or environment.
    case admin(current: AppSettings?)
    /// An operator's file under `Tenants/`: plain strings, or `<name>_file` (relative to the file's
    /// folder) and `<name>_env`, resolved now.
    case tenantFile(directory: String, environment: [String: String])
    /// The database: secrets are `{"sealed": "<base64>"}`, opened with `unseal`.
    case storage(unseal: (_ sealed: String, _ field: String) throws -> String)
}

extension AppSettings {
    /// These settings, about to replace `old` at `now`, with each webhook's replaced secret: a
    /// webhook whose secret changed keeps the old one (and the time) for 24 hours of double
    /// signatures; one whose secret did not change keeps what `old` had, while it lasts. Matched
    /// by URL.
    public func keepingReplacedWebhookSecrets(of old: AppSettings?, now: Int64) -> AppSettings {
        var updated = self
        for i in updated.webhooks.indices {
            var hook = updated.webhooks[i]
            hook.previousSecret = nil
            hook.secretReplacedAt = nil
            if let before = old?.webhooks.first(where: { $0.url == hook.url }) {
                if before.secret != hook.secret {
                    hook.previousSecret = before.secret
                    hook.secretReplacedAt = now
                } else if let previous = before.livePreviousSecret(now: now), previous != hook.secret {
                    hook.previousSecret = previous
                    hook.secretReplacedAt = before.secretReplacedAt
                }
            }
            updated.webhooks[i] = hook
        }
        return updated
    }
}

/// How secrets are written out.
public enum SecretRendering {
    /// `{"set": true}` (or null when unset): what admins see.
    case redacted
    /// Plain text: used in memory to apply a merge patch.
    case plain
    /// `{"sealed": "<base64>"}` for the database.
    case sealed((_ plaintext: String, _ field: String) -> String)
}

extension AppSettings {
    /// `Name <a@b.example>` or `a@b.example`, the address ASCII without spaces (the mailer writes
    /// no SMTPUTF8): checked when saved, so a `from` the mailer would refuse never gets stored to
    /// dead-letter every mail of the app.
    static func isSenderMailbox(_ value: String) -> Bool {
        guard !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else { return false }
        var address = Substring(value.trimmingCharacters(in: .whitespaces))
        if address.hasSuffix(">"), let open = address.lastIndex(of: "<") {
            address = address[address.index(after: open)..<address.index(before: address.endIndex)]
        }
        let parts = address.split(separator: "@", omittingEmptySubsequences: false)
        return parts.count == 2 && !parts[0].isEmpty && !parts[1].isEmpty && address.utf8.count <= 254
            && address.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value < 0x7F && !"<>()[]\\,;:\"".unicodeScalars.contains($0) }
    }

    /// The event types a webhook may name.
    public static let webhookEvents = EventType.webhookCatalogue.map(\.rawValue)

    /// Decodes and validates a whole settings object. Fields that are absent take their default.
    /// Unknown fields are rejected. Throws `request/validation-failed` with every field's problem.
    /// `extraKeys` are accepted and ignored (for example `app_key` in a Tenants file).
    /// `allowPrivateOutbound` (`GATEHOUSE_ALLOW_PRIVATE_OUTBOUND`) lets a webhook URL be `http` or
    /// name a private address; settings read from storage are not checked against it.
    public static func decode(
        _ json: JSON, source: SettingsSource, extraKeys: Set<String> = [], allowPrivateOutbound: Bool = false
    ) throws(GatehouseError) -> AppSettings {
        var r = FieldReader(json)
        for key in extraKeys { _ = r.raw(key) }
        var s = AppSettings(name: "")
        let current: AppSettings? = if case .admin(let c) = source { c } else { nil }

        let name = r.string("name", maxLength: 100)?.trimmingCharacters(in: .whitespaces)
        // A name stored before format characters were refused still loads (else every request
        // of that app would fail, the PATCH that could mend it included); a change must mend it.
        let storedBefore: Bool = if case .storage = source { true } else { false }
        if let name, !storedBefore, InputRules.hasControlOrFormatCharacters(name) {
            r.fail("name", InputRules.nameCharactersMessage)  // shown to users on consent pages and in mails
        } else if let name, !name.isEmpty {
            s.name = name
        } else if !r.errors.contains(where: { $0.field == "name" }) {
            r.fail("name", "Required: a name of 1 to 100 characters.")
        }
        if let v = r.bool("allow_signup") { s.allowSignup = v }
        if let v = r.stringArray("sign_in_methods", maxCount: 4) {
            let all = SignInMethod.allCases.map(\.rawValue)
            for m in v where SignInMethod(rawValue: m) == nil {
                r.fail("sign_in_methods", "Unknown sign-in method \(m); use \(all.joined(separator: ", ")).")
            }
            s.signInMethods = uniqued(v).compactMap(SignInMethod.init(rawValue:))
        }
        if let v = r.bool("require_verified_email") { s.requireVerifiedEmail = v }
        if let v = r.int("recent_login_seconds", 1...86400) { s.recentLoginSeconds = v }
        if let v = r.int("access_token_ttl_seconds", 60...TokenService.maxAccessTokenLifetimeSeconds) { s.accessTokenTTLSeconds = v }
        if let v = r.int("refresh_token_ttl_seconds", 300...(366 * 86400)) { s.refreshTokenTTLSeconds = v }
        if let v = r.int("refresh_token_idle_seconds", 300...(366 * 86400)) {
            // Shorter than an access token's life, a client that refreshes when its token expires
            // would always find its session idle.
            if v < s.accessTokenTTLSeconds, !r.errors.contains(where: { $0.field == "access_token_ttl_seconds" }) {
                r.fail("refresh_token_idle_seconds", "Must be at least access_token_ttl_seconds (\(s.accessTokenTTLSeconds)), or null.")
            } else {
                s.refreshTokenIdleSeconds = v
            }
        }
        if let v = r.int("deletion_grace_days", 0...365) { s.deletionGraceDays = v }
        if let v = r.string("email_collision") {
            if ["reject", "separate"].contains(v) { s.emailCollision = v } else { r.fail("email_collision", "Must be reject or separate.") }
        }
        if let v = r.int("password_min_length", 8...128) { s.passwordMinLength = v }
        if let v = r.stringArray("allowed_origins", maxCount: 100) {
            for (i, origin) in v.enumerated() where !isOrigin(origin) {
                r.fail(path: "allowed_origins[\(i)]", "Must be an origin: scheme://host[:port], no path.")
            }
            s.allowedOrigins = uniqued(v.map { $0.lowercased() })
        }
        if let v = r.stringArray("redirect_uris", maxCount: 100, maxLength: 2048) {
            for (i, uri) in v.enumerated() where !isRedirectURI(uri) {
                r.fail(path: "redirect_uris[\(i)]", "Must be an https URL (http only for localhost) or an app scheme with a dot, without a fragment.")
            }
            s.redirectURIs = uniqued(v)
        }
        if let v = r.raw("refresh_cookie") {
            switch v {
            case .bool(let on): s.refreshCookie = on ? .alongside : .off
            case .string("only"): s.refreshCookie = .only
            default: r.fail("refresh_cookie", "Must be false, true or \"only\".")
            }
        }
        if let v = r.bool("require_pkce") { s.requirePKCE = v }
        if let v = r.string("signing_algorithm") {
            if let alg = SignatureAlgorithm(rawValue: v) { s.signingAlgorithm = alg } else { r.fail("signing_algorithm", "Must be RS256 or ES256.") }
        }

        if let files = r.raw("files") {
            var f = FieldReader(files, path: "files")
            if let v = f.int("max_bytes", 1024...Files.maxBytesCeiling) { s.files.maxBytes = v }
            if let v = f.stringArray("photo_types", maxCount: 4) {
                for t in v where !Files.allPhotoTypes.contains(t) {
                    f.fail("photo_types", "Unknown type \(t); use \(Files.allPhotoTypes.joined(separator: ", ")).")
                }
                s.files.photoTypes = uniqued(v)
            }
            let caps = PlatformCaps.current
            if let v = f.int("max_files_per_user", 1...ceiling(caps.filesPerUser, source)) { s.files.maxFilesPerUser = min(v, caps.filesPerUser) }
            if let v = f.int("max_bytes_per_user", 1024...ceiling(caps.bytesPerUser, source)) { s.files.maxBytesPerUser = min(v, caps.bytesPerUser) }
            if let v = f.stringArray("public_types", maxCount: 4) {
                for t in v where !Files.allPhotoTypes.contains(t) {
                    f.fail("public_types", "Unknown type \(t); use \(Files.allPhotoTypes.joined(separator: ", ")).")
                }
                s.files.publicTypes = uniqued(v)
            }
            f.rejectUnknown()
            r.absorb(f.errors)
        }
        if let limits = r.raw("rate_limits") {
            var f = FieldReader(limits, path: "rate_limits")
            // Stored before the ceiling (up to 10000): still read, as the ceiling, so that such an
            // app keeps working and its admin can still change it.
            let storedCeiling: Int64 = if case .storage = source { 10000 } else { RateLimits.maxPerMinutePerIP }
            if let v = f.int("auth_per_minute_per_ip", 1...storedCeiling) { s.rateLimits.authPerMinutePerIP = min(v, RateLimits.maxPerMinutePerIP) }
            if let v = f.int("web_flow_per_minute_per_ip", 1...RateLimits.maxPerMinutePerIP) { s.rateLimits.webFlowPerMinutePerIP = v }
            if let v = f.int("mail_per_hour", 1...RateLimits.mailPerHourCeiling) { s.rateLimits.mailPerHour = v }
            let uploadCeiling = PlatformCaps.current.uploadsPerHourPerUser
            if let v = f.int("uploads_per_hour_per_user", 1...ceiling(uploadCeiling, source)) { s.rateLimits.uploadsPerHourPerUser = min(v, uploadCeiling) }
            f.rejectUnknown()
            r.absorb(f.errors)
        }
        if let apple = r.raw("apple") {
            var f = FieldReader(apple, path: "apple")
            if let v = f.stringArray("client_ids", maxCount: 50, maxLength: 255) {
                for id in v where !isClientID(id) { f.fail("client_ids", "\(id) is not a valid client id.") }
                s.apple.clientIDs = uniqued(v)
            }
            if let v = f.string("services_id", maxLength: 255) {
                if isClientID(v) { s.apple.servicesID = v } else { f.fail("services_id", "Not a valid Services ID.") }
            }
            for (key, keyPath) in [("team_id", \Apple.teamID), ("key_id", \Apple.keyID)] {
                guard let v = f.string(key, maxLength: 10) else { continue }
                if v.utf8.count == 10, v.utf8.allSatisfy({ isUpperAlnum($0) }) { s.apple[keyPath: keyPath] = v } else {
                    f.fail(key, "Must be 10 uppercase letters or digits, as Apple shows it.")
                }
            }
            s.apple.privateKey = secret(&f, "private_key", source: source, current: current?.apple.privateKey)
            if let pem = s.apple.privateKey, (try? SigningKey(pem: pem, algorithm: .es256)) == nil {
                f.fail("private_key", "Must be the .p8 key Apple gave you (PKCS#8 PEM, P-256).")
            }
            if let v = f.bool("require_nonce") { s.apple.requireNonce = v }
            f.rejectUnknown()
            r.absorb(f.errors)
        }
        if let google = r.raw("google") {
            var f = FieldReader(google, path: "google")
            if let v = f.stringArray("client_ids", maxCount: 50, maxLength: 255) {
                for id in v where !isClientID(id) { f.fail("client_ids", "\(id) is not a valid client id.") }
                s.google.clientIDs = uniqued(v)
            }
            f.rejectUnknown()
            r.absorb(f.errors)
        }
        if let firebase = r.raw("firebase") {
            var f = FieldReader(firebase, path: "firebase")
            if let v = f.string("project_id", maxLength: 30) {
                if isFirebaseProjectID(v) { s.firebase.projectID = v } else { f.fail("project_id", "Must be a Firebase project id (6–30 lowercase letters, digits, hyphens).") }
            }
            f.rejectUnknown()
            r.absorb(f.errors)
        }
        if let email = r.raw("email") {
            var f = FieldReader(email, path: "email")
            if let v = f.string("smtp_url", maxLength: 512) {
                if let c = URLComponents(string: v), ["smtp", "smtps"].contains(c.scheme ?? ""), c.host?.isEmpty == false, c.user == nil, c.password == nil {
                    s.email.smtpURL = v
                } else {
                    f.fail("smtp_url", "Must be smtp://host[:port] or smtps://host[:port], without credentials.")
                }
            }
            if let v = f.string("smtp_username", maxLength: 255) { s.email.smtpUsername = v }
            s.email.smtpPassword = secret(&f, "smtp_password", source: source, current: current?.email.smtpPassword, allowFile: false)
            if let v = f.string("from", maxLength: 320) {
                // Stored by an earlier version under a looser rule: kept (the mailer dead-letters
                // what it cannot write), so the app still loads; the next save must fix it.
                if Self.isSenderMailbox(v) || storedBefore { s.email.from = v } else { f.fail("from", "Must be an ASCII address, optionally after a display name: Name <no-reply@example.com>.") }
            }
            if let v = f.string("locale") {
                if ["en", "ko"].contains(v) { s.email.locale = v } else { f.fail("locale", "Must be en or ko.") }
            }
            f.rejectUnknown()
            r.absorb(f.errors)
        }
        if let hooks = r.raw("webhooks") {
            if case .array(let items) = hooks, items.count <= 10 {
                for (i, item) in items.enumerated() {
                    if let hook = webhook(item, path: "webhooks[\(i)]", source: source, current: current, storedBefore: storedBefore, allowPrivateOutbound: allowPrivateOutbound, into: &r) {
                        s.webhooks.append(hook)
                    }
                }
            } else {
                r.fail("webhooks", "Must be an array of at most 10 webhooks.")
            }
        }
        r.rejectUnknown()
        if !r.errors.isEmpty { throw .validation(r.errors) }
        return s
    }

    /// One webhook (API.md, "Webhooks"): an `https` URL (`http`, `localhost` and private address
    /// literals only under `allowPrivateOutbound`; a host name that resolves to a private address is
    /// refused at delivery), a `whsec_` secret of 24–64 random bytes, and a non-empty list of types
    /// of the webhook catalogue. A webhook stored by an earlier version under looser rules (any
    /// secret of 16 characters, `events` absent or `*`, other audit types) still loads; the next
    /// save must mend it.
    private static func webhook(
        _ item: JSON, path: String, source: SettingsSource, current: AppSettings?, storedBefore: Bool, allowPrivateOutbound: Bool,
        into r: inout FieldReader
    ) -> Webhook? {
        var f = FieldReader(item, path: path)
        let url = f.string("url", maxLength: 2048)
        // A URL stored by an earlier version (`http` to localhost) stays; the delivery checks the address.
        if url.map({ storedBefore || isWebhookURL($0, allowPrivate: allowPrivateOutbound) }) != true {
            f.fail("url", allowPrivateOutbound
                ? "Required: an http or https URL without credentials or fragment."
                : "Required: an https URL without credentials or fragment, to a public address.")
        }
        let currentSecret = current?.webhooks.first(where: { $0.url == url })?.secret
        let secretValue = secret(&f, "secret", source: source, current: currentSecret, allowFile: false)
        if secretValue == nil {
            if !f.errors.contains(where: { $0.field == f.field("secret") }) { f.fail("secret", "Required: whsec_ and the base64 of 24 to 64 random bytes.") }
        } else if !storedBefore, Webhook.key(ofSecret: secretValue!) == nil {
            f.fail("secret", "Must be whsec_ and the base64 of 24 to 64 random bytes.")
        }
        var events: [String] = ["*"]
        if let given = f.stringArray("events", maxCount: 50) {
            events = given
            // An earlier version accepted `*` and audit types outside the webhook catalogue: a
            // stored list keeps them (`*` is every type), so the app still loads.
            if given.isEmpty && !storedBefore { f.fail("events", "Name at least one event type.") }
            for e in given where !webhookEvents.contains(e) && !storedBefore {
                f.fail("events", "Unknown event type \(e); use any of \(webhookEvents.joined(separator: ", ")).")
            }
        } else if !storedBefore && !f.errors.contains(where: { $0.field == f.field("events") }) {
            f.fail("events", "Required: a non-empty list of event types.")
        }
        // The replaced secret and when: stored only, sealed (an admin or a tenant file cannot set them).
        var previousSecret: String?
        var replacedAt: Int64?
        if case .storage = source {
            previousSecret = secret(&f, "previous_secret", source: source, current: nil)
            replacedAt = f.int("secret_replaced_at", 0...Int64.max)
        }
        f.rejectUnknown()
        r.absorb(f.errors)
        guard f.errors.isEmpty, let url, let secretValue else { return nil }
        return Webhook(url: url, secret: secretValue, events: uniqued(events), previousSecret: previousSecret, secretReplacedAt: replacedAt)
    }

    /// Reads a secret field according to the source's rules.
    private static func secret(_ f: inout FieldReader, _ key: String, source: SettingsSource, current: String?, allowFile: Bool = true) -> String? {
        switch source {
        case .admin:
            // Named at all, even as null: admin settings have no such fields.
            for suffix in ["_file", "_env"] where f.isPresent(key + suffix) {
                _ = f.raw(key + suffix)
                f.fail(key + suffix, "Only files under Tenants/ may read secrets from files or the environment.")
            }
            guard let v = f.raw(key) else { return nil }
            if case .object(let o) = v, o == ["set": .bool(true)] {
                if current == nil { f.fail(key, "No value is set to keep; send the secret itself.") }
                return current
            }
            guard case .string(let s) = v, !s.isEmpty, s.utf8.count <= 16384 else {
                f.fail(key, "Must be a non-empty string (or {\"set\": true} to keep the current value).")
                return nil
            }
            return s
        case .tenantFile(let directory, let environment):
            let fileKey = key + "_file", envKey = key + "_env"
            let given = [key, fileKey, envKey].filter { f.has($0) }
            if given.count > 1 {
                for k in given { _ = f.raw(k) }
                f.fail(key, "Give only one of \(given.joined(separator: ", ")).")
                return nil
            }
            if allowFile, let name = f.string(fileKey) {
                let path = name.hasPrefix("/") ? name : (directory as NSString).appendingPathComponent(name)
                guard let text = try? String(contentsOfFile: path, encoding: .utf8), !text.isEmpty else {
                    f.fail(fileKey, "Cannot read \(name).")
                    return nil
                }
                return text
            } else if !allowFile, f.has(fileKey) {
                _ = f.raw(fileKey)
                f.fail(fileKey, "Not supported for this field; use \(envKey).")
                return nil
            }
            if let name = f.string(envKey, maxLength: 255) {
                guard let text = environment[name], !text.isEmpty else {
                    f.fail(envKey, "The environment variable \(name) is not set.")
                    return nil
                }
                return text
            }
            guard let v = f.raw(key) else { return nil }
            guard case .string(let s) = v, !s.isEmpty else { f.fail(key, "Must be a non-empty string."); return nil }
            return s
        case .storage(let unseal):
            guard let v = f.raw(key) else { return nil }
            guard case .object(let o) = v, case .string(let sealed)? = o["sealed"] else { f.fail(key, "Stored secret is not sealed."); return nil }
            do { return try unseal(sealed, f.field(key)) } catch {
                f.fail(key, "Stored secret cannot be opened with this master key.")
                return nil
            }
        }
    }

    /// The settings as JSON, with secrets rendered as asked.
    public func json(secrets: SecretRendering) -> JSON {
        func secret(_ value: String?, _ field: String) -> JSON {
            guard let value else { return .null }
            switch secrets {
            case .redacted: return ["set": true]
            case .plain: return .string(value)
            case .sealed(let seal): return ["sealed": .string(seal(value, field))]
            }
        }
        func strings(_ a: [String]) -> JSON { .array(a.map(JSON.string)) }
        return [
            "name": .string(name),
            "allow_signup": .bool(allowSignup),
            "sign_in_methods": strings(signInMethods.map(\.rawValue)),
            "require_verified_email": .bool(requireVerifiedEmail),
            "recent_login_seconds": .int(recentLoginSeconds),
            "access_token_ttl_seconds": .int(accessTokenTTLSeconds),
            "refresh_token_ttl_seconds": .int(refreshTokenTTLSeconds),
            "refresh_token_idle_seconds": refreshTokenIdleSeconds.map(JSON.int) ?? .null,
            "deletion_grace_days": .int(deletionGraceDays),
            "email_collision": .string(emailCollision),
            "password_min_length": .int(passwordMinLength),
            "allowed_origins": strings(allowedOrigins),
            "redirect_uris": strings(redirectURIs),
            "refresh_cookie": refreshCookie == .only ? "only" : .bool(refreshCookie == .alongside),
            "require_pkce": .bool(requirePKCE),
            "signing_algorithm": .string(signingAlgorithm.rawValue),
            "files": [
                "max_bytes": .int(files.maxBytes), "photo_types": strings(files.photoTypes), "max_files_per_user": .int(files.maxFilesPerUser),
                "max_bytes_per_user": .int(files.maxBytesPerUser), "public_types": strings(files.publicTypes),
            ],
            "rate_limits": [
                "auth_per_minute_per_ip": .int(rateLimits.authPerMinutePerIP), "web_flow_per_minute_per_ip": .int(rateLimits.webFlowPerMinutePerIP),
                "mail_per_hour": .int(rateLimits.mailPerHour),
                "uploads_per_hour_per_user": .int(rateLimits.uploadsPerHourPerUser),
            ],
            "apple": [
                "client_ids": strings(apple.clientIDs), "services_id": .optional(apple.servicesID), "team_id": .optional(apple.teamID),
                "key_id": .optional(apple.keyID), "private_key": secret(apple.privateKey, "apple.private_key"),
                "require_nonce": .bool(apple.requireNonce),
            ],
            "google": ["client_ids": strings(google.clientIDs)],
            "firebase": ["project_id": .optional(firebase.projectID)],
            "email": [
                "smtp_url": .optional(email.smtpURL), "smtp_username": .optional(email.smtpUsername),
                "smtp_password": secret(email.smtpPassword, "email.smtp_password"), "from": .optional(email.from),
                "locale": .string(email.locale),
            ],
            "webhooks": .array(
                webhooks.enumerated().map { i, w in
                    var hook: JSON = ["url": .string(w.url), "secret": secret(w.secret, "webhooks[\(i)].secret"), "events": strings(w.events)]
                    // The replaced secret goes to the database only: admins never see it, and a
                    // merge patch applied to the plain form would refuse it as unknown.
                    if case .sealed = secrets, let previous = w.previousSecret, let at = w.secretReplacedAt, case .object(var o) = hook {
                        o["previous_secret"] = secret(previous, "webhooks[\(i)].previous_secret")
                        o["secret_replaced_at"] = .int(at)
                        hook = .object(o)
                    }
                    return hook
                }),
        ]
    }
}

// MARK: - Field rules

/// The highest value a cap may be given: the platform's ceiling, but any value for one read from
/// storage (saved under a higher ceiling; the caller lowers it to the ceiling).
private func ceiling(_ platform: Int64, _ source: SettingsSource) -> Int64 {
    if case .storage = source { return Int64.max }
    return platform
}

private func uniqued(_ values: [String]) -> [String] {
    var seen = Set<String>()
    return values.filter { seen.insert($0).inserted }
}

private func isUpperAlnum(_ c: UInt8) -> Bool { (c >= 65 && c <= 90) || (c >= 48 && c <= 57) }

/// Apple bundle/Services ids and Google OAuth client ids: printable ASCII without spaces.
private func isClientID(_ s: String) -> Bool {
    !s.isEmpty && s.utf8.count <= 255 && s.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
}

private func isFirebaseProjectID(_ s: String) -> Bool {
    let u = Array(s.utf8)
    guard (6...30).contains(u.count), (97...122).contains(u[0]) else { return false }
    return u.allSatisfy { (97...122).contains($0) || (48...57).contains($0) || $0 == 45 }
}

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

private func isWebhookURL(_ s: String, allowPrivate: Bool) -> Bool {
    guard let c = URLComponents(string: s), let scheme = c.scheme?.lowercased(), let host = c.host?.lowercased(), !host.isEmpty,
        c.user == nil, c.password == nil, c.fragment == nil
    else { return false }
    if allowPrivate { return scheme == "https" || scheme == "http" }
    return scheme == "https" && !isPrivateHostLiteral(host)
}

/// `localhost` or an IP literal outside global unicast. A cheap check when settings are saved
/// (no DNS): the delivery checks every address a host name resolves to.
private func isPrivateHostLiteral(_ host: String) -> Bool {
    let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    if bare == "localhost" || bare.hasSuffix(".localhost") { return true }
    guard IPRange.parseAddress(bare) != nil else { return false }
    return nonGlobalRanges.contains { $0.contains(bare) }
}

private let nonGlobalRanges: [IPRange] = [
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16", "224.0.0.0/3",
    "::/127", "fc00::/7", "fe80::/10", "ff00::/8",
].compactMap(IPRange.init)
