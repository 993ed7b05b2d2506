import Foundation
import GatehouseCore
import GatehouseMail
import GatehouseOutbound
import GatehouseTesting
import Synchronization
import Testing

/// The mailer against a real SMTP server (python3-aiosmtpd) on loopback.
@Suite struct SMTPMailerTests {
    static func message(to: String = "ada@example.com") throws -> MailMessage {
        MailMessage(
            from: try MailAddress("no-reply@shop.example", displayName: "Shop"), to: try MailAddress(to, displayName: "Ada"),
            subject: try HeaderText("Your code: 123456"), textBody: "Your code is 123456.", htmlBody: "<p>Your code is <b>123456</b>.</p>")
    }

    func expectFailure(_ mailer: some Mailer, _ message: MailMessage) -> MailDeliveryError? {
        do {
            try mailer.send(message)
            Issue.record("the message was delivered")
            return nil
        } catch {
            return error
        }
    }

    @Test func aMessageIsDeliveredAndReadsBackWithBothParts() throws {
        let sink = try SMTPSink()
        let message = try Self.message()
        try SMTPMailer(url: sink.url).send(message)

        let received = try sink.messages()
        try #require(received.count == 1, "\(sink.log)")
        #expect(received[0].mailFrom == "no-reply@shop.example")
        #expect(received[0].recipients == ["ada@example.com"])
        #expect(received[0].authenticatedAs == nil)
        #expect(received[0].header("Message-ID") == message.messageID)
        let parsed = try IndependentMailParser.parse(received[0].raw)
        #expect(parsed.defects.isEmpty, "\(parsed.defects)")
        #expect(parsed.headers["Subject"] == "Your code: 123456")
        #expect(parsed.from == [["Shop", "no-reply@shop.example"]])
        #expect(parsed.to == [["Ada", "ada@example.com"]])
        #expect(parsed.parts.map(\.contentType) == ["text/plain", "text/html"])
        #expect(parsed.parts.map(\.content) == ["Your code is 123456.", "<p>Your code is <b>123456</b>.</p>"])
        // What was sent is what was rendered: SMTP's dot-stuffing and its undoing changed nothing.
        #expect(received[0].raw == message.rendered())
    }

    @Test func a451IsTransientAnd550IsPermanent() throws {
        let sink = try SMTPSink()
        let mailer = try SMTPMailer(url: sink.url)
        try sink.setMode(.refuseTemporarily)
        let temporary = expectFailure(mailer, try Self.message())
        #expect(temporary?.isTransient == true, "\(String(describing: temporary))")
        #expect(temporary?.reason.contains("451") == true, "\(String(describing: temporary))")
        // A recipient deferred is not the server's failure: its circuit breaker does not count it.
        #expect(temporary?.blamesServer == false, "\(String(describing: temporary))")

        try sink.setMode(.refusePermanently)
        let permanent = expectFailure(mailer, try Self.message())
        #expect(permanent?.isTransient == false, "\(String(describing: permanent))")
        #expect(permanent?.reason.contains("550") == true, "\(String(describing: permanent))")

        try sink.setMode(.accept)
        try mailer.send(try Self.message())
        #expect(try sink.messages().count == 1)
    }

    @Test func aServerThatIsDownIsTransient() throws {
        let sink = try SMTPSink()
        let url = sink.url
        sink.stop()
        let started = ContinuousClock.now
        let error = expectFailure(try SMTPMailer(url: url), try Self.message())
        #expect(error?.isTransient == true, "\(String(describing: error))")
        #expect(error?.blamesServer == true, "\(String(describing: error))")
        #expect(ContinuousClock.now - started < .seconds(5))
    }

    @Test func messagesShareAConnectionUntilASendFails() throws {
        let sink = try SMTPSink()
        defer { sink.stop() }
        let mailer = try SMTPMailer(url: sink.url)
        for _ in 0..<3 { try mailer.send(try Self.message()) }
        #expect(try sink.messages().count == 3)
        #expect(sink.connectionCount == 1, "one conversation for the three")
        try sink.setMode(.refuseTemporarily)
        #expect(expectFailure(mailer, try Self.message())?.isTransient == true)
        try sink.setMode(.accept)
        try mailer.send(try Self.message())
        #expect(try sink.messages().count == 4)
        #expect(sink.connectionCount == 2, "the failed send's connection is not used again")
    }

    @Test func aServerThatNeverAnswersIsTransientAfterTheTimeout() throws {
        let sink = try SMTPSink()
        try sink.setMode(.hang)
        // libcurl's connect phase for SMTP includes the greeting: the connect timeout ends it.
        let mailer = try SMTPMailer(url: sink.url, connectTimeout: .seconds(2), timeout: .seconds(4))
        let started = ContinuousClock.now
        let error = expectFailure(mailer, try Self.message())
        let elapsed = ContinuousClock.now - started
        #expect(error?.isTransient == true && error?.blamesServer == true, "\(String(describing: error))")
        #expect(elapsed >= .milliseconds(1900) && elapsed < .seconds(8), "\(elapsed)")
        #expect(sink.connectionCount == 1)
        #expect(try sink.messages().isEmpty)
    }

    @Test func aTenantsServerOnLoopbackIsRefusedBeforeAnyConnection() throws {
        let sink = try SMTPSink()
        for url in [sink.url, "smtp://localhost:\(sink.port)"] {
            let mailer = try SMTPMailer(url: url, addressPolicy: .forTenantURLs(allowPrivate: false))
            let error = expectFailure(mailer, try Self.message())
            #expect(error?.isTransient == false, "\(String(describing: error))")
            #expect(error?.reason.contains("loopback") == true, "\(String(describing: error))")
        }
        #expect(sink.connectionCount == 0)

        try SMTPMailer(url: sink.url, addressPolicy: .forTenantURLs(allowPrivate: true)).send(try Self.message())
        #expect(try sink.messages().count == 1)
    }

    @Test func theAppsServerIsChosenWhenSetAndOnlyItIsRestricted() throws {
        let platform = try SMTPSink(), tenant = try SMTPSink()
        var app = AppSettings(name: "Shop").email
        let log: @Sendable (String) -> Void = { _ in Issue.record("nothing goes to the log") }

        // No smtp_url: the platform's server, trusted though it is on loopback.
        try MailerSelection.mailer(for: app, platformSMTPURL: platform.url, allowPrivateOutbound: false, log: log).send(try Self.message())
        #expect(try platform.messages().count == 1)

        // The app's server, a tenant URL: refused on loopback unless private outbound is allowed.
        app.smtpURL = tenant.url
        let refused = expectFailure(
            try MailerSelection.mailer(for: app, platformSMTPURL: platform.url, allowPrivateOutbound: false, log: log), try Self.message())
        #expect(refused?.reason.contains("loopback") == true, "\(String(describing: refused))")
        #expect(tenant.connectionCount == 0)
        try MailerSelection.mailer(for: app, platformSMTPURL: platform.url, allowPrivateOutbound: true, log: log).send(try Self.message())
        #expect(try tenant.messages().count == 1)
        #expect(try platform.messages().count == 1)
    }

    @Test func logColonWritesTheMessageToTheLog() throws {
        let lines = Mutex<[String]>([])
        let mailer = try MailerSelection.mailer(
            for: AppSettings(name: "Shop").email, platformSMTPURL: "log:", allowPrivateOutbound: false,
            log: { line in lines.withLock { $0.append(line) } })
        try mailer.send(try Self.message())
        let logged = lines.withLock { $0 }
        try #require(logged.count == 1)
        #expect(logged[0].contains("to ada@example.com"))
        #expect(logged[0].contains("Your code is 123456."))
        #expect(logged[0].contains("Subject: Your code: 123456"))
    }

    @Test func aPlainServerIsRefusedUnlessItsHostIsLoopback() throws {
        // 127.1 reaches the sink (which offers no STARTTLS) but is not a loopback host by name:
        // TLS is required, so nothing is sent.
        let sink = try SMTPSink()
        let error = expectFailure(try SMTPMailer(url: "smtp://127.1:\(sink.port)"), try Self.message())
        #expect(error?.isTransient == false, "\(String(describing: error))")
        #expect(sink.connectionCount == 1)
        #expect(try sink.messages().isEmpty)
        #expect(try SMTPMailer(url: sink.url).requiresTLS == false)
        #expect(try SMTPMailer(url: "smtp://localhost:25").requiresTLS == false)
        #expect(try SMTPMailer(url: "smtp://mail.example.com:587").requiresTLS == true)
    }

    @Test func credentialsAreSentAndWrongOnesArePermanentWithoutTheSecretInTheError() throws {
        let sink = try SMTPSink(credentials: ("shop", "correct-horse-battery"))
        try SMTPMailer(url: sink.url, username: "shop", password: "correct-horse-battery").send(try Self.message())
        let received = try sink.messages()
        try #require(received.count == 1, "\(sink.log)")
        #expect(received[0].authenticatedAs == "shop")

        let wrong = expectFailure(try SMTPMailer(url: sink.url, username: "shop", password: "wrong-password-42"), try Self.message())
        #expect(wrong?.isTransient == false, "\(String(describing: wrong))")
        #expect(wrong?.reason.contains("535") == true, "\(String(describing: wrong))")
        #expect(wrong?.reason.contains("wrong-password-42") == false)

        let none = expectFailure(try SMTPMailer(url: sink.url), try Self.message())
        #expect(none?.isTransient == false, "\(String(describing: none))")

        // Credentials in the platform URL are used and kept out of the URL and the errors.
        let fromURL = try SMTPMailer(url: "smtp://shop:correct-horse-battery@127.0.0.1:\(sink.port)")
        #expect(fromURL.url == sink.url)
        try fromURL.send(try Self.message())
        #expect(try sink.messages().count == 2)
        sink.stop()
        let down = expectFailure(fromURL, try Self.message())
        #expect(down?.isTransient == true)
        #expect(down?.description.contains("correct-horse-battery") == false)
    }

    // MARK: Addresses outside ASCII (SMTPUTF8, RFC 6531 / 6532)

    static let jose = "jos\u{00E9}@b\u{00FC}cher.example"
    static let japanese = "\u{30E6}\u{30FC}\u{30B6}\u{30FC}@\u{4F8B}\u{3048}.jp"
    static let idnOnly = "user@b\u{00FC}cher.example"

    /// With SMTPUTF8 offered: `MAIL FROM` carries the parameter, `RCPT TO` the local part as it
    /// is (libcurl 7.88 writes the envelope's domain in A-labels, which RFC 6531 allows), and the
    /// `To` header the address as it is, raw UTF-8, which Python reads back.
    @Test(arguments: [jose, japanese])
    func aNonASCIILocalPartGoesWithSMTPUTF8WhenTheServerOffersIt(_ address: String) throws {
        let sink = try SMTPSink(offersSMTPUTF8: true)
        let message = try Self.message(to: address)
        try SMTPMailer(url: sink.url).send(message)
        let received = try sink.messages()
        try #require(received.count == 1, "\(sink.log)")
        #expect(received[0].mailOptions == ["SMTPUTF8"])
        #expect(received[0].smtputf8)
        let mailbox = try MailAddress(address)
        #expect(received[0].recipients == ["\(mailbox.localPart)@\(mailbox.asciiDomain)"])
        #expect(received[0].raw == message.rendered(smtputf8: true))
        let parsed = try IndependentMailParser.parse(received[0].raw)
        #expect(parsed.utf8Headers)
        #expect(parsed.to == [["Ada", address]])
        #expect(parsed.defects.isEmpty, "\(parsed.defects)")
        #expect(parsed.parts.map(\.content) == ["Your code is 123456.", "<p>Your code is <b>123456</b>.</p>"])
    }

    /// Without SMTPUTF8 a non-ASCII local part cannot be sent: the send stops after `MAIL FROM`
    /// (no raw `RCPT TO` reaches the server), permanently, with a reason that names the server
    /// and the missing extension, not the address.
    @Test(arguments: [jose, japanese])
    func aNonASCIILocalPartIsPermanentlyRefusedWithoutSMTPUTF8(_ address: String) throws {
        let sink = try SMTPSink()
        let mailer = try SMTPMailer(url: sink.url)
        let error = expectFailure(mailer, try Self.message(to: address))
        #expect(error?.isTransient == false, "\(String(describing: error))")
        #expect(error?.blamesServer == false)
        #expect(error?.reason == "\(sink.url) does not offer SMTPUTF8, which the recipient's address needs (its part before the @ is not ASCII)")
        let mailbox = try MailAddress(address)
        #expect(error?.reason.contains(mailbox.localPart) == false)
        #expect(try sink.messages().isEmpty)
        #expect(!sink.log.contains("strict ASCII"), "no non-ASCII command reached the server: \(sink.log)")
        // The mailer goes on with other mail.
        try mailer.send(try Self.message())
        #expect(try sink.messages().count == 1)
    }

    /// An ASCII local part with an IDN domain goes to any server: without SMTPUTF8 as A-labels in
    /// the envelope and the headers (7-bit); with it, libcurl still writes the envelope's domain in
    /// A-labels (and says SMTPUTF8), and the headers carry the address as it is.
    @Test func anIDNDomainGoesAsIDNAWithoutSMTPUTF8AndRawInTheHeadersWithIt() throws {
        let plain = try SMTPSink()
        let message = try Self.message(to: Self.idnOnly)
        try SMTPMailer(url: plain.url).send(message)
        let without = try plain.messages()
        try #require(without.count == 1, "\(plain.log)")
        #expect(without[0].recipients == ["user@xn--bcher-kva.example"])
        #expect(without[0].mailOptions.isEmpty && !without[0].smtputf8)
        let parsedWithout = try IndependentMailParser.parse(without[0].raw)
        #expect(parsedWithout.to == [["Ada", "user@xn--bcher-kva.example"]])
        #expect(parsedWithout.eightBitBytes == 0)
        #expect(parsedWithout.defects.isEmpty, "\(parsedWithout.defects)")

        let offering = try SMTPSink(offersSMTPUTF8: true)
        try SMTPMailer(url: offering.url).send(message)
        let with = try offering.messages()
        try #require(with.count == 1, "\(offering.log)")
        #expect(with[0].recipients == ["user@xn--bcher-kva.example"])
        #expect(with[0].mailOptions == ["SMTPUTF8"])
        let parsedWith = try IndependentMailParser.parse(with[0].raw)
        #expect(parsedWith.to == [["Ada", Self.idnOnly]])
        #expect(parsedWith.defects.isEmpty, "\(parsedWith.defects)")

        // An all-ASCII message is sent as before, SMTPUTF8 offered or not: no parameter, 7-bit.
        let asciiMessage = try Self.message()
        try SMTPMailer(url: offering.url).send(asciiMessage)
        let ascii = try offering.messages()[1]
        #expect(ascii.mailOptions.isEmpty && !ascii.smtputf8)
        #expect(ascii.raw == asciiMessage.rendered())
    }

    /// The sink itself: without SMTPUTF8 offered it refuses a non-ASCII envelope, as a server that
    /// does not speak it does; offered, it refuses one sent without the parameter.
    @Test func theSinkRefusesANonASCIIEnvelopeWithoutSMTPUTF8() throws {
        for offers in [false, true] {
            let sink = try SMTPSink(offersSMTPUTF8: offers)
            let answer = try Self.smtpConversation(port: sink.port, [
                "EHLO test", "MAIL FROM:<a@example.com>", "RCPT TO:<jos\u{00E9}@example.com>", "QUIT",
            ])
            #expect(answer.contains("250-SMTPUTF8") == offers, "\(answer)")
            #expect(answer.contains(offers ? "553 5.6.7" : "500 Error: strict ASCII mode"), "\(answer)")
        }
    }

    /// Speaks to `port` line by line (a test of the sink, not of the mailer): the replies, joined.
    static func smtpConversation(port: UInt16, _ commands: [String]) throws -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(connected == 0)
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var replies = ""
        func readReply() {
            var buffer = [UInt8](repeating: 0, count: 4096)
            var text = ""
            // A reply ends with a line whose code is followed by a space.
            while !text.split(separator: "\r\n").contains(where: { $0.count >= 4 && Array($0.utf8)[3] == UInt8(ascii: " ") }) {
                let n = read(fd, &buffer, buffer.count)
                if n <= 0 { break }
                text += String(decoding: buffer[0..<n], as: UTF8.self)
            }
            replies += text
        }
        readReply()
        for command in commands {
            let bytes = Array((command + "\r\n").utf8)
            _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            readReply()
        }
        return replies
    }

    @Test func anUnusableURLIsRefusedWhenTheMailerIsMade() {
        for url in ["http://mail.example.com", "smtp://", "smtp://mail.example.com/path", "smtp://mail.example.com:25\r\nRCPT", "log:"] {
            #expect(throws: MailDeliveryError.self, "\(url)") { try SMTPMailer(url: url) }
        }
    }
}
