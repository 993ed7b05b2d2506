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
        // A password with an unencoded `/`, `@` or `:` is split by libpq's URL parser, which may
        // then quote a piece of it as a port, host or database name.
        for piece in password.split(whereSeparator: { "/@:?#".contains($0) }) where piece.count >= 3 {
            result = result.replacingOccurrences(of: piece, with: "***")
        }
        return result
    }

    /// `postgres://user:PASSWORD@host/db` or `… password=PASSWORD …`.
    private static func password(in url: String) -> String? {
        if let scheme = url.range(of: "://") {
            let rest = url[scheme.upperBound...]
            // Up to the last `@` before any query: the password may hold an unencoded `/` or `@`.
            let beforeQuery = rest.prefix { $0 != "?" }
            if let at = beforeQuery.lastIndex(of: "@"), let colon = beforeQuery[..<at].firstIndex(of: ":") {
                return String(beforeQuery[beforeQuery.index(after: colon)..<at])
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
