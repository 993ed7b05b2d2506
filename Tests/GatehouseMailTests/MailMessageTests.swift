import GatehouseCore
import GatehouseMail
import GatehouseTesting
import Testing

@Suite struct MailMessageTests {
    static let december1st = Int64(1_796_140_800_000)  // 2026-12-01T16:00:00Z, a Tuesday

    static func message(
        from: MailAddress? = nil, to: MailAddress? = nil, subject: String = "Your sign-in code",
        text: String = "Your code is 123456.\nIt expires in 10 minutes.", html: String = "<p>Your code is <b>123456</b>.</p>"
    ) throws -> MailMessage {
        MailMessage(
            from: try from ?? MailAddress("no-reply@shop.example", displayName: "Shop"),
            to: try to ?? MailAddress("ada@example.com"),
            subject: try HeaderText(subject), textBody: text, htmlBody: html,
            clock: ManualClock(millis: december1st))
    }

    @Test func aMessageIsMultipartAlternativeThatPythonReadsBack() throws {
        let message = try Self.message()
        let parsed = try IndependentMailParser.parse(message.rendered())
        #expect(parsed.defects.isEmpty, "\(parsed.defects)")
        #expect(parsed.contentType == "multipart/alternative")
        #expect(parsed.headers["Subject"] == "Your sign-in code")
        #expect(parsed.headers["Date"] == "Tue, 01 Dec 2026 16:00:00 +0000")
        #expect(parsed.headers["Message-ID"] == message.messageID)
        #expect(parsed.headers["MIME-Version"] == "1.0")
        #expect(parsed.from == [["Shop", "no-reply@shop.example"]])
        #expect(parsed.to == [["", "ada@example.com"]])
        #expect(parsed.parts.map(\.contentType) == ["text/plain", "text/html"])
        #expect(parsed.parts.map(\.charset) == ["utf-8", "utf-8"])
        #expect(parsed.parts[0].content == "Your code is 123456.\nIt expires in 10 minutes.")
        #expect(parsed.parts[1].content == "<p>Your code is <b>123456</b>.</p>")
        #expect(parsed.bareLineBreaks == 0)
        #expect(parsed.eightBitBytes == 0)
        #expect(parsed.longestLine <= 78)
    }

    @Test func nonASCIISubjectsNamesAndBodiesSurviveTheRoundTrip() throws {
        let subject = "[상점] 로그인 코드는 123456입니다 — 10분 동안 유효합니다. 요청하지 않으셨다면 무시하세요."
        let longLine = String(repeating: "가나다라마 = ", count: 40)
        let text = "안녕하세요 김철수 님,\r\n\(longLine)\n.a line that starts with a dot\ntrailing space \nand tab\t\n\nend"
        let message = try Self.message(
            from: MailAddress("no-reply@shop.example", displayName: "상점 고객센터"),
            to: MailAddress("chulsoo@example.com", displayName: "김철수"),
            subject: subject, text: text, html: "<p>\(longLine)</p>")
        let raw = message.rendered()
        let parsed = try IndependentMailParser.parse(raw)
        #expect(parsed.defects.isEmpty, "\(parsed.defects)")
        #expect(parsed.headers["Subject"] == subject)
        #expect(parsed.from == [["상점 고객센터", "no-reply@shop.example"]])
        #expect(parsed.to == [["김철수", "chulsoo@example.com"]])
        #expect(parsed.parts[0].content == text.replacingOccurrences(of: "\r\n", with: "\n"))
        #expect(parsed.parts[1].content == "<p>\(longLine)</p>")
        #expect(parsed.parts.map(\.transferEncoding) == ["quoted-printable", "quoted-printable"])
        #expect(parsed.eightBitBytes == 0)
        #expect(parsed.bareLineBreaks == 0)
        #expect(parsed.longestLine <= 78)
        #expect(String(decoding: raw, as: UTF8.self).contains("Subject: =?UTF-8?B?"))
    }

    @Test func aLineBreakOrNULCannotReachAHeader() throws {
        #expect(throws: MailFieldError.controlCharacter) { try MailAddress("ada@example.com\r\nBcc: eve@evil.example") }
        #expect(throws: MailFieldError.controlCharacter) { try MailAddress("ada@example.com\nBcc: eve@evil.example") }
        #expect(throws: MailFieldError.controlCharacter) { try MailAddress("ada@example.com\0") }
        #expect(throws: MailFieldError.controlCharacterInName) { try MailAddress("ada@example.com", displayName: "Ada\r\nBcc: eve@evil.example") }
        #expect(throws: MailFieldError.controlCharacterInName) { try MailAddress("ada@example.com", displayName: "Ada\u{0}") }
        #expect(throws: MailFieldError.controlCharacter) { try HeaderText("Hello\r\nBcc: eve@evil.example") }
        #expect(throws: MailFieldError.controlCharacter) { try HeaderText("Hello\u{85}there") }
        #expect(throws: MailFieldError.controlCharacter) { try MailAddress.parse("Ada <ada@example.com>\r\nBcc: eve@evil.example") }
    }

    @Test func anAddressHasExactlyOneAtAndNothingThatDelimitsAddresses() throws {
        #expect(throws: MailFieldError.notExactlyOneAt) { try MailAddress("ada.example.com") }
        #expect(throws: MailFieldError.notExactlyOneAt) { try MailAddress("ada@eve@example.com") }
        #expect(throws: MailFieldError.emptyPart) { try MailAddress("@example.com") }
        #expect(throws: MailFieldError.emptyPart) { try MailAddress("ada@") }
        #expect(throws: MailFieldError.invalidCharacter) { try MailAddress("ada lovelace@example.com") }
        #expect(throws: MailFieldError.invalidCharacter) { try MailAddress("ada>,<eve@evil.example") }
        #expect(throws: MailFieldError.invalidCharacter) { try MailAddress("ada\u{200B}@example.com") }
        #expect(throws: MailFieldError.invalidCharacter) { try MailAddress("ada\u{2028}@example.com") }
        #expect(throws: MailFieldError.invalidCharacter) { try MailAddress("ada\u{3000}x@example.com") }
        #expect(throws: MailFieldError.tooLong) { try MailAddress(String(repeating: "a", count: 250) + "@b.example") }
        #expect(try MailAddress("ada@example.com").address == "ada@example.com")
    }

    /// A non-ASCII domain has its IDNA form from libcurl (libidn2); a non-ASCII local part has
    /// none, so only SMTPUTF8 can carry it.
    @Test func internationalAddressesHaveTheirIDNAFormOrNeedSMTPUTF8() throws {
        let idn = try MailAddress("user@b\u{00FC}cher.example")
        #expect(idn.asciiDomain == "xn--bcher-kva.example")
        #expect(idn.asciiAddress == "user@xn--bcher-kva.example")
        #expect(!idn.needsSMTPUTF8)
        let japanese = try MailAddress("\u{30E6}\u{30FC}\u{30B6}\u{30FC}@\u{4F8B}\u{3048}.jp")
        #expect(japanese.asciiDomain == "xn--r8jz45g.jp")
        #expect(japanese.asciiAddress == nil)
        #expect(japanese.needsSMTPUTF8)
        #expect(try MailAddress("\u{AE40}@example.com").needsSMTPUTF8)
        #expect(try MailAddress("ada@example.com").asciiAddress == "ada@example.com")
        // No IDNA form: a label over 63 bytes once encoded, a leading combining mark, a "%" that
        // libcurl's URL parser would decode.
        #expect(throws: MailFieldError.invalidDomain) { try MailAddress("a@" + String(repeating: "a", count: 60) + "\u{00FC}\u{00FC}.example") }
        #expect(throws: MailFieldError.invalidDomain) { try MailAddress("a@\u{0301}x.example") }
        #expect(throws: MailFieldError.invalidDomain) { try MailAddress("a@ex%41\u{00FC}.example") }
        // 254 bytes at most in the A-label form too.
        let domain = Array(repeating: "\u{00FC}", count: 10).joined(separator: ".") + ".de"  // each label "xn--tda" once encoded
        let long = String(repeating: "a", count: 254 - 1 - domain.utf8.count) + "@" + domain
        #expect(long.utf8.count == 254)
        #expect(throws: MailFieldError.tooLong) { try MailAddress(long) }
    }

    /// Without SMTPUTF8 the headers carry the domain in A-labels, and stay 7-bit; with it (or for a
    /// local part that has no ASCII form) the address as it is, raw UTF-8 (RFC 6532), which Python
    /// reads back. Display names stay encoded words either way.
    @Test func internationalAddressesAreWrittenAsIDNAOrRawUTF8() throws {
        let idn = try Self.message(to: MailAddress("user@b\u{00FC}cher.example", displayName: "J\u{00FC}rgen"))
        let plain = try IndependentMailParser.parse(idn.rendered())
        #expect(plain.to == [["J\u{00FC}rgen", "user@xn--bcher-kva.example"]])
        #expect(plain.eightBitBytes == 0 && !plain.utf8Headers)
        #expect(plain.defects.isEmpty, "\(plain.defects)")
        #expect(!idn.requiresSMTPUTF8)
        let raw = try IndependentMailParser.parse(idn.rendered(smtputf8: true))
        #expect(raw.to == [["J\u{00FC}rgen", "user@b\u{00FC}cher.example"]])
        #expect(raw.utf8Headers)
        #expect(raw.defects.isEmpty, "\(raw.defects)")

        let local = try Self.message(to: MailAddress("jos\u{00E9}@b\u{00FC}cher.example"))
        #expect(local.requiresSMTPUTF8)
        for smtputf8 in [false, true] {
            let parsed = try IndependentMailParser.parse(local.rendered(smtputf8: smtputf8))
            #expect(parsed.to == [["", "jos\u{00E9}@b\u{00FC}cher.example"]], "\(smtputf8)")
            #expect(parsed.defects.isEmpty, "\(parsed.defects)")
        }
        // The Message-ID names the sender's domain in A-labels.
        let sender = try Self.message(from: MailAddress("no-reply@b\u{00FC}cher.example"))
        #expect(sender.messageID.hasSuffix("@xn--bcher-kva.example>"))
    }

    @Test func aDisplayNameThatLooksLikeHeadersOrAddressesStaysOneName() throws {
        // Quotes, a comma, angle brackets and an encoded word that decodes to "\r\nBcc: ...":
        // each must come back as the literal name of the one mailbox it belongs to.
        let names = [
            "Eve\" <eve@evil.example>, \"Mallory",
            "=?UTF-8?B?DQpCY2M6IGV2ZUBldmlsLmV4YW1wbGU=?=",
            "Back\\slash \"quoted\"",
        ]
        for name in names {
            let message = try Self.message(from: MailAddress("no-reply@shop.example", displayName: name))
            let parsed = try IndependentMailParser.parse(message.rendered())
            #expect(parsed.from == [[name, "no-reply@shop.example"]], "\(name)")
            #expect(!parsed.headerNames.contains { $0.lowercased() == "bcc" }, "\(name)")
            #expect(parsed.defects.isEmpty, "\(name): \(parsed.defects)")
        }
        // A name too long for one encoded word: several, which an RFC 2047 decoder joins without
        // the folding space between them (Python's address parser keeps that space, against RFC
        // 2047 section 6.2, so the decoded header is compared here).
        let long = "Ada Lovelace =?UTF-8?B?DQpCY2M6IGV2ZUBldmlsLmV4YW1wbGU=?= 에이다 러브레이스"
        let longMessage = try Self.message(from: MailAddress("no-reply@shop.example", displayName: long))
        let longParsed = try IndependentMailParser.parse(longMessage.rendered())
        #expect(longParsed.decodedFrom == "\(long) <no-reply@shop.example>")
        #expect(longParsed.from.map { $0[1] } == ["no-reply@shop.example"])
        #expect(!longParsed.headerNames.contains { $0.lowercased() == "bcc" })
        #expect(longParsed.longestLine <= 78)

        let subject = try Self.message(subject: "=?UTF-8?B?DQpCY2M6IGV2ZUBldmlsLmV4YW1wbGU=?=")
        let parsed = try IndependentMailParser.parse(subject.rendered())
        #expect(parsed.headers["Subject"] == "=?UTF-8?B?DQpCY2M6IGV2ZUBldmlsLmV4YW1wbGU=?=")
        #expect(!parsed.headerNames.contains { $0.lowercased() == "bcc" })
    }

    @Test func anAppsFromSettingIsParsedIntoOneMailbox() throws {
        #expect(try MailAddress.parse("Shop <no-reply@shop.example>") == MailAddress("no-reply@shop.example", displayName: "Shop"))
        #expect(try MailAddress.parse("\"Shop, Inc.\" <no-reply@shop.example>") == MailAddress("no-reply@shop.example", displayName: "Shop, Inc."))
        #expect(try MailAddress.parse(" no-reply@shop.example ") == MailAddress("no-reply@shop.example"))
        #expect(throws: MailFieldError.self) { try MailAddress.parse("Shop <no-reply@shop.example>, eve@evil.example") }
        #expect(throws: MailFieldError.invalidCharacter) { try MailAddress.parse("Shop <no-reply@shop.example>, <eve@evil.example>") }
    }

    @Test func eachMessageHasItsOwnMessageIDOnTheSendersDomain() throws {
        let a = try Self.message(), b = try Self.message()
        #expect(a.messageID != b.messageID)
        #expect(a.messageID.hasPrefix("<") && a.messageID.hasSuffix("@shop.example>"))
    }
}

/// Who a message says it is from, by the mailer it goes through.
@Suite struct MailAddressingTests {
    static let platform = try! MailAddress("no-reply@auth.example.com")

    @Test func overThePlatformsMailerTheAppsFromIsOnlyTheReplyTo() throws {
        var email = AppSettings(name: "Shop").email
        email.from = "PayPal Security <service@paypal.com>"
        let (from, replyTo) = try MailerSelection.addressing(for: email, appName: "가게 Shop", platformSender: Self.platform)
        #expect(from == (try MailAddress("no-reply@auth.example.com", displayName: "가게 Shop")))
        #expect(replyTo == (try MailAddress("service@paypal.com", displayName: "PayPal Security")))
        let long = String(repeating: "가게", count: 30)
        let message = MailMessage(
            from: from, to: try MailAddress("ada@example.com"), replyTo: try MailAddress("a@shop.example", displayName: long),
            subject: try HeaderText("Code"), textBody: "1", htmlBody: "1")
        let parsed = try IndependentMailParser.parse(message.rendered())
        #expect(parsed.defects.isEmpty, "\(parsed.defects)")
        #expect(parsed.longestLine <= 78)
        #expect(parsed.from == [["가게 Shop", "no-reply@auth.example.com"]])
        // (Python's header value keeps the folding space between encoded words; a reader drops it.)
        #expect(parsed.headers["Reply-To"]?.replacingOccurrences(of: " ", with: "") == "\(long)<a@shop.example>")
    }

    @Test func overItsOwnServerAnAppSendsAsItsFrom() throws {
        var email = AppSettings(name: "Shop").email
        email.smtpURL = "smtps://smtp.shop.example"
        email.from = "Shop <hello@shop.example>"
        let (from, replyTo) = try MailerSelection.addressing(for: email, appName: "Shop", platformSender: Self.platform)
        #expect(from == (try MailAddress("hello@shop.example", displayName: "Shop")) && replyTo == nil)
        email.from = nil
        let (fallback, none) = try MailerSelection.addressing(for: email, appName: "Shop", platformSender: Self.platform)
        #expect(fallback == (try MailAddress("no-reply@auth.example.com", displayName: "Shop")) && none == nil)
    }
}
