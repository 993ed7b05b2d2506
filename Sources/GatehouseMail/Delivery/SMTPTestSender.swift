import GatehouseCore

/// Sends an app's test message (``TestMail``) through the app's own SMTP server, over a mailer
/// made for it (no connection kept: a test is rare, and its answer must be this server's now),
/// with the tenant address policy and a shorter time limit than real mail's.
public struct SMTPTestSender: TestMailSending {
    let platformSender: MailAddress
    let allowPrivateOutbound: Bool
    let clock: any Clock
    let connectTimeout: Duration
    let timeout: Duration

    public init(
        platformSender: MailAddress, allowPrivateOutbound: Bool, clock: any Clock, connectTimeout: Duration = .seconds(10),
        timeout: Duration = .seconds(20)
    ) {
        self.platformSender = platformSender
        self.allowPrivateOutbound = allowPrivateOutbound
        self.clock = clock
        self.connectTimeout = connectTimeout
        self.timeout = timeout
    }

    public func acceptsRecipient(_ address: String) -> Bool {
        (try? MailAddress(address)) != nil
    }

    public func sendTest(app: AppContext, to: String) -> TestMailFailure? {
        guard let url = app.settings.email.smtpURL else { return TestMailFailure(.other, "The app has no SMTP server of its own.") }
        let message: MailMessage
        do {
            let (from, replyTo) = try MailerSelection.addressing(for: app.settings.email, appName: app.settings.name, platformSender: platformSender)
            let name = app.settings.name
            message = MailMessage(
                from: from, to: try MailAddress(to), replyTo: replyTo, subject: try HeaderText(TestMail.subject(appName: name)),
                textBody: TestMail.text(appName: name), htmlBody: "<p>" + MailTemplates.escapingHTML(TestMail.text(appName: name)).replacingOccurrences(of: "\n", with: "<br>\n") + "</p>",
                clock: clock)
        } catch {
            return TestMailFailure(.sender, "The message cannot be written: \(error)")
        }
        do {
            let mailer = try SMTPMailer(
                url: url, username: app.settings.email.smtpUsername, password: app.settings.email.smtpPassword,
                addressPolicy: .forTenantURLs(allowPrivate: allowPrivateOutbound), connectTimeout: connectTimeout, timeout: timeout)
            try mailer.send(message)
            return nil
        } catch {
            return TestMailFailure(Self.cause(of: error), error.reason)
        }
    }

    /// What the reason of a failed send says, as the admin fixes it: read from the SMTP reply
    /// code and libcurl's message, which ``SMTPMailer`` puts in every reason.
    static func cause(of error: MailDeliveryError) -> TestMailFailure.Cause {
        let reason = error.reason
        let lower = reason.lowercased()
        if lower.contains("which this mailer may not reach") { return .refusedAddress }
        if lower.contains("rcpt failed") || error == .recipientDeferred(reason) { return .recipient }
        if lower.contains("answered 535") || lower.contains("answered 534") || lower.contains("answered 530") || lower.contains("login denied")
            || lower.contains("authentication")
        {
            return .authentication
        }
        if lower.contains("mail from") || lower.contains("mail failed") { return .sender }
        if lower.contains("ssl") || lower.contains("tls") || lower.contains("certificate") { return .tls }
        if lower.contains("timeout") || lower.contains("timed out") { return .timeout }
        if lower.contains("connect") || lower.contains("resolve") { return .connection }
        return .other
    }
}
