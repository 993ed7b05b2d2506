import Foundation

/// `GATEHOUSE_SMTP_URL=log:`: every message is written, rendered, to the log instead of being
/// sent (local development and the quick start, where a newcomer reads the codes there). Never
/// fails.
public struct LogMailer: Mailer {
    private let write: @Sendable (String) -> Void

    /// A mailer that hands each rendered message to `write` (one call per message).
    public init(write: @escaping @Sendable (String) -> Void) {
        self.write = write
    }

    public func send(_ message: MailMessage) throws(MailDeliveryError) {
        let text = String(decoding: message.rendered(), as: UTF8.self).replacingOccurrences(of: "\r\n", with: "\n")
        write("mail (log:) to \(message.to.address), not sent:\n\(text)")
    }
}
