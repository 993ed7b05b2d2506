import Foundation

/// The password of a connection URL, kept only to remove it from error messages.
struct Secret: Sendable {
    private let password: String?

    init(url: String) {
        password = Self.password(in: url)
    }

    func scrub(_ message: String) -> String {
        guard let password, !password.isEmpty else { return message }
        var result = message.replacingOccurrences(of: password, with: "***")
        if let decoded = password.removingPercentEncoding, !decoded.isEmpty {
            result = result.replacingOccurrences(of: decoded, with: "***")
        }
        return result
    }

    /// `postgres://user:PASSWORD@host/db` or `… password=PASSWORD …`.
    private static func password(in url: String) -> String? {
        if let scheme = url.range(of: "://") {
            let rest = url[scheme.upperBound...]
            let authority = rest.prefix { $0 != "/" && $0 != "?" }
            if let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") {
                return String(authority[authority.index(after: colon)..<at])
            }
            if let query = rest.firstIndex(of: "?") {
                for pair in rest[rest.index(after: query)...].split(separator: "&") where pair.hasPrefix("password=") {
                    return String(pair.dropFirst("password=".count))
                }
            }
            return nil
        }
        for pair in url.split(separator: " ") where pair.hasPrefix("password=") {
            return String(pair.dropFirst("password=".count)).trimmingCharacters(in: CharacterSet(charactersIn: "'"))
        }
        return nil
    }
}
