import GatehouseCore
import GatehouseOutbound

/// Chooses the mailer for an app: its own SMTP server when its `email.smtp_url` is set, else the
/// platform's `GATEHOUSE_SMTP_URL`.
public enum MailerSelection {
    /// The app's mailer. The app's URL is a tenant URL: its connections may reach only global
    /// addresses unless `allowPrivateOutbound` (`GATEHOUSE_ALLOW_PRIVATE_OUTBOUND`); its
    /// `smtp_username`/`smtp_password` go with it. The platform's URL is trusted (any address);
    /// `log:` gives a ``LogMailer`` writing to `log`. Throws ``MailDeliveryError/permanent(_:)``
    /// for a URL that cannot be used.
    public static func mailer(
        for app: AppSettings.Email, platformSMTPURL: String, allowPrivateOutbound: Bool,
        log: @escaping @Sendable (String) -> Void,
        connectTimeout: Duration = .seconds(10), timeout: Duration = .seconds(30)
    ) throws(MailDeliveryError) -> any Mailer {
        if let url = app.smtpURL {
            return try SMTPMailer(
                url: url, username: app.smtpUsername, password: app.smtpPassword,
                addressPolicy: .forTenantURLs(allowPrivate: allowPrivateOutbound),
                connectTimeout: connectTimeout, timeout: timeout)
        }
        if platformSMTPURL == "log:" { return LogMailer(write: log) }
        return try SMTPMailer(url: platformSMTPURL, addressPolicy: .anyAddress, connectTimeout: connectTimeout, timeout: timeout)
    }

    /// The app's `email.from` as a mailbox (`Name <a@b.example>` or `a@b.example`), or `nil` when
    /// it sets none.
    public static func sender(for app: AppSettings.Email) throws(MailFieldError) -> MailAddress? {
        guard let from = app.from else { return nil }
        return try MailAddress.parse(from)
    }

    /// Who a message of the app is from, and where replies go. The platform's mailer speaks for
    /// the platform: over it every app sends from `platformSender`'s address (`GATEHOUSE_SMTP_FROM`,
    /// envelope and `From` alike) under the app's name, and its own `email.from`, if any, is only
    /// the `Reply-To`; no tenant can send as someone else's domain from the platform's IP and
    /// reputation. Over the app's own SMTP server its `email.from` is the sender.
    public static func addressing(
        for app: AppSettings.Email, appName: String, platformSender: MailAddress
    ) throws(MailFieldError) -> (from: MailAddress, replyTo: MailAddress?) {
        let own = try sender(for: app)
        if app.smtpURL != nil, let own { return (own, nil) }
        // A name that cannot be a display name (a control character) leaves the address alone.
        let platform = (try? MailAddress(platformSender.address, displayName: appName)) ?? platformSender
        return (platform, app.smtpURL == nil ? own : nil)
    }
}
