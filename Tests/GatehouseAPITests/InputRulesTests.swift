import Foundation
@testable import GatehouseAPI
import GatehouseCore
import GatehouseTesting
import Testing

/// What users type (API.md "Numbers", "Hardening rules"): names refuse invisible formatting,
/// emails are compared in one Unicode form.
@Suite("Input rules")
struct InputRulesTests {
    /// Bidi embeddings, overrides and isolates, zero-width characters, the BOM, a soft hyphen:
    /// all general category Cf, all invisible or reordering when shown.
    static let formatCharacters: [Unicode.Scalar] = [
        "\u{202A}", "\u{202B}", "\u{202C}", "\u{202D}", "\u{202E}", "\u{2066}", "\u{2067}", "\u{2068}", "\u{2069}",
        "\u{200B}", "\u{200E}", "\u{200F}", "\u{2060}", "\u{FEFF}", "\u{00AD}",
    ]

    @Test(arguments: formatCharacters)
    func namesRefuseFormatCharacters(_ scalar: Unicode.Scalar) {
        let error = #expect(throws: GatehouseError.self) { try InputRules.name("Ada\(Character(scalar))Lovelace", field: "first_name") }
        #expect(error?.code == .validationFailed)
        #expect(error?.fieldErrors.first?.field == "first_name")
    }

    @Test func namesKeepLettersMarksAndSpaces() throws {
        for name in ["Zoë", "José María", "O'Brien-Smith", "李小龍", "Ngũgĩ", "e\u{0301}mile"] {
            #expect(try InputRules.name(name, field: "first_name") == name)
        }
        #expect(throws: GatehouseError.self) { try InputRules.name("Ada\u{7}", field: "first_name") }
        // The joiners spell names in Persian and Indic scripts (and emoji sequences): kept.
        for name in ["\u{0645}\u{06CC}\u{200C}\u{0631}\u{0648}\u{062F}", "\u{0915}\u{094D}\u{200D}\u{0937}"] {
            #expect(try InputRules.name(name, field: "first_name") == name)
        }
    }

    /// The code-point test is the general category, for every scalar Unicode has.
    @Test func controlCharactersAreCategoryCc() {
        var controls = 0
        var disagreements: [UInt32] = []
        for value in UInt32(0)...0x10FFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            let isControl = scalar.properties.generalCategory == .control
            if isControl { controls += 1 }
            if InputRules.hasControlCharacters(String(scalar)) != isControl { disagreements.append(value) }
        }
        #expect(disagreements.isEmpty)
        #expect(controls == 65)
        #expect(InputRules.hasControlCharacters("refresh-token\u{85}") && !InputRules.hasControlCharacters("Zoë 李"))
    }

    @Test(arguments: formatCharacters + ["\u{200C}", "\u{200D}"])
    func emailsRefuseFormatCharacters(_ scalar: Unicode.Scalar) {
        #expect(throws: GatehouseError.self) { try InputRules.email("ada\(Character(scalar))@example.com") }
    }

    @Test func emailsAreOneAddressInEitherUnicodeForm() throws {
        let composed = try InputRules.email("ren\u{E9}e@example.com")
        let decomposed = try InputRules.email("Rene\u{0301}e@Example.com")
        #expect(composed == decomposed)
        #expect(Array(decomposed.unicodeScalars) == Array("ren\u{E9}e@example.com".unicodeScalars), "stored composed (NFC)")
    }

    @Test(arguments: TestDatabase.kinds)
    func signingUpDecomposedThenSigningInComposedIsOneAccount(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(["name": "Names", "rate_limits": ["auth_per_minute_per_ip": 1000]])
        let password = "correct horse battery"
        let signUp = try server.request("POST", "/v1/auth/signup", appKey: app.appKey, json: ["email": "rene\u{0301}e@example.com", "password": .string(password)])
        #expect(signUp.status == 201)
        let userID = try #require(signUp.data?["user"]?["id"]?.stringValue)
        #expect(signUp.data?["user"]?["email"]?.stringValue.map { Array($0.unicodeScalars) } == Array("ren\u{E9}e@example.com".unicodeScalars))

        let signIn = try server.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "ren\u{E9}e@example.com", "password": .string(password)])
        #expect(signIn.status == 200)
        #expect(signIn.data?["user"]?["id"]?.stringValue == userID)
        let again = try server.request("POST", "/v1/auth/signup", appKey: app.appKey, json: ["email": "ren\u{E9}e@example.com", "password": .string(password)])
        #expect(again.problemCode == "auth/email-already-in-use")
    }

    @Test(arguments: TestDatabase.kinds)
    func namesWithBidiOverridesOrZeroWidthCharactersAre400(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(["name": "Names", "rate_limits": ["auth_per_minute_per_ip": 1000]])
        let signUp = try server.request(
            "POST", "/v1/auth/signup", appKey: app.appKey,
            json: ["email": "a@example.com", "password": "correct horse battery", "first_name": "Ada\u{202E}gnp.exe"])
        #expect(signUp.status == 400)
        #expect(signUp.problemCode == "request/validation-failed")
        #expect(signUp.json?["errors"]?.arrayValue?.first?["field"]?.stringValue == "first_name")

        let session = try server.signUp(app)
        let token = try #require(session["access_token"]?.stringValue)
        let patched = try server.request("PATCH", "/v1/me", appKey: app.appKey, bearer: token, json: ["last_name": "Love\u{200B}lace"])
        #expect(patched.status == 400)
        #expect(patched.problemCode == "request/validation-failed")
        #expect(patched.json?["errors"]?.arrayValue?.first?["field"]?.stringValue == "last_name")

        let renamed = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["name": "Pay\u{2067}Pal"])
        #expect(renamed.status == 400)
        #expect(renamed.problemCode == "request/validation-failed")
        #expect(renamed.json?["errors"]?.arrayValue?.first?["field"]?.stringValue == "name")
        #expect(try server.request("GET", "/v1/admin/app", bearer: app.secretKey).data?["name"] == "Names")
    }

    // MARK: Language tags

    /// A user's `locale` is a BCP 47 tag, kept in the RFC's conventional case.
    @Test func languageTagsAreWellFormedAndNormalised() throws {
        let normalised = [
            "ja": "ja", "KO-kr": "ko-KR", "pt-br": "pt-BR", "zh-hant-tw": "zh-Hant-TW", "es-419": "es-419", "sr-latn-rs": "sr-Latn-RS",
            "de-CH-1996": "de-CH-1996", "en-US-u-CA-gregory": "en-US-u-ca-gregory", "en-x-PRIVATE": "en-x-private", "yue": "yue",
        ]
        for (given, expected) in normalised {
            #expect(try InputRules.locale(given) == expected, "\(given)")
        }
        for bad in ["", "j", "ja_JP", "ja-", "-ja", "ja--JP", "en-x", "ja JP", "日本語", "ja-JP-toolongsubtag", "1a", String(repeating: "a", count: 36),
            "en-" + String(repeating: "abcdefgh-", count: 4)]
        {
            let error = #expect(throws: GatehouseError.self, "\(bad)") { try InputRules.locale(bad) }
            #expect(error?.fieldErrors.first?.field == "locale")
        }
        #expect(LanguageTag("zh-Hant-TW")?.lookupChain == ["zh-Hant-TW", "zh-Hant", "zh"])
        #expect(LanguageTag("en-a-bc-x-yz")?.lookupChain == ["en-a-bc-x-yz", "en-a-bc", "en"])
        #expect(LanguageTag.lookup(["de-AT", "ko-KR", "ja"].compactMap(LanguageTag.init), in: ["en", "ko", "ja"]) == "ko")
    }

    /// `Accept-Language` by weight, the header's order among equals; `q=0`, `*` and malformed ranges left out.
    @Test func acceptLanguageIsReadByWeight() {
        func read(_ header: String?) -> [String] { AcceptLanguage.languages(header).map(\.rawValue) }
        #expect(read(nil) == [] && read("") == [])
        #expect(read("fr-CH, fr;q=0.9, en;q=0.8, de;q=0.7, *;q=0.5") == ["fr-CH", "fr", "en", "de"])
        #expect(read("ja;q=0.5, ko, en;q=0.5") == ["ko", "ja", "en"])
        #expect(read("ko;q=0, ja-jp;q=0.001, en;q=1.000") == ["en", "ja-JP"])
        #expect(read("ko;q=1.5, ja;q=.5, zh;q=0.1234, en;q=x, de ; Q=0.3 , fr;level=1") == ["fr", "de"])
        #expect(read("en_US, i am not a tag, pt-BR") == ["pt-BR"])
        #expect(read("ko, KO, ko;q=0.1") == ["ko"])
        #expect(read(Array(repeating: "de", count: 30).joined(separator: ",") + ",ja") == ["de"], "past 20 ranges, the rest is ignored")
    }
}
