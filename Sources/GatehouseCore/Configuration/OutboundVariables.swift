import Foundation

extension Configuration {
    /// The platform's mailer: `GATEHOUSE_SMTP_URL` and `GATEHOUSE_SMTP_FROM`.
    mutating func readMail(_ e: inout EnvironmentReader) {
        if let smtp = e.value("GATEHOUSE_SMTP_URL") {
            if smtp == "log:" || smtp.hasPrefix("smtp://") || smtp.hasPrefix("smtps://") {
                smtpURL = smtp
            } else {
                e.problems.append("GATEHOUSE_SMTP_URL must be log:, smtp://… or smtps://….")
            }
        } else if publicURL.lowercased().hasPrefix("https://") {
            // The default prints every mail, codes included, to the log: fine on a laptop, not
            // behind a real https address unless the operator says so.
            e.problems.append(
                "GATEHOUSE_SMTP_URL is required when GATEHOUSE_PUBLIC_URL is https: the default, log:, writes every mail (sign-in codes included) to the log. Set smtp://… or smtps://…, or GATEHOUSE_SMTP_URL=log: to print mail on purpose.")
        }
        if let from = e.value("GATEHOUSE_SMTP_FROM") {
            if isMailAddress(from) {
                smtpFrom = from
            } else {
                e.problems.append("GATEHOUSE_SMTP_FROM must be an address such as no-reply@auth.example.com (ASCII, one @, no name or spaces).")
            }
        }
    }

    /// What the server may reach and trust on the network: private addresses for tenants' URLs,
    /// the proxies whose `X-Forwarded-For` counts, the identity providers' URLs.
    mutating func readOutbound(_ e: inout EnvironmentReader) {
        if let allow = e.value("GATEHOUSE_ALLOW_PRIVATE_OUTBOUND") {
            switch allow {
            case "true": allowPrivateOutbound = true
            case "false": allowPrivateOutbound = false
            default: e.problems.append("GATEHOUSE_ALLOW_PRIVATE_OUTBOUND must be true or false.")
            }
        }
        if let proxies = e.value("GATEHOUSE_TRUSTED_PROXIES") {
            let list = proxies.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            for entry in list where IPRange(entry) == nil {
                e.problems.append("GATEHOUSE_TRUSTED_PROXIES: \(entry) is not an IP address or CIDR range.")
            }
            trustedProxies = list
        }
        for (name, keyPath) in [
            ("GATEHOUSE_APPLE_URL", \Configuration.appleURL), ("GATEHOUSE_GOOGLE_JWKS_URL", \.googleJWKSURL),
            ("GATEHOUSE_FIREBASE_JWKS_URL", \.firebaseJWKSURL),
        ] {
            guard let url = e.value(name) else { continue }
            if let parsed = URLComponents(string: url), ["http", "https"].contains(parsed.scheme ?? ""), parsed.host?.isEmpty == false {
                self[keyPath: keyPath] = url.hasSuffix("/") ? String(url.dropLast()) : url
            } else {
                e.problems.append("\(name) must be an absolute http(s) URL.")
            }
        }
        for (name, kind) in [
            ("GATEHOUSE_PROVIDER_URL_KAKAO", "kakao"), ("GATEHOUSE_PROVIDER_URL_LINE", "line"), ("GATEHOUSE_PROVIDER_URL_MICROSOFT", "microsoft"),
            ("GATEHOUSE_PROVIDER_URL_NAVER", "naver"), ("GATEHOUSE_PROVIDER_URL_GITHUB", "github"),
            ("GATEHOUSE_PROVIDER_URL_NAVER_AUTH", "naver_auth"), ("GATEHOUSE_PROVIDER_URL_GITHUB_AUTH", "github_auth"),
        ] {
            guard let url = e.value(name) else { continue }
            if let parsed = URLComponents(string: url), ["http", "https"].contains(parsed.scheme ?? ""), parsed.host?.isEmpty == false {
                providerURLs[kind] = url.hasSuffix("/") ? String(url.dropLast()) : url
            } else {
                e.problems.append("\(name) must be an absolute http(s) URL.")
            }
        }
    }
}

/// A bare ASCII mail address: one `@`, both sides non-empty, no space, control character or
/// the characters that delimit addresses.
func isMailAddress(_ text: String) -> Bool {
    let bytes = Array(text.utf8)
    let specials = Set("<>()[],;:\\\"".utf8)
    guard bytes.count <= 254, bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F && !specials.contains($0) }) else { return false }
    let parts = text.split(separator: "@", omittingEmptySubsequences: false)
    return parts.count == 2 && !parts[0].isEmpty && !parts[1].isEmpty
}
