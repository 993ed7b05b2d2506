import Foundation

extension AppSettings {
    /// The `email` section: the app's own SMTP server, if any, and how its mail is written.
    public struct Email: Sendable, Equatable {
        public var smtpURL: String?
        public var smtpUsername: String?
        /// Secret.
        public var smtpPassword: String?
        public var from: String?
        /// The language of the app's mail when its user has no `locale` of their own (a tag that has
        /// templates, built-in or the app's); nil: the request's `Accept-Language`, else `en`.
        public var locale: String?
        /// The app's own templates, by purpose and locale (``AppMailTemplate``).
        public var templates: [EmailToSend.Template: [String: AppMailTemplate]] = [:]
    }
}

extension AppSettings.Email {
    static func decode(_ f: inout FieldReader, _ context: SettingsDecoding) -> Self {
        var email = Self()
        if let v = f.string("smtp_url", maxLength: 512) {
            if let c = URLComponents(string: v), ["smtp", "smtps"].contains(c.scheme ?? ""), c.host?.isEmpty == false, c.user == nil, c.password == nil {
                email.smtpURL = v
            } else {
                f.fail("smtp_url", "Must be smtp://host[:port] or smtps://host[:port], without credentials.")
            }
        }
        if let v = f.string("smtp_username", maxLength: 255) { email.smtpUsername = v }
        // The stored password is kept (`{"set": true}`) only for the same server (host and port):
        // else the password, which no read shows, could be sent to a server the writer chose.
        let current = context.current?.email
        let sameServer = Self.server(of: current?.smtpURL) == Self.server(of: email.smtpURL)
        if !sameServer, current?.smtpPassword != nil, f.peek("smtp_password") == ["set": true] {
            _ = f.raw("smtp_password")
            f.fail(
                "smtp_password",
                "Send the password again (or null): smtp_url now names another server than the one it was stored for, and a stored password is not sent to another server.")
        } else {
            email.smtpPassword = context.secret(&f, "smtp_password", current: sameServer ? current?.smtpPassword : nil, allowFile: false)
        }
        if let v = f.string("from", maxLength: 320) {
            // Stored by an earlier version under a looser rule: kept (the mailer dead-letters
            // what it cannot write), so the app still loads; the next save must fix it.
            if AppSettings.isSenderMailbox(v) || context.storedBefore { email.from = v } else { f.fail("from", "Must be an ASCII address, optionally after a display name: Name <no-reply@example.com>.") }
        }
        email.templates = decodeTemplates(&f)
        if let v = f.string("locale", maxLength: 64) {
            // A language the app has mail for, built in or its own (`ko-KR` finds `ko`).
            let available = Set(EmailToSend.builtInLocales + email.templates.values.flatMap(\.keys))
            if let tag = LanguageTag(v), LanguageTag.lookup([tag], in: available) != nil {
                email.locale = tag.rawValue
            } else {
                f.fail("locale", "Must be a language tag with templates: \(EmailToSend.builtInLocales.joined(separator: ", ")) or a locale of email.templates.")
            }
        }
        return email
    }

    /// A patch applies to the stored settings with their secrets in the clear: one that sets
    /// `email.smtp_url` without naming `email.smtp_password` would carry the stored password along
    /// as if it had been sent. It reaches the decoder as "keep" (`{"set": true}`) instead, which
    /// holds only for the same server.
    static func keepingPasswordOnlyAsNamed(_ merged: JSON, patch: [String: JSON]) -> JSON {
        guard case .object(let email)? = patch["email"], email["smtp_url"] != nil, email["smtp_password"] == nil,
            case .object(var settings) = merged, case .object(var mergedEmail)? = settings["email"], case .string? = mergedEmail["smtp_password"]
        else { return merged }
        mergedEmail["smtp_password"] = ["set": true]
        settings["email"] = .object(mergedEmail)
        return .object(settings)
    }

    /// The host (lowercased) and port (else the scheme's) an `smtp_url` names.
    static func server(of url: String?) -> String? {
        guard let url, let c = URLComponents(string: url), let host = c.host?.lowercased(), !host.isEmpty else { return nil }
        return "\(host):\(c.port ?? (c.scheme == "smtps" ? 465 : 25))"
    }

    func json(secrets: SecretRendering) -> JSON {
        [
            "smtp_url": .optional(smtpURL), "smtp_username": .optional(smtpUsername),
            "smtp_password": secrets.render(smtpPassword, "email.smtp_password"), "from": .optional(from),
            "locale": .optional(locale), "templates": Self.templatesJSON(templates),
        ]
    }
}

extension AppSettings {
    /// `Name <a@b.example>` or `a@b.example`, the address ASCII without spaces (a sender goes to
    /// every server, SMTPUTF8 or not; only recipients may be outside ASCII): checked when saved, so
    /// a `from` the mailer would refuse never gets stored to dead-letter every mail of the app.
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
}
