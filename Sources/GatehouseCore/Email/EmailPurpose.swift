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
    /// The languages to write the mail in, best first: the recipient's `locale` when the mail goes
    /// to a known user, the app's `email.locale`, then the languages of the request that caused
    /// it (its `Accept-Language`). The mail module takes the first it has a template for (the
    /// app's own or a built-in one), else `en`.
    public var languages: [LanguageTag]
    /// The app's name, for subject and body.
    public var appName: String
    /// The code, for every template but the notice.
    public var code: String?
    /// Minutes the code lives.
    public var minutes: Int
    /// The notice's new address.
    public var newEmail: String?
    /// The app's own templates for this mail's template, by locale (`email.templates`): each wins
    /// over the built-in one of its locale.
    public var ownTemplates: [String: AppMailTemplate]

    public init(
        template: Template, to: String, languages: [LanguageTag], appName: String, code: String?, minutes: Int, newEmail: String? = nil,
        ownTemplates: [String: AppMailTemplate] = [:]
    ) {
        self.template = template
        self.to = to
        self.languages = languages
        self.appName = appName
        self.code = code
        self.minutes = minutes
        self.newEmail = newEmail
        self.ownTemplates = ownTemplates
    }
}

extension EmailToSend {
    /// The locales Gatehouse ships templates for (`Templates/<locale>/` of the mail module).
    public static let builtInLocales = ["en", "ko", "ja"]

    /// A mail of `app`, with its name and its own templates; the code is filled in when it is
    /// made. Its languages: the `user`'s `locale` (when the mail goes to a known user), the app's
    /// `email.locale`, then the request's (``RequestOrigin/languages``).
    public init(_ template: Template, to address: String, app: AppContext, user: User?, origin: RequestOrigin?) {
        let languages = [user?.locale, app.settings.email.locale].compactMap { $0.flatMap(LanguageTag.init) } + (origin?.languages ?? [])
        self.init(
            template: template, to: address, languages: languages, appName: app.settings.name, code: nil, minutes: 10,
            ownTemplates: app.settings.email.templates[template] ?? [:])
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
