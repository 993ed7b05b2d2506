import Foundation
import GatehouseCore
import GatehouseCrypto
import GatehouseTesting
import Testing

/// Every emailed-code flow of API.md, end to end: the HTTP request, the outbox, the real SMTP
/// sink, the code read out of the delivered mail, and the answer to it. On both databases.
@Suite("Emailed codes")
struct EmailFlowsAPITests {
    /// A server whose platform mailer is the sink; its worker is stepped by hand and its clock
    /// moved by hand, so the send windows and expiries are exact.
    final class World: @unchecked Sendable {
        let sink: SMTPSink
        let clock = ManualClock()
        let server: TestServer
        let app: TestServer.CreatedApp

        init(_ kind: TestDatabaseKind, settings: JSON = [:], offersSMTPUTF8: Bool = false) throws {
            sink = try SMTPSink(offersSMTPUTF8: offersSMTPUTF8)
            let url = sink.url
            server = try TestServer(kind, clock: clock) { $0.smtpURL = url }
            server.gatehouse.stopBackgroundWork()
            var all: [String: JSON] = [
                "name": "Codes Test", "sign_in_methods": ["password", "email_code"], "rate_limits": ["auth_per_minute_per_ip": 1000],
            ]
            for (key, value) in settings.objectValue ?? [:] { all[key] = value }
            app = try server.createApp(.object(all))
        }

        func stop() {
            server.stop()
            sink.stop()
        }

        func post(_ path: String, _ json: JSON?, bearer: String? = nil) throws -> TestResponse {
            try server.request("POST", path, appKey: app.appKey, bearer: bearer, json: json)
        }

        /// Delivers what is due and returns the messages the sink got since `before`.
        func deliver(after before: Int = 0) throws -> [SMTPSink.Message] {
            while try server.gatehouse.outboxWorker.runOnce() > 0 {}
            return Array(try sink.messages().dropFirst(before))
        }

        /// The one new mail to `address`, and the code in its text part.
        func code(to address: String) throws -> (code: String, text: String, subject: String) {
            let mails = try deliver(after: seen).filter { $0.recipients == [address] }
            seen = try sink.messages().count
            guard mails.count == 1, let mail = mails.first else {
                throw MailExpectation("expected one mail to \(address), got \(mails.count)")
            }
            let parsed = try IndependentMailParser.parse(mail.raw)
            let text = parsed.parts.first { $0.contentType == "text/plain" }?.content ?? ""
            guard let range = text.range(of: #"\b[0-9]{6}\b"#, options: .regularExpression) else {
                throw MailExpectation("no code in: \(text)")
            }
            return (String(text[range]), text, parsed.headers["Subject"] ?? "")
        }

        var seen = 0
    }

    @Test(arguments: TestDatabase.kinds)
    func aCodeSignsUpThenSignsInAndIsUsedOnce(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let send = try world.post("/v1/auth/email-code/send", ["email": "grace@example.com"])
        #expect(send.status == 202 && send.body.isEmpty)
        let first = try world.code(to: "grace@example.com")
        #expect(first.subject.contains("Codes Test") && first.text.contains("Codes Test"))
        let created = try world.post("/v1/auth/email-code/verify", ["email": "grace@example.com", "code": .string(first.code)])
        #expect(created.status == 201)
        #expect(created.data?["is_new_user"] == true && created.data?["user"]?["email_verified"] == true)
        #expect(created.data?["user"]?["identities"] == [])
        let replay = try world.post("/v1/auth/email-code/verify", ["email": "grace@example.com", "code": .string(first.code)])
        #expect(replay.status == 400 && replay.problemCode == "auth/invalid-code")

        world.clock.advance(seconds: 61)
        #expect(try world.post("/v1/auth/email-code/send", ["email": "grace@example.com"]).status == 202)
        let second = try world.code(to: "grace@example.com")
        let signedIn = try world.post("/v1/auth/email-code/verify", ["email": "grace@example.com", "code": .string(second.code)])
        #expect(signedIn.status == 200 && signedIn.data?["is_new_user"] == false)
        #expect(signedIn.data?["user"]?["id"] == created.data?["user"]?["id"])
        let token = signedIn.data?["access_token"]?.stringValue ?? ""
        let claims = try JSON.parse(Array(Base64URL.decode(String(token.split(separator: ".")[1])) ?? []))
        #expect(claims["amr"] == ["otp"])
    }

    /// A code that is not `code`.
    static func wrong(_ code: String, _ n: Int = 1) -> String {
        let value = (Int(code)! + n) % 1_000_000
        return String(repeating: "0", count: 6 - String(value).count) + String(value)
    }

    /// Moves the clock to one second past the next full hour, so that a test's guesses all fall
    /// in one fixed hour.
    static func startOfAnHour(_ world: World) {
        let now = world.clock.nowMillis()
        world.clock.advance(seconds: (3_600_000 - now % 3_600_000) / 1000 + 1)
    }

    /// Wrong codes count per address across codes and purposes: fresh codes every minute, each
    /// under its 5 tries, do not buy more guesses. The 11th check in the hour is 429, even with
    /// the right code, until the hour ends.
    @Test(arguments: TestDatabase.kinds)
    func tenWrongCodesForAnAddressInAnHourStopEveryCheckOfItWhateverTheCodeAndPurpose(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        _ = try world.server.signUp(world.app, email: "ada@example.com")
        Self.startOfAnHour(world)
        _ = try world.deliver()
        world.seen = try world.sink.messages().count
        var failures = 0
        func guess(_ path: String, _ body: JSON) throws {
            let answer = try world.post(path, body)
            #expect(answer.status == 400 && answer.problemCode == "auth/invalid-code", "guess \(failures + 1): \(answer.status)")
            failures += 1
        }
        // Two sign-in codes, four and three wrong tries each (none burnt), then a reset code.
        for tries in [4, 3] {
            #expect(try world.post("/v1/auth/email-code/send", ["email": "ada@example.com"]).status == 202)
            let code = try world.code(to: "ada@example.com").code
            for n in 1...tries { try guess("/v1/auth/email-code/verify", ["email": "ada@example.com", "code": .string(Self.wrong(code, n))]) }
            world.clock.advance(seconds: 61)
        }
        #expect(try world.post("/v1/auth/password-reset/send", ["email": "ada@example.com"]).status == 202)
        let reset = try world.code(to: "ada@example.com").code
        for n in 1...3 {
            try guess("/v1/auth/password-reset/confirm", ["email": "ada@example.com", "code": .string(Self.wrong(reset, n)), "password": "a new password 1"])
        }
        #expect(failures == 10)
        let right = try world.post("/v1/auth/password-reset/confirm", ["email": "ada@example.com", "code": .string(reset), "password": "a new password 1"])
        #expect(right.status == 429 && right.problemCode == "auth/too-many-attempts")
        #expect(Int(right.header("Retry-After") ?? "") ?? 0 > 3000, "until the hour ends")
        #expect(try world.post("/v1/auth/email-code/send", ["email": "ada@example.com"]).status == 202)
        let fresh = try world.code(to: "ada@example.com").code
        let signIn = try world.post("/v1/auth/email-code/verify", ["email": "ada@example.com", "code": .string(fresh)])
        #expect(signIn.status == 429 && signIn.problemCode == "auth/too-many-attempts")
        // Another address of the app is not held back.
        #expect(try world.post("/v1/auth/email-code/send", ["email": "bob@example.com"]).status == 202)
        let bob = try world.code(to: "bob@example.com").code
        #expect(try world.post("/v1/auth/email-code/verify", ["email": "bob@example.com", "code": .string(bob)]).status == 201)
        // The next hour, the address's checks are answered again.
        Self.startOfAnHour(world)
        #expect(try world.post("/v1/auth/email-code/send", ["email": "ada@example.com"]).status == 202)
        let later = try world.code(to: "ada@example.com").code
        #expect(try world.post("/v1/auth/email-code/verify", ["email": "ada@example.com", "code": .string(later)]).status == 200)
    }

    /// An address without an account is held to the same count (guesses with no code out
    /// included), and the right code then makes no account.
    @Test(arguments: TestDatabase.kinds)
    func anAddressWithoutAnAccountIsHeldToTheSameCountAndGetsNoAccount(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        Self.startOfAnHour(world)
        let address = "stranger@example.com"
        for n in 1...3 {
            let answer = try world.post("/v1/auth/email-code/verify", ["email": .string(address), "code": .string(Self.wrong("000000", n))])
            #expect(answer.status == 400 && answer.problemCode == "auth/invalid-code")
        }
        var code = ""
        for tries in [4, 3] {
            #expect(try world.post("/v1/auth/email-code/send", ["email": .string(address)]).status == 202)
            code = try world.code(to: address).code
            for n in 1...tries {
                let answer = try world.post("/v1/auth/email-code/verify", ["email": .string(address), "code": .string(Self.wrong(code, n))])
                #expect(answer.status == 400 && answer.problemCode == "auth/invalid-code")
            }
            if tries == 4 { world.clock.advance(seconds: 61) }
        }
        let right = try world.post("/v1/auth/email-code/verify", ["email": .string(address), "code": .string(code)])
        #expect(right.status == 429 && right.problemCode == "auth/too-many-attempts")
        let users = try world.server.request("GET", "/v1/admin/users", bearer: world.app.secretKey)
        #expect(users.status == 200 && users.data?.arrayValue?.isEmpty == true, "no account was made")
    }

    /// Twenty failures in a day stop the address until the day ends, even across hours.
    @Test(arguments: TestDatabase.kinds)
    func twentyWrongCodesInADayStopTheAddressUntilTheDayEnds(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        // The start of a day, so that the three hours below fall in it.
        let now = world.clock.nowMillis()
        world.clock.advance(seconds: (86_400_000 - now % 86_400_000) / 1000 + 1)
        let address = "carol@example.com"
        for hour in 0..<3 {
            for n in 1...(hour < 2 ? 10 : 1) {
                let answer = try world.post("/v1/auth/email-code/verify", ["email": .string(address), "code": .string(Self.wrong("000000", n))])
                #expect(answer.status == (hour < 2 ? 400 : 429), "hour \(hour), guess \(n)")
                if hour == 2 { #expect(Int(answer.header("Retry-After") ?? "") ?? 0 > 3 * 3600) }
            }
            Self.startOfAnHour(world)
        }
    }

    /// Past `rate_limits.mail_per_hour` a send answers as any other (202) and its mail is not
    /// queued; the operator sees it in the metrics and the app's audit log (once an hour).
    @Test(arguments: TestDatabase.kinds)
    func pastItsMailCapAnAppsSendsAnswerTheSameAndQueueNoMail(_ kind: TestDatabaseKind) throws {
        let world = try World(kind, settings: ["rate_limits": ["auth_per_minute_per_ip": 1000, "mail_per_hour": 3]])
        defer { world.stop() }
        Self.startOfAnHour(world)
        for n in 1...5 {
            let send = try world.post("/v1/auth/email-code/send", ["email": .string("user\(n)@example.com")])
            #expect(send.status == 202 && send.body.isEmpty, "send \(n)")
        }
        let mails = try world.deliver()
        #expect(mails.flatMap(\.recipients).sorted() == ["user1@example.com", "user2@example.com", "user3@example.com"])
        #expect(try MetricsScrape(world.server)[#"gatehouse_mail_capped_total{app_id="\#(world.app.id)"}"#] == 2, "by app: the operator sees who")
        let events = try world.server.gatehouse.database.query(
            "SELECT data FROM events WHERE type = 'app.mail_capped' AND app_id = \(world.app.id)")
        #expect(events.count == 1, "once in the hour")
        #expect(try events.first?.string("data").contains("\"mail_per_hour\":3") == true)
        // The next hour the app sends again.
        Self.startOfAnHour(world)
        #expect(try world.post("/v1/auth/email-code/send", ["email": "user4@example.com"]).status == 202)
        #expect(try world.deliver(after: 3).flatMap(\.recipients) == ["user4@example.com"])
    }

    /// Both counts are the cluster's, not a node's: guesses and mails spread over two nodes of
    /// one database add up.
    @Test(arguments: TestDatabase.kinds)
    func theGuessAndMailCountsAreSharedByEveryNode(_ kind: TestDatabaseKind) throws {
        let world = try World(kind, settings: ["rate_limits": ["auth_per_minute_per_ip": 1000, "mail_per_hour": 3]])
        defer { world.stop() }
        let other = try TestServer(anotherNodeOf: world.server, clock: world.clock)
        defer { other.stop() }
        other.gatehouse.stopBackgroundWork()
        Self.startOfAnHour(world)
        let nodes = [world.server, other]
        for n in 1...10 {
            let answer = try nodes[n % 2].request(
                "POST", "/v1/auth/email-code/verify", appKey: world.app.appKey, json: ["email": "dan@example.com", "code": .string(Self.wrong("000000", n))])
            #expect(answer.status == 400, "guess \(n)")
        }
        let eleventh = try world.server.request(
            "POST", "/v1/auth/email-code/verify", appKey: world.app.appKey, json: ["email": "dan@example.com", "code": "123456"])
        #expect(eleventh.status == 429 && eleventh.problemCode == "auth/too-many-attempts")
        for n in 1...4 {
            let send = try nodes[n % 2].request("POST", "/v1/auth/email-code/send", appKey: world.app.appKey, json: ["email": .string("node\(n)@example.com")])
            #expect(send.status == 202)
        }
        #expect(try world.deliver().count == 3)
    }

    /// An admin sets the cap up to the server's maximum (`GATEHOUSE_MAX_MAIL_PER_HOUR`), no higher.
    @Test(arguments: TestDatabase.kinds)
    func theMailCapIsSetUpToThePlatformsMaximum(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind) { $0.maxMailPerHour = 800 }
        defer { server.stop() }
        let app = try server.createApp(["name": "Capped"])
        #expect(try server.request("GET", "/v1/admin/app", bearer: app.secretKey).data?["rate_limits"]?["mail_per_hour"] == 500)
        let over = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["rate_limits": ["mail_per_hour": 801]])
        #expect(over.status == 400 && over.problemCode == "request/validation-failed" && over.text.contains("rate_limits.mail_per_hour"))
        let created = try server.request("POST", "/v1/admin/apps", bearer: TestServer.adminToken, json: ["name": "Big", "rate_limits": ["mail_per_hour": 801]])
        #expect(created.status == 400 && created.problemCode == "request/validation-failed")
        let most = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["rate_limits": ["mail_per_hour": 800]])
        #expect(most.status == 200 && most.data?["rate_limits"]?["mail_per_hour"] == 800)
        let unknown = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["rate_limits": ["mails_per_hour": 1]])
        #expect(unknown.status == 400)
    }

    /// Someone signed up with another's address, and holds a login code from the Apple web flow
    /// for that account. When the address's owner proves it by code, every way in goes: the
    /// login code no longer opens a session either.
    @Test(arguments: TestDatabase.kinds)
    func provingTheAddressVoidsTheWebFlowLoginCodesOfWhoeverSignedUpWithIt(_ kind: TestDatabaseKind) throws {
        let world = try World(kind, settings: ["sign_in_methods": ["password", "email_code", "apple"]])
        defer { world.stop() }
        let signUp = try world.post("/v1/auth/signup", ["email": "victim@example.com", "password": "the squatter's password"])
        let id = UserID(unchecked: try #require(signUp.data?["user"]?["id"]?.stringValue))
        _ = try world.code(to: "victim@example.com")  // the verification mail, unread by the squatter
        let loginCode = "a login code from the Apple web flow"
        let now = world.clock.nowMillis()
        try world.server.gatehouse.store.app(AppID(unchecked: world.app.id)).identities.insertLoginCode(LoginCode(
            codeHash: Digest.hex(Digest.sha256(Array(loginCode.utf8))), userID: id, method: .apple, provider: "apple", isNewUser: false, codeChallenge: nil,
            createdAt: now, expiresAt: now + 60_000))

        #expect(try world.post("/v1/auth/email-code/send", ["email": "victim@example.com"]).status == 202)
        let proved = try world.post("/v1/auth/email-code/verify", ["email": "victim@example.com", "code": .string(try world.code(to: "victim@example.com").code)])
        #expect(proved.status == 200)
        let exchanged = try world.post("/v1/auth/exchange", ["login_code": .string(loginCode)])
        #expect(exchanged.status == 400)
        #expect(exchanged.problemCode == "auth/invalid-login-code")
    }

    @Test(arguments: TestDatabase.kinds)
    func sendsAreLimitedPerAddressAndPurposeTheSameWithOrWithoutAnAccount(_ kind: TestDatabaseKind) throws {
        let world = try World(kind, settings: ["allow_signup": false])
        defer { world.stop() }
        // No account, sign-up off: 202 and no mail; the windows count all the same.
        #expect(try world.post("/v1/auth/email-code/send", ["email": "nobody@example.com"]).status == 202)
        #expect(try world.deliver().isEmpty)
        let again = try world.post("/v1/auth/email-code/send", ["email": "nobody@example.com"])
        #expect(again.status == 429 && again.problemCode == "auth/too-many-requests")
        #expect(Int(again.header("Retry-After") ?? "") == 60)
        // Another purpose has its own window.
        #expect(try world.post("/v1/auth/password-reset/send", ["email": "nobody@example.com"]).status == 202)
        // The 11th in an hour.
        for _ in 0..<9 {
            world.clock.advance(seconds: 61)
            #expect(try world.post("/v1/auth/email-code/send", ["email": "nobody@example.com"]).status == 202)
        }
        world.clock.advance(seconds: 61)
        let eleventh = try world.post("/v1/auth/email-code/send", ["email": "nobody@example.com"])
        #expect(eleventh.status == 429)
        #expect((Int(eleventh.header("Retry-After") ?? "") ?? 0) > 60)
        #expect(try world.deliver().isEmpty, "nothing was ever sent to an address without an account")
    }

    @Test(arguments: TestDatabase.kinds)
    func aFloodOfSendsToManyAddressesFromOneClientIsLimited(_ kind: TestDatabaseKind) throws {
        let world = try World(kind, settings: ["rate_limits": ["auth_per_minute_per_ip": 3]])
        defer { world.stop() }
        for n in 0..<3 {
            #expect(try world.post("/v1/auth/email-code/send", ["email": .string("user\(n)@example.com")]).status == 202)
        }
        let fourth = try world.post("/v1/auth/email-code/send", ["email": "user3@example.com"])
        #expect(fourth.status == 429 && fourth.problemCode == "auth/too-many-requests" && fourth.header("Retry-After") != nil)
        #expect(try world.deliver().count == 3, "nothing was queued for the refused send")
    }

    /// Under `email_collision: separate` two accounts may share an address: each has its own
    /// verification code, and one's wrong tries do not burn the other's; the address's send
    /// windows are shared.
    @Test(arguments: TestDatabase.kinds)
    func accountsSharingAnAddressHaveTheirOwnVerificationCodes(_ kind: TestDatabaseKind) throws {
        let world = try World(kind, settings: ["email_collision": "separate"])
        defer { world.stop() }
        let gatehouse = world.server.gatehouse
        let app = try #require(try gatehouse.directory.app(id: AppID(unchecked: world.app.id)))
        let data = gatehouse.store.app(app.id)
        var tokens: [String] = []
        for _ in 0..<2 {
            let now = world.clock.nowMillis()
            let user = User(id: .generate(), email: "shared@example.com", emailVerified: false, firstName: nil, lastName: nil, createdAt: now, updatedAt: now, lastSignInAt: nil)
            try data.users.insertUser(user, passwordHash: nil, identity: nil, event: Event(type: .userSignedUp, userID: user.id, sessionID: nil, ip: nil, userAgent: nil, createdAt: now))
            tokens.append(try gatehouse.sessions.startSession(app: app, data, user: user, method: .emailCode, isNewUser: true, origin: RequestOrigin(ip: nil, userAgent: nil)).session().accessToken)
        }
        #expect(try world.post("/v1/auth/email/verification/send", nil, bearer: tokens[0]).status == 202)
        let first = try world.code(to: "shared@example.com").code
        // The windows are the address's: a second account does not mail it sooner.
        #expect(try world.post("/v1/auth/email/verification/send", nil, bearer: tokens[1]).status == 429)
        world.clock.advance(seconds: 61)
        #expect(try world.post("/v1/auth/email/verification/send", nil, bearer: tokens[1]).status == 202)
        _ = try world.code(to: "shared@example.com")
        let wrong = first == "000000" ? "000001" : "000000"
        for _ in 0..<5 { _ = try world.post("/v1/auth/email/verification/confirm", ["code": .string(wrong)], bearer: tokens[1]) }
        let verified = try world.post("/v1/auth/email/verification/confirm", ["code": .string(first)], bearer: tokens[0])
        #expect(verified.status == 200 && verified.data?["email_verified"] == true)
    }

    @Test(arguments: TestDatabase.kinds)
    func theFifthWrongCodeBurnsItAndEveryLaterTryIs429(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        #expect(try world.post("/v1/auth/email-code/send", ["email": "ada@example.com"]).status == 202)
        let right = try world.code(to: "ada@example.com").code
        let wrong = right == "000000" ? "111111" : "000000"
        for _ in 0..<5 {
            let answer = try world.post("/v1/auth/email-code/verify", ["email": "ada@example.com", "code": .string(wrong)])
            #expect(answer.status == 400 && answer.problemCode == "auth/invalid-code")
        }
        let burned = try world.post("/v1/auth/email-code/verify", ["email": "ada@example.com", "code": .string(right)])
        #expect(burned.status == 429 && burned.problemCode == "auth/too-many-attempts")
        // A new code works again.
        world.clock.advance(seconds: 61)
        #expect(try world.post("/v1/auth/email-code/send", ["email": "ada@example.com"]).status == 202)
        let fresh = try world.code(to: "ada@example.com").code
        #expect(try world.post("/v1/auth/email-code/verify", ["email": "ada@example.com", "code": .string(fresh)]).status == 201)
    }

    @Test(arguments: TestDatabase.kinds)
    func badCodesAreClear4xxAndNeverReachAnotherPurposeOrApp(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        for code in ["12345", "1234567", "12a456", "１２３４５６", ""] {
            let answer = try world.post("/v1/auth/email-code/verify", ["email": "ada@example.com", "code": .string(code)])
            #expect(answer.status == 400 && answer.problemCode == "request/validation-failed", "\(code)")
        }
        #expect(try world.post("/v1/auth/email-code/verify", ["email": "not an address", "code": "123456"]).problemCode == "request/validation-failed")
        _ = try world.server.signUp(world.app, email: "ada@example.com")
        _ = try world.code(to: "ada@example.com")  // the sign-up's verification mail
        #expect(try world.post("/v1/auth/password-reset/send", ["email": "ada@example.com"]).status == 202)
        let reset = try world.code(to: "ada@example.com").code
        // A password-reset code is no sign-in code.
        #expect(try world.post("/v1/auth/email-code/verify", ["email": "ada@example.com", "code": .string(reset)]).problemCode == "auth/invalid-code")
        // Nor is it anything in another app.
        let other = try world.server.createApp(["name": "Other", "sign_in_methods": ["password", "email_code"]])
        let elsewhere = try world.server.request(
            "POST", "/v1/auth/password-reset/confirm", appKey: other.appKey, json: ["email": "ada@example.com", "code": .string(reset), "password": "a new password 1"])
        #expect(elsewhere.status == 400 && elsewhere.problemCode == "auth/invalid-code")
        // Expired after 10 minutes.
        world.clock.advance(seconds: 601)
        let late = try world.post("/v1/auth/password-reset/confirm", ["email": "ada@example.com", "code": .string(reset), "password": "a new password 1"])
        #expect(late.status == 400 && late.problemCode == "auth/code-expired")
        // The method must be on: an app without email_code refuses code sign-in.
        let plain = try world.server.createApp(["name": "Plain"])
        let off = try world.server.request("POST", "/v1/auth/email-code/send", appKey: plain.appKey, json: ["email": "ada@example.com"])
        #expect(off.status == 403 && off.problemCode == "auth/sign-in-method-disabled")
    }

    @Test(arguments: TestDatabase.kinds)
    func signUpMailsAVerificationCodeThatVerifiesTheAddress(_ kind: TestDatabaseKind) throws {
        let world = try World(kind, settings: ["email": ["locale": "ko"]])
        defer { world.stop() }
        let session = try world.server.signUp(world.app, email: "ada@example.com")
        let bearer = session["access_token"]?.stringValue
        let mail = try world.code(to: "ada@example.com")
        #expect(mail.text.contains("인증"), "the app's locale")
        let wrong = try world.post("/v1/auth/email/verification/confirm", ["code": mail.code == "000000" ? "000001" : "000000"], bearer: bearer)
        #expect(wrong.problemCode == "auth/invalid-code")
        let confirmed = try world.post("/v1/auth/email/verification/confirm", ["code": .string(mail.code)], bearer: bearer)
        #expect(confirmed.status == 200 && confirmed.data?["email_verified"] == true)
        let refreshed = try world.post("/v1/auth/refresh", ["refresh_token": session["refresh_token"] ?? .null])
        let token = refreshed.data?["access_token"]?.stringValue ?? ""
        let claims = try JSON.parse(Array(Base64URL.decode(String(token.split(separator: ".")[1])) ?? []))
        #expect(claims["email_verified"] == true)
        // Verified already: 202, and nothing is sent.
        world.clock.advance(seconds: 61)
        #expect(try world.post("/v1/auth/email/verification/send", nil, bearer: bearer).status == 202)
        #expect(try world.deliver(after: world.seen).isEmpty)
    }

    @Test(arguments: TestDatabase.kinds)
    func aPasswordResetEndsEverySession(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let session = try world.server.signUp(world.app, email: "ada@example.com")
        _ = try world.code(to: "ada@example.com")
        #expect(try world.post("/v1/auth/password-reset/send", ["email": "ada@example.com"]).status == 202)
        let code = try world.code(to: "ada@example.com").code
        let weak = try world.post("/v1/auth/password-reset/confirm", ["email": "ada@example.com", "code": .string(code), "password": "short"])
        #expect(weak.status == 400 && weak.problemCode == "auth/weak-password")
        let done = try world.post("/v1/auth/password-reset/confirm", ["email": "ada@example.com", "code": .string(code), "password": "a brand new secret"])
        #expect(done.status == 204)
        let old = try world.post("/v1/auth/refresh", ["refresh_token": session["refresh_token"] ?? .null])
        #expect(old.status == 401)
        #expect(try world.server.request("GET", "/v1/me", appKey: world.app.appKey, bearer: session["access_token"]?.stringValue).status == 401)
        #expect(try world.post("/v1/auth/signin", ["email": "ada@example.com", "password": "correct horse battery"]).status == 400)
        let signedIn = try world.post("/v1/auth/signin", ["email": "ada@example.com", "password": "a brand new secret"])
        #expect(signedIn.status == 200 && signedIn.data?["user"]?["email_verified"] == true)
    }

    @Test(arguments: TestDatabase.kinds)
    func anEmailChangeNeedsARecentLoginAndTheNewAddressesCode(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let session = try world.server.signUp(world.app, email: "ada@example.com")
        let verification = try world.code(to: "ada@example.com").code
        #expect(try world.post("/v1/auth/email/verification/confirm", ["code": .string(verification)], bearer: session["access_token"]?.stringValue).status == 200)
        _ = try world.server.signUp(world.app, email: "taken@example.com")
        _ = try world.code(to: "taken@example.com")
        let bearer = session["access_token"]?.stringValue
        let taken = try world.post("/v1/me/email", ["email": "taken@example.com"], bearer: bearer)
        #expect(taken.status == 409 && taken.problemCode == "auth/email-already-in-use")
        #expect(try world.post("/v1/me/email", ["email": "ada@new.example"], bearer: bearer).status == 202)
        let code = try world.code(to: "ada@new.example").code
        let changed = try world.post("/v1/me/email/confirm", ["email": "ada@new.example", "code": .string(code)], bearer: bearer)
        #expect(changed.status == 200)
        #expect(changed.data?["email"] == "ada@new.example" && changed.data?["email_verified"] == true)
        let notice = try world.deliver(after: world.seen).filter { $0.recipients == ["ada@example.com"] }
        #expect(notice.count == 1, "the old address is told")
        let noticeText = try IndependentMailParser.parse(notice.first?.raw ?? []).parts.first?.content ?? ""
        #expect(noticeText.contains("ada@new.example"))
        #expect(try world.post("/v1/auth/signin", ["email": "ada@new.example", "password": "correct horse battery"]).status == 200)
        // An address nobody proved is told nothing: Grace never verified hers.
        let grace = try world.server.signUp(world.app, email: "grace@example.com")
        _ = try world.code(to: "grace@example.com")
        #expect(try world.post("/v1/me/email", ["email": "grace@new.example"], bearer: grace["access_token"]?.stringValue).status == 202)
        let graceCode = try world.code(to: "grace@new.example").code
        #expect(try world.post("/v1/me/email/confirm", ["email": "grace@new.example", "code": .string(graceCode)], bearer: grace["access_token"]?.stringValue).status == 200)
        #expect(try world.deliver(after: world.seen).isEmpty)
        let events = try world.server.gatehouse.database.query("SELECT type FROM events WHERE type = 'user.email_changed'")
        #expect(events.count == 2)
        // Too long after signing in: reauthenticate first.
        world.clock.advance(seconds: 301)
        let stale = try world.post("/v1/me/email", ["email": "ada@third.example"], bearer: bearer)
        #expect(stale.status == 403 && stale.problemCode == "auth/requires-recent-login")
    }

    @Test(arguments: TestDatabase.kinds)
    func reauthenticationByCode(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let session = try world.server.signUp(world.app, email: "ada@example.com")
        _ = try world.code(to: "ada@example.com")
        let bearer = session["access_token"]?.stringValue
        #expect(try world.post("/v1/auth/reauthenticate/send-code", nil, bearer: bearer).status == 202)
        let code = try world.code(to: "ada@example.com").code
        let wrong = try world.post("/v1/auth/reauthenticate", ["code": code == "000000" ? "000001" : "000000"], bearer: bearer)
        #expect(wrong.status == 400 && wrong.problemCode == "auth/invalid-code")
        world.clock.advance(seconds: 10)
        let fresh = try world.post("/v1/auth/reauthenticate", ["code": .string(code)], bearer: bearer)
        #expect(fresh.status == 200 && fresh.data?["access_token"] != nil)
    }

    @Test(arguments: TestDatabase.kinds)
    func aCodeToAnUnverifiedAccountTakesItFromWhoeverSignedUpWithTheAddress(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        // A stranger signs up with Ada's address and a password of theirs.
        let stranger = try world.server.signUp(world.app, email: "ada@example.com", password: "stranger's password")
        _ = try world.code(to: "ada@example.com")
        // …and links a provider account of theirs (as POST /v1/me/identities/google would).
        let strangerID = try #require(stranger["user"]?["id"]?.stringValue)
        try world.server.gatehouse.store.app(AppID(unchecked: world.app.id)).identities.addIdentity(
            UserID(unchecked: strangerID), Identity(provider: .google, subject: "stranger-google-id", email: "ada@example.com", createdAt: world.clock.nowMillis()))
        #expect(try world.post("/v1/auth/email-code/send", ["email": "ada@example.com"]).status == 202)
        let code = try world.code(to: "ada@example.com").code
        let ada = try world.post("/v1/auth/email-code/verify", ["email": "ada@example.com", "code": .string(code)])
        #expect(ada.status == 200 && ada.data?["user"]?["email_verified"] == true)
        #expect(try world.post("/v1/auth/refresh", ["refresh_token": stranger["refresh_token"] ?? .null]).status == 401)
        #expect(try world.post("/v1/auth/signin", ["email": "ada@example.com", "password": "stranger's password"]).status == 400)
        let identities = try world.server.request("GET", "/v1/me/identities", appKey: world.app.appKey, bearer: ada.data?["access_token"]?.stringValue)
        #expect(identities.json?["data"] == [], "the stranger's Google account no longer signs in to it")
    }

    @Test(arguments: TestDatabase.kinds)
    func wrongCodesAnswerTheSameForAnAddressWithoutAnAccount(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        _ = try world.server.signUp(world.app, email: "ada@example.com")
        _ = try world.code(to: "ada@example.com")
        for address in ["ada@example.com", "nobody@example.com"] {
            #expect(try world.post("/v1/auth/password-reset/send", ["email": .string(address)]).status == 202)
            // Ada's real code is never the wrong one tried; nobody's (unsent) one cannot be reached.
            let wrong = try address == "nobody@example.com" || world.code(to: address).code != "000000" ? "000000" : "000001"
            var answers: [String] = []
            for _ in 0..<6 {
                let answer = try world.post("/v1/auth/password-reset/confirm", ["email": .string(address), "code": .string(wrong), "password": "a brand new secret"])
                answers.append("\(answer.status) \(answer.problemCode ?? "")")
            }
            #expect(answers == Array(repeating: "400 auth/invalid-code", count: 5) + ["429 auth/too-many-attempts"], "\(address)")
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func withTheMailServerDownTheRequestAnswersAndTheMailArrivesLater(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        try world.sink.setMode(.refuseTemporarily)
        #expect(try world.post("/v1/auth/email-code/send", ["email": "ada@example.com"]).status == 202)
        #expect(try world.deliver().isEmpty)
        try world.sink.setMode(.hang)
        world.clock.advance(seconds: 6)
        #expect(try world.post("/v1/auth/password-reset/send", ["email": "ada@example.com"]).status == 202, "answered while SMTP hangs")
        try world.sink.setMode(.accept)
        world.clock.advance(seconds: 60)
        let code = try world.code(to: "ada@example.com").code
        #expect(try world.post("/v1/auth/email-code/verify", ["email": "ada@example.com", "code": .string(code)]).status == 201)
    }

    @Test(arguments: TestDatabase.kinds)
    func headerInjectionThroughAddressesAndNamesIsRefused(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        for email in ["ada@example.com\r\nBcc: eve@example.com", "ada@example.com\nBcc: eve@example.com", "\"ada\r\n\"@example.com"] {
            let answer = try world.post("/v1/auth/email-code/send", ["email": .string(email)])
            #expect(answer.status == 400 && answer.problemCode == "request/validation-failed")
        }
        let badName = try world.server.request("PATCH", "/v1/admin/app", bearer: world.app.secretKey, json: ["name": "Evil\r\nBcc: eve@example.com"])
        #expect(badName.status == 400)
        #expect(try world.deliver().isEmpty)
    }

    /// A sign-in code to an address outside ASCII, local part and domain, reaches a server that
    /// offers SMTPUTF8: the envelope says SMTPUTF8 and carries the local part as it is (the domain
    /// in A-labels, as libcurl writes it), the `To` header the address as it is, and the code
    /// read out of that mail signs the user in under that address.
    @Test(arguments: TestDatabase.kinds)
    func aSignInCodeToANonASCIIAddressArrivesWithSMTPUTF8(_ kind: TestDatabaseKind) throws {
        let world = try World(kind, offersSMTPUTF8: true)
        defer { world.stop() }
        let address = "\u{30E6}\u{30FC}\u{30B6}\u{30FC}@\u{4F8B}\u{3048}.jp"
        #expect(try world.post("/v1/auth/email-code/send", ["email": .string(address)]).status == 202)
        let mails = try world.deliver()
        try #require(mails.count == 1, "\(world.sink.log)")
        #expect(mails[0].recipients == ["\u{30E6}\u{30FC}\u{30B6}\u{30FC}@xn--r8jz45g.jp"])
        #expect(mails[0].mailOptions.contains("SMTPUTF8") && mails[0].smtputf8)
        let parsed = try IndependentMailParser.parse(mails[0].raw)
        #expect(parsed.utf8Headers)
        #expect(parsed.to.map { $0[1] } == [address])
        #expect(parsed.defects.isEmpty, "\(parsed.defects)")
        let text = parsed.parts.first { $0.contentType == "text/plain" }?.content ?? ""
        let code = try #require(text.range(of: #"\b[0-9]{6}\b"#, options: .regularExpression).map { String(text[$0]) })
        let created = try world.post("/v1/auth/email-code/verify", ["email": .string(address), "code": .string(code)])
        #expect(created.status == 201)
        #expect(created.data?["user"]?["email"]?.stringValue == address)
    }

    /// Without SMTPUTF8 a non-ASCII local part cannot be mailed: the request is answered as any
    /// (the server's extensions are known only when the mail goes), and the mail dead-letters with
    /// a reason an admin can read that does not hold the address. An IDN domain alone goes, as
    /// A-labels.
    @Test(arguments: TestDatabase.kinds)
    func withoutSMTPUTF8ANonASCIILocalPartIsADeadLetterAndAnIDNDomainGoesAsIDNA(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        #expect(try world.post("/v1/auth/email-code/send", ["email": "jos\u{00E9}@example.com"]).status == 202)
        #expect(try world.deliver().isEmpty)
        let dead = try world.server.gatehouse.database.query("SELECT data FROM events WHERE type = 'outbox.dead_lettered'")
        #expect(dead.count == 1)
        let reason = try dead.first?.string("data") ?? ""
        #expect(reason.contains("does not offer SMTPUTF8"), "\(reason)")
        #expect(!reason.contains("jos"), "\(reason)")

        #expect(try world.post("/v1/auth/email-code/send", ["email": "user@b\u{00FC}cher.example"]).status == 202)
        let code = try world.code(to: "user@xn--bcher-kva.example")
        #expect(code.code.count == 6)
    }

    @Test(arguments: TestDatabase.kinds)
    func anAddressNoMailCanBeWrittenToIsRefusedTheSameWithOrWithoutAnAccount(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        // A domain with no IDNA form: a label over 63 bytes once encoded.
        let wide = "ada@" + String(repeating: "a", count: 60) + "\u{00FC}\u{00FC}.example"
        _ = try world.server.signUp(world.app, email: wide)  // made, without its verification mail
        for address in [wide, "eve@" + String(repeating: "e", count: 60) + "\u{00FC}\u{00FC}.example"] {
            let reset = try world.post("/v1/auth/password-reset/send", ["email": .string(address)])
            #expect(reset.status == 400 && reset.problemCode == "request/validation-failed", "\(address)")
        }
        #expect(try world.deliver().isEmpty)
        // A sender the mailer would refuse is refused when saved, not dead-lettered at every send.
        for from in ["a b@example.com", "Shop <caf\u{00E9}@example.com>", "no address"] {
            let answer = try world.server.request("PATCH", "/v1/admin/app", bearer: world.app.secretKey, json: ["email": ["from": .string(from)]])
            #expect(answer.status == 400, "\(from)")
        }
        let named = try world.server.request("PATCH", "/v1/admin/app", bearer: world.app.secretKey, json: ["email": ["from": "Caf\u{00E9} <no-reply@localhost>"]])
        #expect(named.status == 200)
    }

    @Test(arguments: TestDatabase.kinds)
    func aNodeKilledHoldingTheMailLosesItToAnotherWhenTheLeaseEnds(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        #expect(try world.post("/v1/auth/email-code/send", ["email": "ada@example.com"]).status == 202)
        // A node claims it and dies before delivering (nothing marks it, nothing releases it).
        let claimed = try world.server.gatehouse.store.outbox.claim(
            kinds: [.mail], limit: 16, leaseMillis: 60_000, node: "node_killed", now: world.clock.nowMillis())
        #expect(claimed.count == 1)
        #expect(try world.deliver().isEmpty, "leased to the dead node")
        world.clock.advance(seconds: 61)
        let code = try world.code(to: "ada@example.com").code
        #expect(try world.post("/v1/auth/email-code/verify", ["email": "ada@example.com", "code": .string(code)]).status == 201)
    }

    @Test(arguments: TestDatabase.kinds)
    func twoNodesDeliverEveryMailExactlyOnce(_ kind: TestDatabaseKind) throws {
        let sink = try SMTPSink()
        defer { sink.stop() }
        let url = sink.url
        let first = try TestServer(kind) { $0.smtpURL = url }
        defer { first.stop() }
        let second = try TestServer(anotherNodeOf: first) { $0.smtpURL = url }
        defer { second.stop() }
        let app = try first.createApp(["name": "Two Nodes", "sign_in_methods": ["email_code"], "rate_limits": ["auth_per_minute_per_ip": 1000]])
        let addresses = (0..<40).map { "user\($0)@example.com" }
        for (index, address) in addresses.enumerated() {
            let node = index % 2 == 0 ? first : second
            #expect(try node.request("POST", "/v1/auth/email-code/send", appKey: app.appKey, json: ["email": .string(address)]).status == 202)
        }
        let deadline = Date().addingTimeInterval(30)
        while try sink.messages().count < addresses.count, Date() < deadline { usleep(100_000) }
        usleep(1_500_000)  // a poll of each worker more: nothing comes twice
        let recipients = try sink.messages().flatMap(\.recipients)
        #expect(recipients.count == addresses.count)
        #expect(Set(recipients) == Set(addresses))
    }
}

struct MailExpectation: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
