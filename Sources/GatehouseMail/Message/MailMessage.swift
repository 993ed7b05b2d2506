import Foundation
import GatehouseCore
import GatehouseCrypto

/// One email: a sender, one recipient, a subject and the same content as plain text and HTML.
/// Every header value is a checked type (``MailAddress``, ``HeaderText``), so no field can carry
/// a line break into the header; ``rendered(smtputf8:)`` gives the RFC 5322 / MIME bytes to send.
public struct MailMessage: Sendable {
    public let from: MailAddress
    public let to: MailAddress
    /// Where replies go when that is not ``from`` (an app's own `email.from` over the platform's
    /// mailer, ``MailerSelection/addressing(for:appName:platformSender:)``).
    public let replyTo: MailAddress?
    public let subject: HeaderText
    /// The plain-text part.
    public let textBody: String
    /// The HTML part (the caller escapes what it interpolates).
    public let htmlBody: String
    /// When it was written, in Unix milliseconds (the `Date` header).
    public let dateMillis: Int64
    /// `<random@sender's domain>`, made once per message: a retried delivery keeps it, so the
    /// receiver can tell a duplicate.
    public let messageID: String
    let boundary: String

    /// A message dated by `clock`, with a fresh `Message-ID` and MIME boundary.
    public init(
        from: MailAddress, to: MailAddress, replyTo: MailAddress? = nil, subject: HeaderText, textBody: String, htmlBody: String,
        clock: any Clock = SystemClock()
    ) {
        self.from = from
        self.to = to
        self.replyTo = replyTo
        self.subject = subject
        self.textBody = textBody
        self.htmlBody = htmlBody
        self.dateMillis = clock.nowMillis()
        self.messageID = "<\(Self.hex(SecureRandom.bytes(16)))@\(from.asciiDomain)>"
        // "=_" never occurs in quoted-printable text ("=" is always followed by hex digits or a
        // line break), so the boundary cannot appear inside a part.
        self.boundary = "=_gatehouse_\(Self.hex(SecureRandom.bytes(12)))"
    }

    /// Whether an address of the message has a local part outside ASCII, so that it can only be
    /// sent to a server that offers SMTPUTF8 and with it (RFC 6531).
    public var requiresSMTPUTF8: Bool {
        [from, to].contains { $0.needsSMTPUTF8 } || replyTo?.needsSMTPUTF8 == true
    }

    /// The message as sent: CRLF line breaks, no line over 78 characters, 7-bit except for the
    /// addresses of an SMTPUTF8 message.
    ///
    /// With `smtputf8` (the server offered SMTPUTF8 and the envelope uses it) the addresses in
    /// `From`, `To` and `Reply-To` are written as they are, raw UTF-8 (RFC 6532). Without it an
    /// address is written with its domain in IDNA A-labels (``MailAddress/asciiAddress``), valid
    /// for any server; only an address whose local part is not ASCII, which has no such form, is
    /// written raw (such a message is sent only with SMTPUTF8: ``requiresSMTPUTF8``). Display
    /// names and the subject are RFC 2047 encoded words either way.
    public func rendered(smtputf8: Bool = false) -> [UInt8] {
        var lines: [String] = [
            "Date: \(Self.rfc5322Date(millis: dateMillis))",
            "From: \(Self.mailbox(from, smtputf8: smtputf8))",
            "To: \(Self.mailbox(to, smtputf8: smtputf8))",
        ] + (replyTo.map { ["Reply-To: \(Self.mailbox($0, fieldName: "Reply-To", smtputf8: smtputf8))"] } ?? []) + [
            "Subject: \(Self.unstructured(subject.text, fieldName: "Subject"))",
            "Message-ID: \(messageID)",
            "MIME-Version: 1.0",
            "Auto-Submitted: auto-generated",
            "Content-Type: multipart/alternative;\r\n boundary=\"\(boundary)\"",
            "",
            "This is a MIME message: a plain-text part and an HTML part.",
        ]
        for (type, body) in [("text/plain", textBody), ("text/html", htmlBody)] {
            lines += [
                "--\(boundary)",
                "Content-Type: \(type); charset=utf-8",
                "Content-Transfer-Encoding: quoted-printable",
                "",
                MIMEEncoding.quotedPrintable(body),
            ]
        }
        lines.append("--\(boundary)--")
        return Array((lines.joined(separator: "\r\n") + "\r\n").utf8)
    }

    static func mailbox(_ mailbox: MailAddress, fieldName: String = "From", smtputf8: Bool = false) -> String {
        // Checked when the MailAddress was made: no control character, space or delimiter.
        let address = smtputf8 ? mailbox.address : (mailbox.asciiAddress ?? mailbox.address)
        guard let name = mailbox.displayName else { return "<\(address)>" }
        // The name follows the field's name; the address starts its own folded line.
        return "\(MIMEEncoding.displayName(name, fieldName: fieldName))\r\n <\(address)>"
    }

    static func unstructured(_ text: String, fieldName: String) -> String {
        MIMEEncoding.isPlainHeaderText(text, fieldName: fieldName)
            ? text : MIMEEncoding.encodedWords(text, firstLineUsed: fieldName.utf8.count + 2)
    }

    /// `Tue, 01 Dec 2026 16:00:00 +0000`.
    static func rfc5322Date(millis: Int64) -> String {
        var seconds = time_t(millis / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(Int(parts.tm_year) + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) +0000"
    }

    private static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef")
        return String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0xF)]] })
    }
}
