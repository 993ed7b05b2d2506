/// What an emailed code is for. Each purpose has its own live code and its own send window per
/// address (API.md, "Choices"): the verification mail sent at sign-up does not delay a sign-in code.
public enum EmailPurpose: String, Sendable, CaseIterable {
    /// `POST /v1/auth/email-code/send` and `/verify`.
    case signIn = "sign_in"
    /// Sign-up's mail, `/v1/auth/email/verification/send` and `/confirm`.
    case verification
    /// `/v1/auth/password-reset/send` and `/confirm`.
    case passwordReset = "password_reset"
    /// `POST /v1/me/email` (the code goes to the new address) and `/v1/me/email/confirm`.
    case emailChange = "email_change"
    /// `POST /v1/auth/reauthenticate/send-code` and reauthentication by `code`.
    case reauthentication
}

/// One mail a flow sends: which template, to whom, and what fills it. Rendering (templates,
/// locale, MIME) is the mail module's; the domain says only this much.
public struct EmailToSend: Sendable, Equatable {
    public enum Template: String, Sendable, CaseIterable {
        case signInCode = "sign_in_code"
        case verification
        case passwordReset = "password_reset"
        /// To the new address: its code.
        case emailChange = "email_change"
        /// To the old address: the email was changed.
        case emailChangedNotice = "email_changed_notice"
        case reauthentication
    }

    public var template: Template
    public var to: String
    /// `en`, `ko` (the app's `email.locale`).
    public var locale: String
    /// The app's name, for subject and body.
    public var appName: String
    /// The code, for every template but the notice.
    public var code: String?
    /// Minutes the code lives.
    public var minutes: Int
    /// The notice's new address.
    public var newEmail: String?

    public init(template: Template, to: String, locale: String, appName: String, code: String?, minutes: Int, newEmail: String? = nil) {
        self.template = template
        self.to = to
        self.locale = locale
        self.appName = appName
        self.code = code
        self.minutes = minutes
        self.newEmail = newEmail
    }
}

extension EmailToSend {
    /// A mail of `app`, in its locale and with its name; the code is filled in when it is made.
    public init(_ template: Template, to address: String, app: AppContext) {
        self.init(template: template, to: address, locale: app.settings.email.locale, appName: app.settings.name, code: nil, minutes: 10)
    }
}

/// Turns a mail into the outbox item that delivers it (rendered and sealed by the mail module).
public protocol EmailComposer: Sendable {
    /// Throws 400 `request/validation-failed` (field `email`) for an address no mail can be
    /// written to. The flows ask before they look the address up, so the answer depends on the
    /// address's form only, never on whether it has an account.
    func checkRecipient(_ address: String) throws
    func outboxItem(_ mail: EmailToSend, app: AppID, idempotencyKey: String) throws -> NewOutboxItem
}
