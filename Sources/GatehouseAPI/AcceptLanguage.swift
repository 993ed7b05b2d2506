import Foundation
import GatehouseCore

/// The `Accept-Language` header (RFC 9110, 12.5.4): the client's languages, best first.
enum AcceptLanguage {
    /// Ranges past this many are ignored: no client needs more, and a long header costs nothing then.
    static let maxRanges = 20

    /// The header's language tags by weight (`q`, 1 when absent), the header's order among equal
    /// weights. A range with `q=0` ("not this one"), the wildcard `*`, a malformed tag or `q` is
    /// left out; nil or an empty header is no preference.
    static func languages(_ header: String?) -> [LanguageTag] {
        guard let header, !header.isEmpty else { return [] }
        var ranked: [(tag: LanguageTag, weight: Int, index: Int)] = []
        var seen = Set<LanguageTag>()
        for (index, element) in header.split(separator: ",").prefix(maxRanges).enumerated() {
            let parts = element.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
            guard let range = parts.first, range != "*", let tag = LanguageTag(range) else { continue }
            var weight = 1000
            for parameter in parts.dropFirst() {
                let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                guard pair.count == 2, pair[0].lowercased() == "q" else { continue }
                guard let q = quality(pair[1]) else { weight = 0; break }
                weight = q
            }
            if weight > 0, seen.insert(tag).inserted { ranked.append((tag, weight, index)) }
        }
        return ranked.sorted { ($0.weight, -$0.index) > ($1.weight, -$1.index) }.map(\.tag)
    }

    /// A `qvalue` (`0`, `0.8`, `1.000`) in thousandths; nil when it is not one.
    static func quality(_ text: String) -> Int? {
        let parts = text.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let whole = parts.first, whole == "0" || whole == "1" else { return nil }
        var digits = parts.count == 2 ? Array(parts[1]) : []
        guard digits.count <= 3, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber) else { return nil }
        while digits.count < 3 { digits.append("0") }
        let value = (whole == "1" ? 1000 : 0) + Int(String(digits))!
        return value <= 1000 ? value : nil
    }
}

extension Request {
    /// The origin of a request that may mail: with its client's languages (``AcceptLanguage``),
    /// read only on the routes that mail, not on every refresh.
    var mailOrigin: RequestOrigin {
        var origin = origin
        origin.languages = AcceptLanguage.languages(header("Accept-Language"))
        return origin
    }
}
