/// Text for a header field (a subject): any Unicode text without control characters, so it can
/// never end its header line early. Rendered plain when it is short printable ASCII, otherwise as
/// RFC 2047 encoded words.
public struct HeaderText: Sendable, Hashable, CustomStringConvertible {
    /// The text as given.
    public let text: String

    /// Checks and wraps `text`; a CR, LF, NUL, tab or any other control character (C0, DEL, C1)
    /// is refused.
    public init(_ text: String) throws(MailFieldError) {
        try Self.checkNoControls(text, otherwise: .controlCharacter)
        self.text = text
    }

    public var description: String { text }

    static func checkNoControls(_ text: String, otherwise error: MailFieldError) throws(MailFieldError) {
        for scalar in text.unicodeScalars where scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) {
            _ = scalar
            throw error
        }
    }
}
