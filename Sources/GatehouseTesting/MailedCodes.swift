import Foundation

extension SMTPSink {
    /// The 6-digit code in the plain-text part of the newest mail to `address`, read with the
    /// independent parser; nil when no mail to it holds one.
    public func newestCode(to address: String) throws -> String? {
        guard let mail = try messages().last(where: { $0.recipients == [address] }) else { return nil }
        let text = try IndependentMailParser.parse(mail.raw).parts.first { $0.contentType == "text/plain" }?.content ?? ""
        return text.range(of: #"\b[0-9]{6}\b"#, options: .regularExpression).map { String(text[$0]) }
    }
}
