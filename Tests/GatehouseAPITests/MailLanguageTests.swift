import Foundation
import GatehouseCore
import GatehouseTesting
import Testing

/// Mail in the user's language (API.md, 2026-12-05), end to end: the HTTP request, the outbox, the
/// real SMTP sink, the mail read back. The language is the user's `locale`, else the app's
/// `email.locale`, else the request's `Accept-Language`, else English; an app's own templates
/// (`email.templates`) win over the built-in ones and are checked when saved. On both databases.
@Suite("Mail in the user's language")
struct MailLanguageTests {
    typealias World = EmailFlowsAPITests.World

    /// The one new mail to `address`: its subject and both bodies.
    static func mail(_ world: World, to address: String) throws -> (subject: String, text: String, html: String) {
        let mails = try world.deliver(after: world.seen).filter { $0.recipients == [address] }
        world.seen = try world.sink.messages().count
        guard mails.count == 1, let mail = mails.first else { throw MailExpectation("expected one mail to \(address), got \(mails.count)") }
        let parsed = try IndependentMailParser.parse(mail.raw)
        func part(_ type: String) -> String { parsed.parts.first { $0.contentType == type }?.content ?? "" }
        return (parsed.headers["Subject"] ?? "", part("text/plain"), part("text/html"))
    }

    static func sendSignInCode(_ world: World, to address: String, acceptLanguage: String? = nil) throws {
        let headers = acceptLanguage.map { [("Accept-Language", $0)] } ?? []
        let response = try world.server.request("POST", "/v1/auth/email-code/send", appKey: world.app.appKey, headers: headers, json: ["email": .string(address)])
        #expect(response.status == 202, "\(response.json ?? .null)")
    }

    static func signUp(_ world: World, _ email: String, locale: JSON? = nil, acceptLanguage: String? = nil) throws -> TestResponse {
        var body: [String: JSON] = ["email": .string(email), "password": "correct horse battery"]
        if let locale { body["locale"] = locale }
        let headers = acceptLanguage.map { [("Accept-Language", $0)] } ?? []
        return try world.server.request("POST", "/v1/auth/signup", appKey: world.app.appKey, headers: headers, json: .object(body))
    }

    static func patchApp(_ world: World, _ patch: JSON) throws -> TestResponse {
        try world.server.request("PATCH", "/v1/admin/app", bearer: world.app.secretKey, json: patch)
    }

    static func fieldErrors(_ response: TestResponse) -> [String: String] {
        var errors: [String: String] = [:]
        for error in response.json?["errors"]?.arrayValue ?? [] {
            if let field = error["field"]?.stringValue { errors[field] = error["message"]?.stringValue ?? "" }
        }
        return errors
    }

    static let japaneseSignIn = "【Codes Test】ログイン用の確認コード"
    static let koreanSignIn = "[Codes Test] 로그인 인증 코드"
    static let englishSignIn = "Your Codes Test sign-in code"

    // MARK: - The user's locale

    /// A user who signed up in Japanese gets Japanese mail, the sign-up's verification code first,
    /// whatever language a later request speaks.
    @Test(arguments: TestDatabase.kinds)
    func aJapaneseUserGetsJapaneseMail(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let session = try Self.signUp(world, "hanako@example.com", locale: "JA-jp", acceptLanguage: "ko")
        #expect(session.status == 201)
        #expect(session.data?["user"]?["locale"] == "ja-JP", "normalised to its conventional case")
        let verification = try Self.mail(world, to: "hanako@example.com")
        #expect(verification.subject == "【Codes Test】メールアドレスの確認コード")
        #expect(verification.text.contains("このコードの有効期限は10分です。"))
        #expect(verification.html.contains("<html lang=\"ja\">") && verification.html.contains("お心当たりのない場合は"))

        // A sign-in code to the existing account: the user's language, not the request's.
        try Self.sendSignInCode(world, to: "hanako@example.com", acceptLanguage: "ko-KR, en;q=0.5")
        #expect(try Self.mail(world, to: "hanako@example.com").subject == Self.japaneseSignIn)

        // The admin's user object shows it too.
        let id = try #require(session.data?["user"]?["id"]?.stringValue)
        let admin = try world.server.request("GET", "/v1/admin/users/\(id)", bearer: world.app.secretKey)
        #expect(admin.data?["locale"] == "ja-JP")

        // A tag that is not one is refused with the field named, and no account is made.
        for bad: JSON in ["japanese language", "ja_JP", "ja-", "x", "en-x", .string("ja-" + String(repeating: "a", count: 33)), 7] {
            let refused = try Self.signUp(world, "taro@example.com", locale: bad)
            #expect(refused.status == 400 && refused.problemCode == "request/validation-failed", "\(bad)")
            #expect(Self.fieldErrors(refused).keys.contains("locale"), "\(bad)")
        }
        #expect(try Self.signUp(world, "taro@example.com", locale: "zh-hant-tw").data?["user"]?["locale"] == "zh-Hant-TW")
    }

    /// `PATCH /v1/me` sets the locale (normalised), null clears it, a bad one is 400; the mail to
    /// the user follows it.
    @Test(arguments: TestDatabase.kinds)
    func patchMeSetsAndClearsTheLocale(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let session = try Self.signUp(world, "ada@example.com")
        #expect(session.data?["user"]?["locale"] == .null)
        _ = try Self.mail(world, to: "ada@example.com")
        let bearer = session.data?["access_token"]?.stringValue

        let set = try world.server.request("PATCH", "/v1/me", appKey: world.app.appKey, bearer: bearer, json: ["locale": "ko-kr"])
        #expect(set.status == 200 && set.data?["locale"] == "ko-KR")
        #expect(try world.server.request("GET", "/v1/me", appKey: world.app.appKey, bearer: bearer).data?["locale"] == "ko-KR")
        let reauthentication = try world.server.request("POST", "/v1/auth/reauthenticate/send-code", appKey: world.app.appKey, bearer: bearer, headers: [("Accept-Language", "ja")])
        #expect(reauthentication.status == 202)
        #expect(try Self.mail(world, to: "ada@example.com").subject == "[Codes Test] 본인 확인 코드", "the user's ko-KR finds ko")

        let bad = try world.server.request("PATCH", "/v1/me", appKey: world.app.appKey, bearer: bearer, json: ["locale": "ko KR", "first_name": "Ada"])
        #expect(bad.status == 400 && Self.fieldErrors(bad).keys.sorted() == ["locale"])
        #expect(try world.server.request("GET", "/v1/me", appKey: world.app.appKey, bearer: bearer).data?["first_name"] == .null, "nothing written")

        let cleared = try world.server.request("PATCH", "/v1/me", appKey: world.app.appKey, bearer: bearer, json: ["locale": .null])
        #expect(cleared.status == 200 && cleared.data?["locale"] == .null)
        world.clock.advance(seconds: 61)
        #expect(try world.server.request("POST", "/v1/auth/reauthenticate/send-code", appKey: world.app.appKey, bearer: bearer).status == 202)
        #expect(try Self.mail(world, to: "ada@example.com").subject == "Your Codes Test confirmation code")

        // The change is recorded as a user.updated naming the field.
        let events = try world.server.request("GET", "/v1/admin/events?type=user.updated", bearer: world.app.secretKey)
        let fields = (events.json?["data"]?.arrayValue ?? []).compactMap { $0["data"]?["fields"] }
        #expect(fields.contains(["locale"]))
    }

    /// A code sign-up may name the new account's language.
    @Test(arguments: TestDatabase.kinds)
    func aCodeSignUpMayNameTheLocale(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        try Self.sendSignInCode(world, to: "grace@example.com")
        let code = try world.code(to: "grace@example.com").code
        let created = try world.post("/v1/auth/email-code/verify", ["email": "grace@example.com", "code": .string(code), "locale": "ko"])
        #expect(created.status == 201 && created.data?["user"]?["locale"] == "ko")
        world.clock.advance(seconds: 61)
        try Self.sendSignInCode(world, to: "grace@example.com")
        #expect(try Self.mail(world, to: "grace@example.com").subject == Self.koreanSignIn)
    }

    // MARK: - The order: user, app, request, English

    @Test(arguments: TestDatabase.kinds)
    func theLanguageIsTheUsersThenTheAppsThenTheRequestsThenEnglish(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        #expect(try world.server.request("GET", "/v1/admin/app", bearer: world.app.secretKey).data?["email"]?["locale"] == .null, "unset by default")

        // No user, no app locale: the request's best supported language, by q.
        try Self.sendSignInCode(world, to: "a1@example.com", acceptLanguage: "fr-CH, fr;q=0.9, ja;q=0.4, ko;q=0.8, *;q=0.1")
        #expect(try Self.mail(world, to: "a1@example.com").subject == Self.koreanSignIn)
        try Self.sendSignInCode(world, to: "a2@example.com", acceptLanguage: "ko;q=0, ja-JP;q=0.2, en;q=0.1")
        #expect(try Self.mail(world, to: "a2@example.com").subject == Self.japaneseSignIn, "q=0 is not acceptable; ja-JP finds ja")
        try Self.sendSignInCode(world, to: "a3@example.com", acceptLanguage: "de, fr")
        #expect(try Self.mail(world, to: "a3@example.com").subject == Self.englishSignIn, "none supported: English")
        try Self.sendSignInCode(world, to: "a4@example.com")
        #expect(try Self.mail(world, to: "a4@example.com").subject == Self.englishSignIn, "no header: English")
        try Self.sendSignInCode(world, to: "a5@example.com", acceptLanguage: "ja;q=nonsense, ko;q=0.5")
        #expect(try Self.mail(world, to: "a5@example.com").subject == Self.koreanSignIn, "a malformed q leaves its range out")

        // The app's language wins over the request's.
        let patched = try Self.patchApp(world, ["email": ["locale": "ja"]])
        #expect(patched.status == 200 && patched.data?["email"]?["locale"] == "ja")
        try Self.sendSignInCode(world, to: "b1@example.com", acceptLanguage: "ko")
        #expect(try Self.mail(world, to: "b1@example.com").subject == Self.japaneseSignIn)

        // The user's wins over the app's; a user without one gets the app's.
        #expect(try Self.signUp(world, "korean@example.com", locale: "ko").status == 201)
        #expect(try Self.mail(world, to: "korean@example.com").subject == "[Codes Test] 이메일 인증 코드")
        #expect(try Self.signUp(world, "plain@example.com", acceptLanguage: "ko").status == 201)
        #expect(try Self.mail(world, to: "plain@example.com").subject == "【Codes Test】メールアドレスの確認コード")
        // A user's language without templates falls through to the app's.
        #expect(try Self.signUp(world, "german@example.com", locale: "de").status == 201)
        #expect(try Self.mail(world, to: "german@example.com").subject == "【Codes Test】メールアドレスの確認コード")

        // Unset again: the request decides once more.
        #expect(try Self.patchApp(world, ["email": ["locale": .null]]).data?["email"]?["locale"] == .null)
        try Self.sendSignInCode(world, to: "c1@example.com", acceptLanguage: "ko")
        #expect(try Self.mail(world, to: "c1@example.com").subject == Self.koreanSignIn)

        // A language the app has no mail for is refused.
        let refused = try Self.patchApp(world, ["email": ["locale": "de"]])
        #expect(refused.status == 400 && Self.fieldErrors(refused).keys.sorted() == ["email.locale"])
    }

    // MARK: - An app's own templates

    static let french: JSON = [
        "subject": "Votre code {{app_name}}",
        "text": "Bonjour,\nvoici votre code pour {{app_name}} :\n\n{{code}}\n\nIl expire dans {{minutes}} minutes.",
    ]
    static let ownJapanese: JSON = [
        "subject": "{{app_name}}のログインコード",
        "text": "コード：{{code}}（{{minutes}}分間有効）{{app_name}}",
        "html": "<h1>{{code}}</h1><p>{{app_name}}・{{minutes}}分</p>",
    ]

    /// An app's own template wins over the built-in one of its purpose and locale, serves a locale
    /// without built-in templates, and without HTML gets one made from its text.
    @Test(arguments: TestDatabase.kinds)
    func anAppsOwnTemplatesAreUsed(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let saved = try Self.patchApp(world, ["email": ["templates": ["sign_in_code": ["FR": Self.french, "ja": Self.ownJapanese]]]])
        #expect(saved.status == 200, "\(saved.json ?? .null)")
        let shown = saved.data?["email"]?["templates"]?["sign_in_code"]
        #expect(shown?["fr"]?["subject"] == "Votre code {{app_name}}" && shown?["fr"]?["html"] == .null, "the locale normalised, as written")
        #expect(shown?["ja"] == ["subject": "{{app_name}}のログインコード", "text": Self.ownJapanese["text"]!, "html": Self.ownJapanese["html"]!])
        #expect(try world.server.request("GET", "/v1/admin/app", bearer: world.app.secretKey).data?["email"]?["templates"]?["sign_in_code"]?["fr"] != nil)

        // fr has no built-in templates: its own serves fr-CA, its HTML made from the text.
        try Self.sendSignInCode(world, to: "amelie@example.com", acceptLanguage: "fr-CA, en;q=0.5")
        let french = try Self.mail(world, to: "amelie@example.com")
        #expect(french.subject == "Votre code Codes Test")
        let code = try #require(french.text.range(of: #"[0-9]{6}"#, options: .regularExpression).map { String(french.text[$0]) })
        #expect(french.text == "Bonjour,\nvoici votre code pour Codes Test :\n\n\(code)\n\nIl expire dans 10 minutes.")
        #expect(french.html.contains("<html lang=\"fr\">"))
        #expect(french.html.contains("<p>Bonjour,<br>\nvoici votre code pour Codes Test :</p>\n<p>\(code)</p>\n<p>Il expire dans 10 minutes.</p>"))
        // The code works.
        #expect(try world.post("/v1/auth/email-code/verify", ["email": "amelie@example.com", "code": .string(code)]).status == 201)

        // ja's own template wins over the built-in one, HTML and all.
        try Self.sendSignInCode(world, to: "jiro@example.com", acceptLanguage: "ja")
        let japanese = try Self.mail(world, to: "jiro@example.com")
        #expect(japanese.subject == "Codes Testのログインコード")
        #expect(japanese.html.contains("<p>Codes Test・10分</p>") && japanese.html.contains("<html lang=\"ja\">"))
        // Another purpose has none of its own: the built-in template.
        #expect(try Self.signUp(world, "jiro2@example.com", acceptLanguage: "ja").status == 201)
        #expect(try Self.mail(world, to: "jiro2@example.com").subject == "【Codes Test】メールアドレスの確認コード")

        // The app's locale may be one of its own templates' (fr-BE finds fr); removing a template with null.
        #expect(try Self.patchApp(world, ["email": ["locale": "fr-BE"]]).status == 200)
        try Self.sendSignInCode(world, to: "b@example.com")
        #expect(try Self.mail(world, to: "b@example.com").subject == "Votre code Codes Test")
        let removed = try Self.patchApp(world, ["email": ["locale": .null, "templates": ["sign_in_code": ["fr": .null]]]])
        #expect(removed.status == 200 && removed.data?["email"]?["templates"]?["sign_in_code"]?["fr"] == nil)
        try Self.sendSignInCode(world, to: "amelie2@example.com", acceptLanguage: "fr-CA")
        #expect(try Self.mail(world, to: "amelie2@example.com").subject == Self.englishSignIn)
    }

    /// A template that would render wrong is refused when saved: the field names the template,
    /// the message the placeholder; nothing is stored.
    @Test(arguments: TestDatabase.kinds)
    func aBadTemplateIsRefusedWhenSaved(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        func refused(_ templates: JSON) throws -> [String: String] {
            let response = try Self.patchApp(world, ["email": ["templates": templates]])
            #expect(response.status == 400 && response.problemCode == "request/validation-failed")
            return Self.fieldErrors(response)
        }
        let text = "{{app_name}}: {{code}} ({{minutes}})"
        var errors = try refused(["sign_in_code": ["ja": ["subject": "{{app_name}}", "text": "{{app_name}} {{nope}} {{code}} {{minutes}}"]]])
        #expect(errors.keys.sorted() == ["email.templates.sign_in_code.ja.text"])
        #expect(errors["email.templates.sign_in_code.ja.text"]?.contains("{{nope}}") == true)

        errors = try refused(["password_reset": ["ko": ["subject": "{{app_name}}", "text": "{{app_name}} {{minutes}}", "html": "<p>{{app_name}} {{code}} {{minutes}} {{new_email}}</p>"]]])
        #expect(errors["email.templates.password_reset.ko.text"] == "Must hold {{code}}.")
        #expect(errors["email.templates.password_reset.ko.html"]?.contains("{{new_email}}") == true)

        errors = try refused(["email_changed_notice": ["en": ["subject": "Changed", "text": "{{app_name}} {{new_email}} {{code}"]]])
        #expect(errors["email.templates.email_changed_notice.en.subject"] == "Must hold {{app_name}}.")
        #expect(errors["email.templates.email_changed_notice.en.text"]?.contains("{{") == true)

        errors = try refused([
            "welcome": ["en": ["subject": "{{app_name}}", "text": .string(text)]],
            "verification": [
                "not a tag": ["subject": "{{app_name}}", "text": .string(text)],
                "en": ["subject": .string(String(repeating: "x", count: 201) + "{{app_name}}"), "text": .string(text), "extra": true],
                "ko": ["subject": "{{app_name}}", "text": .string(String(repeating: "가", count: 7000) + text)],
                "ja": ["subject": "{{app_name}}\n", "text": "{{app_name}}\u{7}{{code}}{{minutes}}"],
            ],
        ])
        #expect(Set(errors.keys) == [
            "email.templates.welcome", "email.templates.verification.not a tag", "email.templates.verification.en.subject",
            "email.templates.verification.en.extra", "email.templates.verification.ko.text", "email.templates.verification.ja.subject",
            "email.templates.verification.ja.text",
        ])
        #expect(try refused(["verification": ["en": ["text": .string(text)]]]).keys.sorted() == ["email.templates.verification.en.subject"])
        #expect(try refused(["reauthentication": ["pt-br": ["subject": "{{app_name}}", "text": .string(text)], "PT-BR": ["subject": "{{app_name}}", "text": .string(text)]]]).count == 1)

        let settings = try world.server.request("GET", "/v1/admin/app", bearer: world.app.secretKey).data?["email"]
        #expect(settings?["templates"] == [:], "nothing stored")
        // All of them together are bounded, however many patches bring them.
        let long = JSON.string(String(repeating: "x", count: 19_000) + text)
        let purposes = ["sign_in_code", "verification", "password_reset", "email_change", "reauthentication"]
        for (index, purpose) in purposes.enumerated() {
            let three: JSON = .object(Dictionary(uniqueKeysWithValues: ["fr", "de", "es"].map { ($0, ["subject": "{{app_name}}", "text": long] as JSON) }))
            let response = try Self.patchApp(world, ["email": ["templates": [purpose: three]]])
            if index < 4 {
                #expect(response.status == 200, "\(purpose): \(response.json ?? .null)")
            } else {
                #expect(response.status == 400 && Self.fieldErrors(response).keys.sorted() == ["email.templates"])
                #expect(Self.fieldErrors(response)["email.templates"]?.contains("262144 bytes") == true)
            }
        }
        #expect(try Self.patchApp(world, ["email": ["templates": .null]]).status == 200)
        // A line break and a tab in a body are fine, and CRLF is kept as LF.
        #expect(try Self.patchApp(world, ["email": ["templates": ["verification": ["en": ["subject": "{{app_name}}", "text": "{{app_name}}\r\n\t{{code}} {{minutes}}"]]]]]).data?["email"]?["templates"]?["verification"]?["en"]?["text"] == "{{app_name}}\n\t{{code}} {{minutes}}")
    }
}

/// A Tenants file's templates are checked as the admin API's are: a bad one stops the start with
/// the template and the placeholder named; a good one is used.
extension TenantsTests {
    @Test(arguments: TestDatabase.kinds)
    func aTenantsFilesMailTemplatesAreCheckedAndUsed(_ kind: TestDatabaseKind) throws {
        defer { try? FileManager.default.removeItem(atPath: folder) }
        func file(_ text: String) -> JSON {
            [
                "app_key": "pk_tenant_mail_0123456789", "name": "Mail Tenant", "sign_in_methods": ["email_code"],
                "email": ["locale": "fr", "templates": ["sign_in_code": ["fr": ["subject": "Code {{app_name}}", "text": .string(text)]]]],
            ]
        }
        try write("mail.json", file("{{app_name}} {{code}} {{minutess}}"))
        #expect {
            try TestServer(kind) { $0.tenantsDirectory = folder }
        } throws: { error in
            let text = String(describing: error)
            return text.contains("mail.json") && text.contains("email.templates.sign_in_code.fr.text") && text.contains("{{minutess}}")
        }

        try write("mail.json", file("Votre code {{code}} pour {{app_name}}, valable {{minutes}} minutes."))
        let sink = try SMTPSink()
        defer { sink.stop() }
        let url = sink.url
        let server = try TestServer(kind) {
            $0.tenantsDirectory = folder
            $0.smtpURL = url
        }
        defer { server.stop() }
        server.gatehouse.stopBackgroundWork()
        let sent = try server.request("POST", "/v1/auth/email-code/send", appKey: "pk_tenant_mail_0123456789", json: ["email": "amelie@example.com"])
        #expect(sent.status == 202)
        while try server.gatehouse.outboxWorker.runOnce() > 0 {}
        let mail = try IndependentMailParser.parse(try #require(try sink.messages().last).raw)
        #expect(mail.headers["Subject"] == "Code Mail Tenant")
        #expect(mail.parts.first?.content.hasPrefix("Votre code ") == true)
    }
}
