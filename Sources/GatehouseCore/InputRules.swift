import Foundation

/// The rules for what users type: emails, names and passwords (API.md, "Numbers").
public enum InputRules {
    /// Trimmed, lowercased and in Unicode NFC; ≤ 254 characters, one `@`, a non-empty local part,
    /// a domain with a dot, no spaces or control characters. NFC makes `é` typed as one code point
    /// and as `e` + U+0301 one address, so they are one account, and one key for every limiter.
    public static func email(_ raw: String, field: String = "email") throws(GatehouseError) -> String {
        // NFC after lowercasing: lowercasing may decompose (`İ` becomes `i` + U+0307).
        let email = raw.trimmingCharacters(in: .whitespacesAndNewlines).lowercased().precomposedStringWithCanonicalMapping
        let parts = email.split(separator: "@", omittingEmptySubsequences: false)
        guard fits(email, characters: 254), parts.count == 2, !parts[0].isEmpty, parts[1].contains("."), !parts[1].hasPrefix("."),
            !parts[1].hasSuffix("."),
            // No invisible formatting either: `ada\u{200B}@example.com` would be another account that reads as Ada's.
            !email.unicodeScalars.contains(where: { $0.properties.isWhitespace || [.control, .format].contains($0.properties.generalCategory) })
        else { throw .validation(field, "Must be an email address.") }
        return email
    }

    /// A first or last name: trimmed, no control or format characters, at most 50 characters.
    /// Empty means none.
    public static func name(_ raw: String, field: String) throws(GatehouseError) -> String? {
        let name = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        guard fits(name, characters: 50) else { throw .validation(field, "Must be at most 50 characters.") }
        guard !hasControlOrFormatCharacters(name) else { throw .validation(field, nameCharactersMessage) }
        return name.isEmpty ? nil : name
    }

    /// A `display_name`: the name rule (trimmed, no control or format characters), at most 100
    /// characters. Empty means none.
    public static func displayName(_ raw: String, field: String = "display_name") throws(GatehouseError) -> String? {
        let name = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        guard fits(name, characters: 100) else { throw .validation(field, "Must be at most 100 characters.") }
        guard !hasControlOrFormatCharacters(name) else { throw .validation(field, nameCharactersMessage) }
        return name.isEmpty ? nil : name
    }

    /// Why a name was refused by ``hasControlOrFormatCharacters(_:)``.
    public static let nameCharactersMessage = "Must not contain control characters or invisible formatting characters."

    /// Whether `text` holds a control character (general category Cc) or a format character
    /// (Cf): bidi embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069), zero-width
    /// characters (U+200B–U+200F, U+2060, U+FEFF), soft hyphens and the like. Shown to other
    /// people (a name in a mail, an app's name on a consent page), they can make text read in a
    /// different order or two names look the same. The zero-width non-joiner and joiner (U+200C,
    /// U+200D) are allowed: Persian, Hindi and other scripts need them to spell names right, and
    /// they change how letters join, not the order of the text.
    public static func hasControlOrFormatCharacters(_ text: String) -> Bool {
        text.unicodeScalars.contains { scalar in
            let category = scalar.properties.generalCategory
            return category == .control || (category == .format && !joiners.contains(scalar))
        }
    }

    private static let joiners: Set<Unicode.Scalar> = ["\u{200C}", "\u{200D}"]

    /// Whether `text` holds a control character (general category Cc: U+0000–U+001F and
    /// U+007F–U+009F, a set Unicode keeps fixed). Compared by code point: looking up each
    /// scalar's category cost 0.6 % of a refresh's CPU for the token's 43 characters.
    public static func hasControlCharacters(_ text: String) -> Bool {
        text.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }
    }

    /// A password given to be checked (signing in, reauthenticating, the current one): over 128
    /// characters is a validation error, as for a new one, before any hashing. Characters as a
    /// reader sees them, with no bound in bytes: a password is never stored or sent on, and a
    /// stricter rule now would lock out whoever chose a long one before.
    public static func presentedPassword(_ password: String, field: String = "password") throws(GatehouseError) {
        guard password.count <= 128 else { throw .validation(field, "Must be at most 128 characters.") }
    }

    /// Whether `text` is at most `limit` characters long. A character is what a reader sees as
    /// one, but its bytes count too, at most 6 of UTF-8 a character on average: else one letter
    /// under thousands of combining marks would be a single character kilobytes long (in a name,
    /// it made every access token too large to send). 6 leaves room for scripts whose letters
    /// carry marks (3 bytes each in Devanagari), and keeps the largest email and names within
    /// about 2 KB of a token.
    public static func fits(_ text: String, characters limit: Int) -> Bool {
        let bytes = text.utf8.count
        if bytes <= limit { return true }
        return (bytes + 5) / 6 <= limit && text.count <= limit
    }

    /// 8–128 characters, at least the app's minimum. Under the minimum is `auth/weak-password`;
    /// over 128 is a validation error.
    public static func newPassword(_ password: String, minimum: Int64, field: String = "password") throws(GatehouseError) {
        try presentedPassword(password, field: field)
        if password.count < max(8, minimum) {
            throw GatehouseError(.weakPassword, "Use at least \(max(8, minimum)) characters.", fieldErrors: [FieldError(field, "Too short.")])
        }
    }

    /// An emailed code: exactly six ASCII digits.
    public static func emailCode(_ code: String, field: String = "code") throws(GatehouseError) {
        guard code.utf8.count == 6, code.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            throw GatehouseError.validation(field, "Must be the 6 digits from the email.")
        }
    }
}
