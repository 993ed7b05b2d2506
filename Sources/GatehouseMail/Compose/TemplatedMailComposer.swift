import GatehouseCore

/// The ``EmailComposer`` the flows use: renders the mail from ``MailTemplates`` and seals it
/// into an outbox item.
public struct TemplatedMailComposer: EmailComposer {
    let templates: MailTemplates
    let sealer: SecretSealer

    public init(templates: MailTemplates, sealer: SecretSealer) {
        self.templates = templates
        self.sealer = sealer
    }

    public func checkRecipient(_ address: String) throws {
        do {
            _ = try MailAddress(address)
        } catch {
            throw GatehouseError.validation("email", "This server cannot send mail to this address (its domain has no IDNA form, or it is over 254 bytes).")
        }
    }

    /// Throws when the recipient or the subject could never be sent, so the flow that asked
    /// fails now rather than queuing a dead letter: an address the mailer cannot write (a domain
    /// with no IDNA form, over 254 bytes) is 400 `request/validation-failed` on `email`, the same
    /// for every address of that form, account or not. A non-ASCII local part is queued: whether
    /// it can go depends on the server offering SMTPUTF8 when it is sent.
    public func outboxItem(_ mail: EmailToSend, app: AppID, idempotencyKey: String) throws -> NewOutboxItem {
        let rendered = templates.render(mail)
        try checkRecipient(mail.to)
        _ = try HeaderText(rendered.subject)
        return QueuedMail(to: mail.to, subject: rendered.subject, text: rendered.text, html: rendered.html)
            .outboxItem(app: app, idempotencyKey: idempotencyKey, sealer: sealer)
    }
}
