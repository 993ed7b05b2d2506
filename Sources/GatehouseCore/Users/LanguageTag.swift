import Foundation

/// A BCP 47 language tag (RFC 5646) as Gatehouse keeps it: a user's `locale`, an app's
/// `email.locale`, the locales of its mail templates. Well-formed (subtags of letters and digits
/// joined by `-`, a language of 2 to 8 letters first, at most 35 characters) and written in the
/// RFC's conventional case, so `KO-kr` and `ko-KR` are one tag. Whether a language exists is not
/// checked: a tag nobody has templates for simply falls back (``lookupChain``).
public struct LanguageTag: Hashable, Sendable, CustomStringConvertible {
    /// The tag in its conventional case: `ja`, `ko-KR`, `zh-Hant-TW`.
    public let rawValue: String

    public static let maxLength = 35

    /// Nil when `raw` is not a well-formed tag.
    public init?(_ raw: String) {
        guard !raw.isEmpty, raw.utf8.count <= Self.maxLength,
            raw.utf8.allSatisfy({ $0 == UInt8(ascii: "-") || Self.isAlphanumeric($0) })
        else { return nil }
        let subtags = raw.split(separator: "-", omittingEmptySubsequences: false)
        guard let language = subtags.first, (2...8).contains(language.utf8.count), language.utf8.allSatisfy(Self.isLetter) else { return nil }
        var written = [language.lowercased()]
        // After a singleton (`-u-`, `-x-`) come an extension's subtags: lowercase, whatever their shape.
        var inExtension = false
        for (index, subtag) in subtags.enumerated().dropFirst() {
            guard (1...8).contains(subtag.utf8.count) else { return nil }
            if subtag.utf8.count == 1 {
                // A singleton needs a subtag after it.
                guard index + 1 < subtags.count else { return nil }
                inExtension = true
                written.append(subtag.lowercased())
            } else if !inExtension, subtag.utf8.count == 4, subtag.utf8.allSatisfy(Self.isLetter) {
                written.append(subtag.prefix(1).uppercased() + subtag.dropFirst().lowercased())  // script: Hant
            } else if !inExtension, subtag.utf8.count == 2 && subtag.utf8.allSatisfy(Self.isLetter) || subtag.utf8.count == 3 && subtag.utf8.allSatisfy(Self.isDigit) {
                written.append(subtag.uppercased())  // region: KR, 419
            } else {
                written.append(subtag.lowercased())
            }
        }
        rawValue = written.joined(separator: "-")
    }

    public var description: String { rawValue }

    /// The language subtag alone: `ko` for `ko-KR`.
    public var language: String { String(rawValue.prefix { $0 != "-" }) }

    /// The tag and each shorter tag made by dropping its last subtag (RFC 4647's lookup):
    /// `zh-Hant-TW`, `zh-Hant`, `zh`. A single letter left at the end (`-x` of `en-x-a`) is dropped
    /// with what follows it.
    public var lookupChain: [String] {
        var chain: [String] = []
        var subtags = rawValue.split(separator: "-")
        while !subtags.isEmpty {
            if subtags.last?.count != 1 { chain.append(subtags.joined(separator: "-")) }
            subtags.removeLast()
        }
        return chain
    }

    /// The first of `preferences` (tags, best first) that `available` holds, each tried with its
    /// ``lookupChain``: `ko-KR` finds `ko-KR`, else `ko`. Nil when none matches.
    public static func lookup(_ preferences: [LanguageTag], in available: Set<String>) -> String? {
        for preference in preferences {
            if let found = preference.lookupChain.first(where: available.contains) { return found }
        }
        return nil
    }

    /// Why a tag was refused, for a field error.
    public static let problem = "Must be a BCP 47 language tag such as ja, ko-KR, pt-BR or zh-Hant-TW (letters and digits, subtags joined by -, at most 35 characters)."

    private static func isLetter(_ byte: UInt8) -> Bool { (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) }
    private static func isDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) }
    private static func isAlphanumeric(_ byte: UInt8) -> Bool { isLetter(byte) || isDigit(byte) }
}

extension InputRules {
    /// A user's `locale`: a ``LanguageTag``, returned in its conventional case.
    public static func locale(_ raw: String, field: String = "locale") throws(GatehouseError) -> String {
        guard let tag = LanguageTag(raw.trimmingCharacters(in: .whitespaces)) else { throw .validation(field, LanguageTag.problem) }
        return tag.rawValue
    }
}
