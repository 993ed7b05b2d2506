import Foundation

/// An app's own mail template for one purpose and locale (`email.templates.<purpose>.<locale>`):
/// it wins over the built-in template of that purpose and locale, and gives a locale without
/// built-in templates (`fr`) its mail. Parsed and checked when the settings are decoded (once per
/// settings version, on save with the rules of the files shipped with the server), so a mail only
/// fills it in.
public struct AppMailTemplate: Sendable, Equatable {
    /// As the admin wrote them (shown back in the settings).
    public let subject: String
    public let text: String
    /// Nil: the HTML body is made from the text.
    public let html: String?

    public let subjectTemplate: TemplateText
    public let textTemplate: TemplateText
    public let htmlTemplate: TemplateText?

    public static let maxSubjectCharacters = 200
    public static let maxBodyBytes = 20_480
    /// Locales a purpose may have its own templates for.
    public static let maxLocales = 30
    /// All of an app's own templates together, in bytes: every node keeps them in memory with the
    /// app's settings, and merge patches could otherwise pile them up far past one request's body.
    public static let maxTotalBytes = 262_144

    /// Parses the parts (placeholders are checked against a purpose by the settings' decoder).
    public init(subject: String, text: String, html: String?) throws(TemplateText.Problem) {
        self.init(
            subject: subject, text: text, html: html, subjectTemplate: try TemplateText(parsing: subject), textTemplate: try TemplateText(parsing: text),
            htmlTemplate: try html.map { source throws(TemplateText.Problem) in try TemplateText(parsing: source) })
    }

    init(subject: String, text: String, html: String?, subjectTemplate: TemplateText, textTemplate: TemplateText, htmlTemplate: TemplateText?) {
        self.subject = subject
        self.text = text
        self.html = html
        self.subjectTemplate = subjectTemplate
        self.textTemplate = textTemplate
        self.htmlTemplate = htmlTemplate
    }

    var json: JSON { ["subject": .string(subject), "text": .string(text), "html": .optional(html)] }
}

extension AppSettings.Email {
    /// `email.templates`: `{<purpose>: {<locale>: {subject, text, html?}}}`. Every problem is
    /// named by its field, `email.templates.sign_in_code.ja.text`, with the placeholder at fault.
    static func decodeTemplates(_ f: inout FieldReader) -> [EmailToSend.Template: [String: AppMailTemplate]] {
        guard let value = f.raw("templates") else { return [:] }
        let field = f.field("templates")
        guard case .object(let purposes) = value else {
            f.fail("templates", "Must be an object: {\"<purpose>\": {\"<locale>\": {\"subject\", \"text\", \"html\"}}}.")
            return [:]
        }
        var templates: [EmailToSend.Template: [String: AppMailTemplate]] = [:]
        for (purposeName, locales) in purposes.sorted(by: { $0.key < $1.key }) where locales != .null {
            guard let purpose = EmailToSend.Template(rawValue: purposeName) else {
                f.fail(path: "\(field).\(purposeName)", "Unknown template; use \(EmailToSend.Template.allCases.map(\.rawValue).joined(separator: ", ")).")
                continue
            }
            guard case .object(let byLocale) = locales else {
                f.fail(path: "\(field).\(purposeName)", "Must be an object of templates by locale: {\"ja\": {\"subject\", \"text\", \"html\"}}.")
                continue
            }
            let given = byLocale.filter { $0.value != .null }
            guard given.count <= AppMailTemplate.maxLocales else {
                f.fail(path: "\(field).\(purposeName)", "Must have at most \(AppMailTemplate.maxLocales) locales.")
                continue
            }
            var own: [String: AppMailTemplate] = [:]
            var spelled: [String: String] = [:]
            for (localeName, body) in given.sorted(by: { $0.key < $1.key }) {
                let path = "\(field).\(purposeName).\(localeName)"
                guard let locale = LanguageTag(localeName)?.rawValue else {
                    f.fail(path: path, LanguageTag.problem)
                    continue
                }
                if let other = spelled[locale] {
                    f.fail(path: path, "The same locale as \(other); give it once.")
                    continue
                }
                spelled[locale] = localeName
                var r = FieldReader(body, path: path)
                let template = decodeTemplate(&r, purpose)
                r.rejectUnknown()
                f.absorb(r.errors)
                if let template, r.errors.isEmpty { own[locale] = template }
            }
            if !own.isEmpty { templates[purpose] = own }
        }
        let total = templates.values.flatMap(\.values).reduce(0) { $0 + $1.subject.utf8.count + $1.text.utf8.count + ($1.html?.utf8.count ?? 0) }
        if total > AppMailTemplate.maxTotalBytes {
            f.fail("templates", "Must be at most \(AppMailTemplate.maxTotalBytes) bytes in all (these are \(total)); remove templates no user needs.")
            return [:]
        }
        return templates
    }

    /// One template: its parts read, parsed and checked against the purpose's placeholders.
    private static func decodeTemplate(_ r: inout FieldReader, _ purpose: EmailToSend.Template) -> AppMailTemplate? {
        let subject = r.string("subject", maxLength: AppMailTemplate.maxSubjectCharacters)
        if subject == nil, !r.has("subject") { _ = r.raw("subject"); r.fail("subject", "Required: one line of at most \(AppMailTemplate.maxSubjectCharacters) characters.") }
        let text = body(&r, "text", required: true)
        let html = body(&r, "html", required: false)
        let parts = [(TemplatePart.subject, subject), (.text, text), (.html, html)]
        var parsed: [TemplatePart: TemplateText] = [:]
        for (part, source) in parts {
            guard let source else { continue }
            do {
                let template = try TemplateText(parsing: source)
                if let problem = purpose.problem(in: part, template) {
                    r.fail(part.rawValue, message(problem, purpose))
                } else {
                    parsed[part] = template
                }
            } catch {
                switch error {
                case .unknownPlaceholder(let name):
                    r.fail(part.rawValue, "Unknown placeholder {{\(name)}}; this template has \(listed(purpose.placeholders)).")
                case .unclosedBraces:
                    r.fail(part.rawValue, "A {{ with no }} after it; placeholders are written {{app_name}}.")
                }
            }
        }
        guard let subject, let text, let subjectTemplate = parsed[.subject], let textTemplate = parsed[.text], html == nil || parsed[.html] != nil else {
            return nil
        }
        return AppMailTemplate(subject: subject, text: text, html: html, subjectTemplate: subjectTemplate, textTemplate: textTemplate, htmlTemplate: parsed[.html])
    }

    /// A body: a non-empty string of at most ``AppMailTemplate/maxBodyBytes`` bytes, line breaks
    /// (as LF) and tabs its only control characters.
    private static func body(_ r: inout FieldReader, _ key: String, required: Bool) -> String? {
        guard let value = r.raw(key) else {
            if required { r.fail(key, "Required: the body as text, with its placeholders.") }
            return nil
        }
        guard case .string(let raw) = value, !raw.isEmpty else {
            r.fail(key, "Must be a non-empty string.")
            return nil
        }
        let text = raw.replacingOccurrences(of: "\r\n", with: "\n")
        guard text.utf8.count <= AppMailTemplate.maxBodyBytes else {
            r.fail(key, "Must be at most \(AppMailTemplate.maxBodyBytes) bytes.")
            return nil
        }
        if text.unicodeScalars.contains(where: { ($0.value < 0x20 && $0 != "\n" && $0 != "\t") || (0x7F...0x9F).contains($0.value) }) {
            r.fail(key, "Must not contain control characters other than line breaks and tabs.")
            return nil
        }
        return text
    }

    private static func message(_ problem: PlaceholderProblem, _ purpose: EmailToSend.Template) -> String {
        switch problem {
        case .noValue(let placeholder):
            "{{\(placeholder.rawValue)}} has no value in the \(purpose.rawValue) template; it has \(listed(purpose.placeholders))."
        case .missing(let placeholder):
            "Must hold {{\(placeholder.rawValue)}}."
        }
    }

    private static func listed(_ placeholders: Set<Placeholder>) -> String {
        let names = Placeholder.allCases.filter(placeholders.contains).map { "{{\($0.rawValue)}}" }
        return names.dropLast().joined(separator: ", ") + (names.count > 1 ? " and " : "") + (names.last ?? "")
    }

    static func templatesJSON(_ templates: [EmailToSend.Template: [String: AppMailTemplate]]) -> JSON {
        .object(Dictionary(uniqueKeysWithValues: templates.map { purpose, own in
            (purpose.rawValue, JSON.object(own.mapValues(\.json)))
        }))
    }
}
