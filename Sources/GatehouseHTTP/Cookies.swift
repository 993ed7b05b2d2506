/// Parsing of the `Cookie` request header.
public enum Cookies {
    /// The cookies in a `Cookie` header (`a=1; b=2`) by name. The first occurrence of a name
    /// wins; pairs without `=` or with an empty name are skipped; values in double quotes
    /// are unquoted. Values are not percent-decoded.
    public static func parse(_ header: String?) -> [String: String] {
        guard let header else { return [:] }
        var cookies: [String: String] = [:]
        for pair in header.split(separator: ";", omittingEmptySubsequences: true) {
            guard let equals = pair.firstIndex(of: "=") else { continue }
            let name = pair[..<equals].trimmingASCIIWhitespace()
            var value = pair[pair.index(after: equals)...].trimmingASCIIWhitespace()
            guard !name.isEmpty else { continue }
            if value.count >= 2, value.first == "\"", value.last == "\"" {
                value = value.dropFirst().dropLast()
            }
            if cookies[String(name)] == nil {
                cookies[String(name)] = String(value)
            }
        }
        return cookies
    }
}

extension Substring {
    fileprivate func trimmingASCIIWhitespace() -> Substring {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let start = firstIndex(where: { !isSpace($0) }) else { return self[endIndex...] }
        let end = lastIndex(where: { !isSpace($0) })!
        return self[start...end]
    }
}
