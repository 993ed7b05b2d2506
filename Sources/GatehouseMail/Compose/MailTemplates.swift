import Foundation
import GatehouseCore

/// The mail templates for emailed codes, read from the files in `Templates/` (see its README).
/// Loaded and checked once at startup, so a missing file or a mistyped placeholder stops the
/// server from starting instead of failing the first user who asks for a code. An app's own
/// templates (``AppMailTemplate``) come with each mail and win over these.
public struct MailTemplates: Sendable {
    /// The locales a template file exists for.
    public static let locales = EmailToSend.builtInLocales
    static let fallbackLocale = "en"

    struct Message: Sendable {
        var subject: TemplateText
        var text: TemplateText
        var html: TemplateText
    }

    private let messages: [String: [EmailToSend.Template: Message]]
    /// `layout.html` before and after its `{{content}}`, its `{{lang}}` left as ``langMark``.
    private let layout: (before: TemplateText, after: TemplateText)
    /// Stands for `{{lang}}` in ``layout`` until a locale is put in; no template file holds it.
    private static let langMark = "\u{0}lang\u{0}"

    /// The templates shipped in this module's resources.
    public static func bundled() throws(MailTemplateError) -> MailTemplates {
        guard let directory = bundledDirectory else {
            throw MailTemplateError(file: "Templates", problem: "the module's resource bundle is not found")
        }
        return try MailTemplates(directory: directory)
    }

    static var bundledDirectory: URL? { Bundle.module.resourceURL?.appendingPathComponent("Templates") }

    /// Reads `layout.html` and `<locale>/<template>.txt` for every locale and template from
    /// `directory`, and checks each.
    public init(directory: URL) throws(MailTemplateError) {
        let layout = try Self.layout(Self.read(directory, "layout.html"))
        self.layout = layout
        var messages: [String: [EmailToSend.Template: Message]] = [:]
        for locale in Self.locales {
            let (beforeContent, afterContent) = Self.layout(layout, for: locale)
            for template in EmailToSend.Template.allCases {
                let file = "\(locale)/\(template.rawValue).txt"
                let sections = try Self.sections(of: Self.read(directory, file), file: file)
                let message = Message(
                    subject: try Self.parse(sections.subject, file: file, section: "subject"),
                    text: try Self.parse(sections.text, file: file, section: "text"),
                    html: beforeContent + (try Self.parse(sections.html, file: file, section: "html")) + afterContent)
                try Self.check(message, template: template, file: file)
                messages[locale, default: [:]][template] = message
            }
        }
        self.messages = messages
    }

    /// The locale `mail` is written in: the first of its languages (each as itself, then by its
    /// language: `ko-KR`, then `ko`) that has a template, the app's own for this mail or a
    /// built-in one; else `en`.
    public func locale(of mail: EmailToSend) -> String {
        let available = Set(Self.locales).union(mail.ownTemplates.keys)
        return LanguageTag.lookup(mail.languages, in: available) ?? Self.fallbackLocale
    }

    /// The subject, plain-text body and HTML body of `mail`, in its locale (``locale(of:)``), from
    /// the app's own template of that locale if it has one. Values are escaped in the HTML; in the
    /// subject, control characters become spaces, so an app's name cannot end the header line.
    public func render(_ mail: EmailToSend) -> (subject: String, text: String, html: String) {
        let locale = locale(of: mail)
        func value(_ placeholder: Placeholder) -> String {
            switch placeholder {
            case .appName: mail.appName
            case .code: mail.code ?? ""
            case .minutes: String(mail.minutes)
            case .newEmail: mail.newEmail ?? ""
            }
        }
        let subject: String, text: String, html: String
        if let own = mail.ownTemplates[locale] {
            subject = own.subjectTemplate.rendered { Self.oneLine(value($0)) }
            text = own.textTemplate.rendered(value)
            let (before, after) = Self.layout(layout, for: locale)
            let content = own.htmlTemplate.map { $0.rendered { Self.escapingHTML(value($0)) } } ?? Self.paragraphs(text)
            let escaped = { (placeholder: Placeholder) in Self.escapingHTML(value(placeholder)) }
            html = before.rendered(escaped) + content + after.rendered(escaped)
        } else {
            // init loaded every template for every built-in locale, and `locale` is one of them.
            let message = messages[locale]![mail.template]!
            subject = message.subject.rendered { Self.oneLine(value($0)) }
            text = message.text.rendered(value)
            html = message.html.rendered { Self.escapingHTML(value($0)) }
        }
        return (subject, text, html)
    }

    /// A plain-text body as HTML: escaped, a paragraph for each run of lines between blank lines,
    /// its line breaks kept.
    static func paragraphs(_ text: String) -> String {
        text.components(separatedBy: "\n\n")
            .map { $0.trimmingCharacters(in: .newlines) }
            .filter { !$0.isEmpty }
            .map { "<p>" + escapingHTML($0).replacingOccurrences(of: "\n", with: "<br>\n") + "</p>" }
            .joined(separator: "\n")
    }

    static func escapingHTML(_ value: String) -> String {
        var out = ""
        out.reserveCapacity(value.utf8.count)
        for character in value {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(character)
            }
        }
        return out
    }

    /// Control characters (C0 with CR and LF, DEL, C1) and the Unicode line and paragraph
    /// separators become spaces: what ``HeaderText`` refuses, and what would read as a line break.
    static func oneLine(_ value: String) -> String {
        var scalars = String.UnicodeScalarView()
        for scalar in value.unicodeScalars {
            let breaks = scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.value == 0x2028 || scalar.value == 0x2029
            scalars.append(breaks ? " " : scalar)
        }
        return String(scalars)
    }

    // MARK: - Loading

    private static func read(_ directory: URL, _ file: String) throws(MailTemplateError) -> String {
        let content: String
        do {
            content = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
        } catch {
            throw MailTemplateError(file: file, problem: "cannot be read as UTF-8 (\(error.localizedDescription))")
        }
        return content.replacingOccurrences(of: "\r\n", with: "\n")
    }

    /// The layout around the HTML section, split at its `{{content}}`, its `{{lang}}` marked.
    private static func layout(_ layout: String) throws(MailTemplateError) -> (TemplateText, TemplateText) {
        let parts = layout.replacingOccurrences(of: "{{lang}}", with: langMark).components(separatedBy: "{{content}}")
        guard parts.count == 2 else {
            throw MailTemplateError(file: "layout.html", problem: "must hold {{content}} exactly once")
        }
        return (try parse(parts[0], file: "layout.html", section: "layout"), try parse(parts[1], file: "layout.html", section: "layout"))
    }

    /// The layout with its `{{lang}}` filled for `locale` (a language tag: letters, digits and `-`,
    /// nothing to escape in an attribute).
    private static func layout(_ layout: (before: TemplateText, after: TemplateText), for locale: String) -> (TemplateText, TemplateText) {
        let fill = { (text: String) in text.replacingOccurrences(of: langMark, with: locale) }
        return (layout.before.mappingLiterals(fill), layout.after.mappingLiterals(fill))
    }

    private static let sectionNames = ["subject", "text", "html"]

    /// Splits a file at its `--- name ---` lines; what comes before the first is a note and is dropped.
    private static func sections(of content: String, file: String) throws(MailTemplateError) -> (subject: String, text: String, html: String) {
        var names: [String] = []
        var bodies: [[Substring]] = []
        for line in content.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("--- "), trimmed.hasSuffix(" ---"), trimmed.count > 8 {
                names.append(String(trimmed.dropFirst(4).dropLast(4)))
                bodies.append([])
            } else if !bodies.isEmpty {
                bodies[bodies.count - 1].append(line)
            }
        }
        guard names == sectionNames else {
            throw MailTemplateError(file: file, problem: "needs the sections --- subject ---, --- text ---, --- html --- in this order, found \(names)")
        }
        let texts = bodies.map { lines in
            var lines = lines[...]
            while let first = lines.first, first.allSatisfy(\.isWhitespace) { lines.removeFirst() }
            while let last = lines.last, last.allSatisfy(\.isWhitespace) { lines.removeLast() }
            return lines.joined(separator: "\n")
        }
        guard !texts[0].isEmpty, !texts[0].contains("\n") else {
            throw MailTemplateError(file: file, problem: "the subject must be one line")
        }
        guard oneLine(texts[0]) == texts[0] else {
            throw MailTemplateError(file: file, problem: "the subject holds a control character")
        }
        return (texts[0], texts[1], texts[2])
    }

    private static func parse(_ text: String, file: String, section: String) throws(MailTemplateError) -> TemplateText {
        do {
            return try TemplateText(parsing: text)
        } catch {
            switch error {
            case .unknownPlaceholder(let name):
                throw MailTemplateError(file: file, problem: "unknown placeholder {{\(name)}} in the \(section)")
            case .unclosedBraces:
                throw MailTemplateError(file: file, problem: "a {{ with no }} in the \(section)")
            }
        }
    }

    /// Every template names the app in all three parts; a code template gives the code and its
    /// lifetime in both bodies, the notice the new address (``EmailToSend/Template/problem(in:_:)``,
    /// the rules an app's own templates are checked by too). A placeholder the template has no
    /// value for is refused, so it cannot render empty.
    private static func check(_ message: Message, template: EmailToSend.Template, file: String) throws(MailTemplateError) {
        for (part, text) in [(TemplatePart.subject, message.subject), (.text, message.text), (.html, message.html)] {
            switch template.problem(in: part, text) {
            case .noValue(let extra)?:
                throw MailTemplateError(file: file, problem: "{{\(extra.rawValue)}} has no value in this template (\(part.rawValue))")
            case .missing(let missing)?:
                throw MailTemplateError(file: file, problem: "the \(part.rawValue) must hold {{\(missing.rawValue)}}")
            case nil:
                continue
            }
        }
    }
}

/// Why the mail templates cannot be loaded: which file, and what is wrong with it.
public struct MailTemplateError: Error, Equatable, CustomStringConvertible {
    /// Relative to the templates folder, e.g. `ko/sign_in_code.txt`.
    public let file: String
    public let problem: String

    public var description: String { "mail template \(file): \(problem)" }
}
