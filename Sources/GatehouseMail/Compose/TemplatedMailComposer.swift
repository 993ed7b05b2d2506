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

    /// Throws when the recipient or the subject could never be sent, so the flow that asked
    /// fails now rather than queuing a dead letter.
    public func outboxItem(_ mail: EmailToSend, app: AppID, idempotencyKey: String) throws -> NewOutboxItem {
        let rendered = templates.render(mail)
        _ = try MailAddress(mail.to)
        _ = try HeaderText(rendered.subject)
        return QueuedMail(to: mail.to, subject: rendered.subject, text: rendered.text, html: rendered.html)
            .outboxItem(app: app, idempotencyKey: idempotencyKey, sealer: sealer)
    }
}
