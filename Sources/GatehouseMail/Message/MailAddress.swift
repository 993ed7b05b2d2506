/// A mailbox: an address and an optional display name, checked when it is made so that nothing a
/// caller passes can add a header line or a recipient.
///
/// The address is `local@domain`: exactly one `@`, both parts non-empty, at most 254 bytes (as
/// given and with its domain in A-labels), with no space, control or invisible formatting
/// character, nor the specials that delimit addresses (`<>()[],;:\"`). Either part may be
/// outside ASCII (RFC 6531): a non-ASCII domain must have an IDNA form (``asciiDomain``, made by
/// libcurl), which is what goes out when the mail server does not offer SMTPUTF8; a non-ASCII
/// local part has no ASCII form, so such an address can only be mailed with SMTPUTF8
/// (``needsSMTPUTF8``). The display name may be any text without control characters; it is
/// quoted or RFC 2047-encoded when rendered.
public struct MailAddress: Sendable, Hashable, CustomStringConvertible {
    /// `local@domain`, as given.
    public let address: String
    /// The name shown beside the address, if any (never empty).
    public let displayName: String?
    /// The domain in IDNA A-labels (`user@bücher.example` → `xn--bcher-kva.example`); the domain
    /// itself when it is ASCII.
    public let asciiDomain: String

    /// The part before the `@`.
    public var localPart: String { Self.parts(of: address).local }

    /// Whether the local part is outside ASCII: no server takes the address without SMTPUTF8.
    public var needsSMTPUTF8: Bool { !localPart.utf8.allSatisfy { $0 < 0x80 } }

    /// `local@a-label-domain`, the address as a server without SMTPUTF8 takes it; `nil` when the
    /// local part is not ASCII (``needsSMTPUTF8``).
    public var asciiAddress: String? { needsSMTPUTF8 ? nil : "\(localPart)@\(asciiDomain)" }

    /// Checks and creates a mailbox. An empty or blank `displayName` counts as none.
    public init(_ address: String, displayName: String? = nil) throws(MailFieldError) {
        self.asciiDomain = try Self.check(address: address)
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

    /// Checks `address` and gives its domain in A-labels.
    private static func check(address: String) throws(MailFieldError) -> String {
        try HeaderText.checkNoControls(address, otherwise: .controlCharacter)
        let bytes = Array(address.utf8)
        guard bytes.count <= 254 else { throw .tooLong }
        guard bytes.filter({ $0 == UInt8(ascii: "@") }).count == 1 else { throw .notExactlyOneAt }
        guard !bytes.contains(where: { $0 == 0x20 || specials.contains($0) }) else { throw .invalidCharacter }
        // Outside ASCII: no space of another script, line or paragraph separator, nor invisible
        // formatting (a zero-width space, a bidi override) that would make two addresses read alike.
        guard !address.unicodeScalars.contains(where: { $0.value >= 0x80 && ($0.properties.isWhitespace || $0.properties.generalCategory == .format) })
        else { throw .invalidCharacter }
        let (local, domain) = parts(of: address)
        guard !local.isEmpty, !domain.isEmpty else { throw .emptyPart }
        guard let asciiDomain = IDNA.asciiDomain(domain) else { throw .invalidDomain }
        guard local.utf8.count + 1 + asciiDomain.utf8.count <= 254 else { throw .tooLong }
        return asciiDomain
    }

    /// Before and after the one `@`, split by bytes: an `@` followed by a combining mark is one
    /// Character to Swift, never a separator of Characters.
    private static func parts(of address: String) -> (local: String, domain: String) {
        let bytes = Array(address.utf8)
        guard let at = bytes.firstIndex(of: UInt8(ascii: "@")) else { return (address, "") }
        return (String(decoding: bytes[..<at], as: UTF8.self), String(decoding: bytes[(at + 1)...], as: UTF8.self))
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
    /// A domain outside ASCII that has no IDNA form (a label too long once encoded, a leading
    /// combining mark, a character no host name may hold).
    case invalidDomain
    /// Over 254 bytes, as given or with the domain in A-labels.
    case tooLong
}

extension StringProtocol {
    func trimmingSpaces() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[first...last])
    }
}
