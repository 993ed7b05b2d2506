import Foundation
import GatehouseCore
@testable import GatehouseMail
import GatehouseTesting
import Testing

@Suite struct MailTemplatesTests {
    static let templates = Result { try MailTemplates.bundled() }

    static func mail(
        _ template: EmailToSend.Template, locale: String = "en", appName: String = "Shop", to: String = "ada@example.com"
    ) -> EmailToSend {
        template == .emailChangedNotice
            ? EmailToSend(template: template, to: to, languages: languages(locale), appName: appName, code: nil, minutes: 10, newEmail: "ada.new@example.com")
            : EmailToSend(template: template, to: to, languages: languages(locale), appName: appName, code: "482913", minutes: 10)
    }

    static func languages(_ tags: String...) -> [LanguageTag] { tags.compactMap(LanguageTag.init) }

    @Test func everyTemplateInEveryLocaleRendersWhatItMust() throws {
        let templates = try Self.templates.get()
        for locale in MailTemplates.locales {
            for template in EmailToSend.Template.allCases {
                let (subject, text, html) = templates.render(Self.mail(template, locale: locale))
                let name = "\(locale)/\(template.rawValue)"
                for part in [subject, text, html] {
                    #expect(!part.contains("{{") && !part.contains("}}"), "\(name): \(part)")
                    #expect(part.contains("Shop"), "\(name): \(part)")
                }
                if template == .emailChangedNotice {
                    #expect(text.contains("ada.new@example.com") && html.contains("ada.new@example.com"), "\(name)")
                } else {
                    #expect(text.contains("482913") && html.contains("482913"), "\(name)")
                    #expect(text.contains("10") && html.contains("10"), "\(name)")
                }
                #expect(!text.contains("http") && !html.contains("href"), "\(name): no links")
                #expect(html.hasPrefix("<!DOCTYPE html>\n<html lang=\"\(locale)\">"), "\(name)")
                _ = try HeaderText(subject)
            }
        }
    }

    @Test func valuesAreEscapedInTheHTMLAndAsGivenInTheText() throws {
        let name = "<b>&\"x'</b>"
        let (subject, text, html) = try Self.templates.get().render(Self.mail(.signInCode, appName: name))
        #expect(subject == "Your \(name) sign-in code")
        #expect(text.contains("sign in to \(name):"))
        #expect(html.contains("sign in to &lt;b&gt;&amp;&quot;x&#39;&lt;/b&gt;:"))
        #expect(!html.contains(name) && !html.contains("<b>&"))
    }

    @Test func aValueIsNeverReadAsATemplate() throws {
        let (subject, text, _) = try Self.templates.get().render(Self.mail(.signInCode, appName: "{{code}}"))
        #expect(subject == "Your {{code}} sign-in code")
        #expect(text.contains("sign in to {{code}}:"))
    }

    @Test func aLineBreakInTheAppsNameCannotReachTheSubject() throws {
        let name = "Shop\r\nBcc: eve@evil.example\n\u{0}\t\u{7F}\u{85}\u{2028}x"
        let (subject, text, _) = try Self.templates.get().render(Self.mail(.verification, appName: name))
        #expect(subject == "Verify your email for Shop  Bcc: eve@evil.example      x")
        _ = try HeaderText(subject)
        #expect(text.contains(name), "the body keeps the name as given")
    }

    @Test func koreanIsKoreanAndAnUnknownLocaleIsEnglish() throws {
        let templates = try Self.templates.get()
        for locale in ["ko", "ko-KR", "KO-kr"] {
            let (subject, text, html) = templates.render(Self.mail(.signInCode, locale: locale))
            #expect(subject == "[Shop] 로그인 인증 코드", "\(locale)")
            #expect(text.contains("Shop 로그인 인증 코드입니다.\n\n482913\n\n이 코드는 10분 동안 유효합니다."), "\(locale)")
            #expect(html.contains("<p>이 코드는 10분 동안 유효합니다.</p>"), "\(locale)")
        }
        let notice = templates.render(Self.mail(.emailChangedNotice, locale: "ko"))
        #expect(notice.subject == "[Shop] 이메일 주소가 변경되었습니다")
        #expect(notice.text.contains("이메일 주소가 변경되었습니다.\n\n새 이메일 주소: ada.new@example.com"))
        for locale in ["fr", "", "english-language", "-", "KO_kr"] {
            #expect(templates.render(Self.mail(.signInCode, locale: locale)).subject == "Your Shop sign-in code", "\(locale)")
        }
    }

    @Test func japaneseIsJapanese() throws {
        let templates = try Self.templates.get()
        for locale in ["ja", "ja-JP"] {
            let mail = Self.mail(.signInCode, locale: locale)
            #expect(templates.locale(of: mail) == "ja")
            let (subject, text, html) = templates.render(mail)
            #expect(subject == "【Shop】ログイン用の確認コード", "\(locale)")
            #expect(text == "Shopにログインするための確認コードです。\n\n482913\n\nこのコードの有効期限は10分です。\n\nお心当たりのない場合は、このメールを破棄してください。")
            #expect(html.hasPrefix("<!DOCTYPE html>\n<html lang=\"ja\">") && html.contains("<p>このコードの有効期限は10分です。</p>"))
        }
        let notice = templates.render(Self.mail(.emailChangedNotice, locale: "ja"))
        #expect(notice.subject == "【Shop】メールアドレスが変更されました")
        #expect(notice.text.contains("新しいメールアドレス：ada.new@example.com"))
    }

    /// The first language with a template wins, each tried as itself and then by its language;
    /// none: English.
    @Test func theFirstLanguageWithATemplateIsChosen() throws {
        let templates = try Self.templates.get()
        func locale(_ tags: String...) -> String {
            var mail = Self.mail(.verification)
            mail.languages = tags.compactMap(LanguageTag.init)
            return templates.locale(of: mail)
        }
        #expect(locale() == "en")
        #expect(locale("de", "ja") == "ja")
        #expect(locale("ko-KR", "ja") == "ko")
        #expect(locale("zh-Hant-TW", "de-AT") == "en")
        #expect(locale("en-GB", "ko") == "en")
    }

    static func own(_ subject: String, _ text: String, _ html: String? = nil) throws -> AppMailTemplate {
        try AppMailTemplate(subject: subject, text: text, html: html)
    }

    /// An app's own template wins over the built-in one of its locale, gives a locale without
    /// built-in templates its mail, and without HTML of its own gets one made from its text.
    @Test func anAppsOwnTemplateWinsAndItsTextMakesItsHTML() throws {
        let templates = try Self.templates.get()
        var mail = Self.mail(.signInCode, locale: "fr-CA", appName: "Shop & <Co>")
        mail.ownTemplates = [
            "fr": try Self.own("Votre code {{app_name}}", "Bonjour,\nvoici votre code pour {{app_name}} :\n\n{{code}}\n\nIl expire dans {{minutes}} minutes."),
            "ja": try Self.own("{{app_name}} のコード", "{{code}} ({{minutes}}分) {{app_name}}", "<h1>{{code}}</h1><p>{{app_name}} {{minutes}}</p>"),
        ]
        #expect(templates.locale(of: mail) == "fr")
        let (subject, text, html) = templates.render(mail)
        #expect(subject == "Votre code Shop & <Co>")
        #expect(text == "Bonjour,\nvoici votre code pour Shop & <Co> :\n\n482913\n\nIl expire dans 10 minutes.")
        #expect(html.hasPrefix("<!DOCTYPE html>\n<html lang=\"fr\">"))
        #expect(html.contains("<p>Bonjour,<br>\nvoici votre code pour Shop &amp; &lt;Co&gt; :</p>\n<p>482913</p>\n<p>Il expire dans 10 minutes.</p>"))
        #expect(html.hasSuffix("</html>\n"))

        mail.languages = Self.languages("ja")
        let japanese = templates.render(mail)
        #expect(japanese.subject == "Shop & <Co> のコード" && japanese.text == "482913 (10分) Shop & <Co>")
        #expect(japanese.html.contains("<h1>482913</h1><p>Shop &amp; &lt;Co&gt; 10</p>") && japanese.html.contains("<html lang=\"ja\">"))
        // Another purpose's mail has no own template here: the built-in one.
        mail.languages = Self.languages("ko")
        #expect(templates.render(mail).subject == "[Shop & <Co>] 로그인 인증 코드")
    }

    @Test(arguments: MailTemplates.locales)
    func aRenderedMailIsAMessageThatPythonReadsBack(_ locale: String) throws {
        let appName = ["ko": "상점 <Shop> & \"Co\"", "ja": "ショップ <Shop> & \"Co\""][locale] ?? "Shop <Shop> & \"Co\""
        for template in EmailToSend.Template.allCases {
            let (subject, text, html) = try Self.templates.get().render(Self.mail(template, locale: locale, appName: appName))
            let message = MailMessage(
                from: try MailAddress("no-reply@shop.example", displayName: appName), to: try MailAddress("ada@example.com"),
                subject: try HeaderText(subject), textBody: text, htmlBody: html)
            let parsed = try IndependentMailParser.parse(message.rendered())
            let name = "\(locale)/\(template.rawValue)"
            #expect(parsed.defects.isEmpty, "\(name): \(parsed.defects)")
            #expect(parsed.headers["Subject"] == subject, "\(name)")
            #expect(parsed.parts.map(\.contentType) == ["text/plain", "text/html"], "\(name)")
            #expect(parsed.parts.map(\.content) == [text, html], "\(name)")
            #expect(parsed.eightBitBytes == 0 && parsed.bareLineBreaks == 0 && parsed.longestLine <= 78, "\(name)")
        }
    }

    @Test func theComposerSealsTheRenderedMailForTheApp() throws {
        let templates = try Self.templates.get()
        let sealer = try SecretSealer(masterKey: Array(repeating: 7, count: 32))
        let composer = TemplatedMailComposer(templates: templates, sealer: sealer)
        let app = AppID.generate()
        let mail = Self.mail(.passwordReset, locale: "ko")
        let item = try composer.outboxItem(mail, app: app, idempotencyKey: "password_reset/usr_1/1")
        #expect(item.appID == app && item.kind == .mail && item.sealed && item.idempotencyKey == "password_reset/usr_1/1")
        #expect(!item.payload.contains("482913"))
        let opened = try sealer.open(item.payload, app: app, field: QueuedMail.sealedField)
        let rendered = templates.render(mail)
        #expect(QueuedMail(json: try JSON.parse(Array(opened.utf8))) == QueuedMail(to: "ada@example.com", subject: rendered.subject, text: rendered.text, html: rendered.html))
        #expect(throws: (any Error).self) { try sealer.open(item.payload, app: AppID.generate(), field: QueuedMail.sealedField) }
        #expect(throws: GatehouseError.self) {
            try composer.outboxItem(Self.mail(.signInCode, to: "ada@example.com\r\nBcc: eve@evil.example"), app: app, idempotencyKey: "k")
        }
    }

    // MARK: - Broken templates stop the server from starting

    func loading(_ change: (URL) throws -> Void) throws -> MailTemplateError? {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("mail-templates-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.copyItem(at: #require(MailTemplates.bundledDirectory), to: directory)
        try change(directory)
        do {
            _ = try MailTemplates(directory: directory)
            return nil
        } catch {
            return error
        }
    }

    func editing(_ file: String, _ edit: @escaping (String) -> String) -> (URL) throws -> Void {
        { directory in
            let url = directory.appendingPathComponent(file)
            try edit(String(contentsOf: url, encoding: .utf8)).write(to: url, atomically: true, encoding: .utf8)
        }
    }

    @Test func theShippedTemplatesLoadAndABrokenOneIsRefused() throws {
        #expect(try loading { _ in } == nil)

        let missing = try loading { try FileManager.default.removeItem(at: $0.appendingPathComponent("ko/verification.txt")) }
        #expect(missing?.file == "ko/verification.txt")

        let unknown = try loading(editing("en/sign_in_code.txt") { $0.replacingOccurrences(of: "{{minutes}} minutes", with: "{{minute}} minutes") })
        #expect(unknown == MailTemplateError(file: "en/sign_in_code.txt", problem: "unknown placeholder {{minute}} in the text"))

        let noCode = try loading(editing("ko/reauthentication.txt") { $0.replacingOccurrences(of: ">{{code}}<", with: "><") })
        #expect(noCode == MailTemplateError(file: "ko/reauthentication.txt", problem: "the html must hold {{code}}"))

        let noValue = try loading(editing("en/email_changed_notice.txt") { $0 + "{{code}}\n" })
        #expect(noValue == MailTemplateError(file: "en/email_changed_notice.txt", problem: "{{code}} has no value in this template (html)"))

        let unclosed = try loading(editing("en/email_change.txt") { $0.replacingOccurrences(of: "{{app_name}} email:\n", with: "{{app_name email:\n") })
        #expect(unclosed?.file == "en/email_change.txt")

        let noSubjectName = try loading(editing("ko/verification.txt") { $0.replacingOccurrences(of: "[{{app_name}}] ", with: "") })
        #expect(noSubjectName == MailTemplateError(file: "ko/verification.txt", problem: "the subject must hold {{app_name}}"))

        let noSections = try loading(editing("en/password_reset.txt") { $0.replacingOccurrences(of: "--- text ---", with: "") })
        #expect(noSections?.file == "en/password_reset.txt")

        let noContent = try loading(editing("layout.html") { $0.replacingOccurrences(of: "{{content}}", with: "") })
        #expect(noContent == MailTemplateError(file: "layout.html", problem: "must hold {{content}} exactly once"))
    }
}
