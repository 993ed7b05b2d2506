/// A mailbox: an address and an optional display name, checked when it is made so that nothing a
/// caller passes can add a header line or a recipient.
///
/// The address is ASCII (`local@domain`, exactly one `@`, both parts non-empty, at most 254
/// characters) with no space, control character or the specials that delimit addresses
/// (`<>()[],;:\"`). Addresses outside ASCII would need SMTPUTF8, which this mailer does not
/// speak yet. The display name may be any text without control characters; it is quoted or
/// RFC 2047-encoded when rendered.
public struct MailAddress: Sendable, Hashable, CustomStringConvertible {
    /// `local@domain`.
    public let address: String
    /// The name shown beside the address, if any (never empty).
    public let displayName: String?

    /// Checks and creates a mailbox. An empty or blank `displayName` counts as none.
    public init(_ address: String, displayName: String? = nil) throws(MailFieldError) {
        try Self.check(address: address)
        if let displayName {
            try HeaderText.checkNoControls(displayName, otherwise: .controlCharacterInName)
            let trimmed = displayName.trimmingSpaces()
            self.displayName = trimmed.isEmpty ? nil : trimmed
        } else {
            self.displayName = nil
        }
        self.address = address
    }

    /// Parses `a@b.example` or `Display Name <a@b.example>` (the form of an app's `email.from`).
    public static func parse(_ text: String) throws(MailFieldError) -> MailAddress {
        let trimmed = text.trimmingSpaces()
        guard trimmed.hasSuffix(">"), let open = trimmed.lastIndex(of: "<") else {
            return try MailAddress(trimmed)
        }
        let address = String(trimmed[trimmed.index(after: open)..<trimmed.index(before: trimmed.endIndex)])
        var name = trimmed[..<open].trimmingSpaces()
        if name.count >= 2, name.hasPrefix("\""), name.hasSuffix("\"") {
            name = String(name.dropFirst().dropLast())
        }
        // "Shop <a@b.example>, <c@d.example>" is two mailboxes, not a name and one address.
        guard !name.contains("<"), !name.contains(">") else { throw .invalidCharacter }
        return try MailAddress(address, displayName: name)
    }

    /// The address alone, as SMTP's `MAIL FROM` and `RCPT TO` take it.
    public var description: String { address }

    private static let specials = Set("<>()[],;:\\\"".utf8)

    private static func check(address: String) throws(MailFieldError) {
        try HeaderText.checkNoControls(address, otherwise: .controlCharacter)
        let bytes = Array(address.utf8)
        guard bytes.count <= 254 else { throw .tooLong }
        guard bytes.allSatisfy({ $0 < 0x80 }) else { throw .notASCII }
        guard bytes.filter({ $0 == UInt8(ascii: "@") }).count == 1 else { throw .notExactlyOneAt }
        guard !bytes.contains(where: { $0 == 0x20 || specials.contains($0) }) else { throw .invalidCharacter }
        let parts = address.split(separator: "@", omittingEmptySubsequences: false)
        guard !parts[0].isEmpty, !parts[1].isEmpty else { throw .emptyPart }
    }
}

/// Why a ``MailAddress`` or a ``HeaderText`` could not be made.
public enum MailFieldError: Error, Equatable, Sendable {
    /// A CR, LF, NUL or other control character in the address.
    case controlCharacter
    /// A CR, LF, NUL or other control character in the display name.
    case controlCharacterInName
    /// No `@`, or more than one.
    case notExactlyOneAt
    /// The part before or after the `@` is empty.
    case emptyPart
    /// A space or one of `<>()[],;:\"`.
    case invalidCharacter
    /// A character outside ASCII (SMTPUTF8 is not supported).
    case notASCII
    /// Over 254 characters.
    case tooLong
}

extension StringProtocol {
    func trimmingSpaces() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[first...last])
    }
}
