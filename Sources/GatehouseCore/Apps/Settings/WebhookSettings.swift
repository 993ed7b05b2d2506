import Foundation

extension AppSettings {
    /// One of the `webhooks`.
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
}

extension AppSettings {
    /// The event types a webhook may name.
    public static let webhookEvents = EventType.webhookCatalogue.map(\.rawValue)
}

extension AppSettings.Webhook {
    /// The `webhooks` array of `r`'s object: at most 10, each decoded with a reader of its own
    /// whose problems join `r`'s. Empty when absent.
    static func decodeList(_ r: inout FieldReader, _ context: SettingsDecoding) -> [Self] {
        guard let hooks = r.raw("webhooks") else { return [] }
        guard case .array(let items) = hooks, items.count <= 10 else {
            r.fail("webhooks", "Must be an array of at most 10 webhooks.")
            return []
        }
        var webhooks: [Self] = []
        for (i, item) in items.enumerated() {
            var f = FieldReader(item, path: "webhooks[\(i)]")
            let hook = decode(&f, context)
            r.absorb(f.errors)
            if let hook { webhooks.append(hook) }
        }
        return webhooks
    }

    /// One webhook (API.md, "Webhooks"): an `https` URL (`http`, `localhost` and private address
    /// literals only under `allowPrivateOutbound`; a host name that resolves to a private address is
    /// refused at delivery), a `whsec_` secret of 24–64 random bytes, and a non-empty list of types
    /// of the webhook catalogue. A webhook stored by an earlier version under looser rules (any
    /// secret of 16 characters, `events` absent or `*`, other audit types) still loads; the next
    /// save must mend it. Nil when it has a problem (in `f`, unknown fields included).
    private static func decode(_ f: inout FieldReader, _ context: SettingsDecoding) -> Self? {
        let storedBefore = context.storedBefore, allowPrivateOutbound = context.allowPrivateOutbound
        let url = f.string("url", maxLength: 2048)
        // A URL stored by an earlier version (`http` to localhost) stays; the delivery checks the address.
        if url.map({ storedBefore || isWebhookURL($0, allowPrivate: allowPrivateOutbound) }) != true {
            f.fail("url", allowPrivateOutbound
                ? "Required: an http or https URL without credentials or fragment."
                : "Required: an https URL without credentials or fragment, to a public address.")
        }
        let currentSecret = context.current?.webhooks.first(where: { $0.url == url })?.secret
        let secretValue = context.secret(&f, "secret", current: currentSecret, allowFile: false)
        if secretValue == nil {
            if !f.errors.contains(where: { $0.field == f.field("secret") }) { f.fail("secret", "Required: whsec_ and the base64 of 24 to 64 random bytes.") }
        } else if !storedBefore, key(ofSecret: secretValue!) == nil {
            f.fail("secret", "Must be whsec_ and the base64 of 24 to 64 random bytes.")
        }
        var events: [String] = ["*"]
        if let given = f.stringArray("events", maxCount: 50) {
            events = given
            // An earlier version accepted `*` and audit types outside the webhook catalogue: a
            // stored list keeps them (`*` is every type), so the app still loads.
            if given.isEmpty && !storedBefore { f.fail("events", "Name at least one event type.") }
            for e in given where !AppSettings.webhookEvents.contains(e) && !storedBefore {
                f.fail("events", "Unknown event type \(e); use any of \(AppSettings.webhookEvents.joined(separator: ", ")).")
            }
        } else if !storedBefore && !f.errors.contains(where: { $0.field == f.field("events") }) {
            f.fail("events", "Required: a non-empty list of event types.")
        }
        // The replaced secret and when: stored only, sealed (an admin or a tenant file cannot set them).
        var previousSecret: String?
        var replacedAt: Int64?
        if storedBefore {
            previousSecret = context.secret(&f, "previous_secret", current: nil)
            replacedAt = f.int("secret_replaced_at", 0...Int64.max)
        }
        f.rejectUnknown()
        guard f.errors.isEmpty, let url, let secretValue else { return nil }
        return Self(url: url, secret: secretValue, events: uniqued(events), previousSecret: previousSecret, secretReplacedAt: replacedAt)
    }

    /// The webhook as JSON (`index`: its place in the list, naming its secrets for the seal).
    func json(at index: Int, secrets: SecretRendering) -> JSON {
        var hook: JSON = ["url": .string(url), "secret": secrets.render(secret, "webhooks[\(index)].secret"), "events": .strings(events)]
        // The replaced secret goes to the database only: admins never see it, and a
        // merge patch applied to the plain form would refuse it as unknown.
        if case .sealed = secrets, let previousSecret, let secretReplacedAt, case .object(var o) = hook {
            o["previous_secret"] = secrets.render(previousSecret, "webhooks[\(index)].previous_secret")
            o["secret_replaced_at"] = .int(secretReplacedAt)
            hook = .object(o)
        }
        return hook
    }
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
