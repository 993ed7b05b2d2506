import Foundation
import GatehouseCore
import GatehouseCrypto
import GatehouseSQL
import GatehouseTesting
import Synchronization
import Testing

/// Second factors over real HTTP (API.md, "Second factors and passkeys"): enrolling an
/// authenticator app, the second step after every first factor, recovery codes, the guess
/// limits, enrolment under `required`, and the admin's view. Both databases; the server's clock
/// is moved by hand, and codes are computed here from the secret the server showed.
@Suite("Second factors: TOTP, recovery codes and the second step")
struct MFAAPITests {
    final class World: @unchecked Sendable {
        let clock = ManualClock()
        let server: TestServer
        let app: TestServer.CreatedApp

        init(_ kind: TestDatabaseKind, policy: String = "optional") throws {
            server = try TestServer(kind, clock: clock)
            app = try server.createApp([
                "name": "Vault & Co", "rate_limits": ["auth_per_minute_per_ip": 1000], "mfa": ["policy": .string(policy)],
            ])
        }

        func stop() { server.stop() }

        func post(_ path: String, _ json: JSON? = nil, bearer: String? = nil, appKey: String? = nil) throws -> TestResponse {
            try server.request("POST", path, appKey: appKey ?? app.appKey, bearer: bearer, json: json ?? [:])
        }

        func signIn(_ email: String = "ada@example.com", password: String = "correct horse battery") throws -> TestResponse {
            try post("/v1/auth/signin", ["email": .string(email), "password": .string(password)])
        }

        /// The code an authenticator app shows now (`steps` periods later or earlier).
        func code(_ secret: [UInt8], steps: Int64 = 0) -> String {
            TOTP.code(secret: secret, step: TOTP.step(at: clock.nowMillis() / 1000) + steps)
        }

        /// Enrols and confirms an authenticator app for the bearer; its secret and recovery codes.
        func enrol(bearer: String) throws -> (id: String, secret: [UInt8], recoveryCodes: [String]) {
            let begun = try post("/v1/me/mfa/totp", ["name": "Phone"], bearer: bearer)
            #expect(begun.status == 201, "\(begun.text)")
            let id = try #require(begun.data?["id"]?.stringValue)
            let secret = try #require(begun.data?["secret"]?.stringValue.flatMap(Base32.decode))
            let confirmed = try post("/v1/me/mfa/totp/\(id)/confirm", ["code": .string(code(secret))], bearer: bearer)
            #expect(confirmed.status == 200, "\(confirmed.text)")
            let codes = try #require(confirmed.data?["recovery_codes"]?.arrayValue).compactMap(\.stringValue)
            // The confirming code's step is used: the next sign-in waits for the next code.
            clock.advance(seconds: 30)
            return (id, secret, codes)
        }

        func count(_ table: String) throws -> Int {
            try server.gatehouse.database.query("SELECT 1 AS found FROM \(unsafeSQL: table)").count
        }
    }

    static func amr(_ response: TestResponse) throws -> JSON? {
        let token = try #require(response.data?["access_token"]?.stringValue)
        return try JSON.parse(JWT.parse(token).payload)["amr"]
    }

    @Test(arguments: TestDatabase.kinds)
    func aPasswordSignInOfAnEnrolledUserAsksForTheSecondStepAndACodeOpensTheSession(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let signedUp = try world.server.signUp(world.app)
        let token = try #require(signedUp["access_token"]?.stringValue)

        let begun = try world.post("/v1/me/mfa/totp", ["name": "Phone"], bearer: token)
        #expect(begun.status == 201)
        let secretText = try #require(begun.data?["secret"]?.stringValue)
        #expect(!secretText.contains("=") && secretText.count == 32)
        let url = try #require(begun.data?["otpauth_url"]?.stringValue)
        #expect(url == "otpauth://totp/Vault%20%26%20Co:ada%40example.com?secret=\(secretText)&issuer=Vault%20%26%20Co&algorithm=SHA1&digits=6&period=30")
        let id = try #require(begun.data?["id"]?.stringValue)
        let secret = try #require(Base32.decode(secretText))
        // Not a factor until confirmed: sign-in still opens a session.
        #expect(try world.signIn().status == 200)
        #expect(try world.post("/v1/me/mfa/totp/\(id)/confirm", ["code": .string(world.code(secret, steps: 5))], bearer: token).problemCode == "auth/invalid-code")
        let confirmed = try world.post("/v1/me/mfa/totp/\(id)/confirm", ["code": .string(world.code(secret))], bearer: token)
        #expect(confirmed.status == 200)
        let codes = try #require(confirmed.data?["recovery_codes"]?.arrayValue).compactMap(\.stringValue)
        #expect(codes.count == 10 && Set(codes).count == 10)
        #expect(codes.allSatisfy { $0.range(of: #"^[a-z2-9]{5}-[a-z2-9]{5}$"#, options: .regularExpression) != nil })

        // The overview: the factor, no secret.
        let overview = try world.server.request("GET", "/v1/me/mfa", appKey: world.app.appKey, bearer: token)
        #expect(overview.status == 200)
        #expect(overview.data?["policy"] == "optional" && overview.data?["recovery_codes_left"] == 10 && overview.data?["passkeys"] == 0)
        #expect(overview.data?["factors"]?.arrayValue?.count == 1)
        #expect(overview.data?["factors"]?.arrayValue?.first?["type"] == "totp" && overview.data?["factors"]?.arrayValue?.first?["name"] == "Phone")
        #expect(!overview.text.contains(secretText))
        // Stored sealed, not in clear.
        #expect(try world.server.gatehouse.database.query("SELECT secret FROM mfa_totp_factors").first?.string("secret").hasPrefix("v2.") == true)

        world.clock.advance(seconds: 30)
        let countedBefore = try MetricsScrape(world.server)
        let first = try world.signIn()
        #expect(first.status == 401 && first.problemCode == "auth/mfa-required")
        // The first factor alone is no sign-in yet, neither a success nor a failure.
        let success = "gatehouse_sign_ins_total{method=\"password\",outcome=\"success\"}"
        let failure = "gatehouse_sign_ins_total{method=\"password\",outcome=\"failure\"}"
        let gatedOnly = try MetricsScrape(world.server)
        #expect(gatedOnly[success] == countedBefore[success] && gatedOnly[failure] == countedBefore[failure])
        let problem = try #require(first.json)
        #expect(problem["access_token"] == nil && problem["methods"] == ["totp", "recovery_code"] && problem["enroll"] == false && problem["expires_in"] == 300)
        let mfaToken = try #require(problem["mfa_token"]?.stringValue)
        #expect(mfaToken.hasPrefix("mfa_"))
        // The mfa_token is no access token.
        #expect(try world.server.request("GET", "/v1/me", appKey: world.app.appKey, bearer: mfaToken).status == 401)

        let code = world.code(secret)
        let verified = try world.post("/v1/auth/mfa/verify", ["mfa_token": .string(mfaToken), "code": .string(code)])
        #expect(verified.status == 200, "\(verified.text)")
        #expect(verified.data?["is_new_user"] == false)
        #expect(try Self.amr(verified) == ["pwd", "otp", "mfa"])
        #expect(try MetricsScrape(world.server)[success] == countedBefore[success] + 1)
        // Used once.
        #expect(try world.post("/v1/auth/mfa/verify", ["mfa_token": .string(mfaToken), "code": .string(code)]).problemCode == "auth/invalid-mfa-token")

        // A refresh keeps the session's amr.
        let refreshToken = try #require(verified.data?["refresh_token"]?.stringValue)
        let refreshed = try world.post("/v1/auth/refresh", ["refresh_token": .string(refreshToken)])
        #expect(refreshed.status == 200)
        #expect(try Self.amr(refreshed) == ["pwd", "otp", "mfa"])

        // The same code (its step used) is refused with the next sign-in's token.
        let again = try #require(try world.signIn().json?["mfa_token"]?.stringValue)
        let replay = try world.post("/v1/auth/mfa/verify", ["mfa_token": .string(again), "code": .string(code)])
        #expect(replay.status == 400 && replay.problemCode == "auth/invalid-code")
        // The next step's code is good.
        world.clock.advance(seconds: 30)
        #expect(try world.post("/v1/auth/mfa/verify", ["mfa_token": .string(again), "code": .string(world.code(secret))]).status == 200)
        // Exactly one proof.
        let another = try #require(try world.signIn().json?["mfa_token"]?.stringValue)
        #expect(try world.post("/v1/auth/mfa/verify", ["mfa_token": .string(another), "code": "123456", "recovery_code": .string(codes[0])]).problemCode == "request/validation-failed")
        #expect(try world.post("/v1/auth/mfa/verify", ["mfa_token": .string(another)]).problemCode == "request/validation-failed")
        // A passkey proof, where the app has no passkey settings: 503 (PasskeysAPITests has the rest).
        let passkey = try world.post("/v1/auth/mfa/verify", ["mfa_token": .string(another), "passkey": ["id": "x"]])
        #expect(passkey.status == 503 && passkey.problemCode == "auth/provider-not-configured")
    }

    @Test(arguments: TestDatabase.kinds)
    func aRecoveryCodeWorksOnceAndAConfirmReplacesTheSet(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let token = try #require(try world.server.signUp(world.app)["access_token"]?.stringValue)
        let (_, _, codes) = try world.enrol(bearer: token)

        let mfaToken = try #require(try world.signIn().json?["mfa_token"]?.stringValue)
        // Typed in capitals and without the dash, it is the same code.
        let typed = codes[3].uppercased().replacingOccurrences(of: "-", with: "")
        let verified = try world.post("/v1/auth/mfa/verify", ["mfa_token": .string(mfaToken), "recovery_code": .string(typed)])
        #expect(verified.status == 200, "\(verified.text)")
        #expect(try Self.amr(verified) == ["pwd", "otp", "mfa"])
        let overview = try world.server.request("GET", "/v1/me/mfa", appKey: world.app.appKey, bearer: token)
        #expect(overview.data?["recovery_codes_left"] == 9)

        let next = try #require(try world.signIn().json?["mfa_token"]?.stringValue)
        let reused = try world.post("/v1/auth/mfa/verify", ["mfa_token": .string(next), "recovery_code": .string(codes[3])])
        #expect(reused.status == 400 && reused.problemCode == "auth/invalid-code")
        #expect(try world.post("/v1/auth/mfa/verify", ["mfa_token": .string(next), "recovery_code": .string(codes[4])]).status == 200)
        // Stored as digests only.
        let stored = try world.server.gatehouse.database.query("SELECT code_hash FROM mfa_recovery_codes").map { try $0.string("code_hash") }
        #expect(stored.count == 10 && !stored.contains { hash in codes.contains { hash.contains($0.replacingOccurrences(of: "-", with: "")) } })

        // Confirming another authenticator app gives a new set; the old codes are gone.
        let (_, _, fresh) = try world.enrol(bearer: token)
        #expect(Set(fresh).isDisjoint(with: codes))
        let later = try #require(try world.signIn().json?["mfa_token"]?.stringValue)
        #expect(try world.post("/v1/auth/mfa/verify", ["mfa_token": .string(later), "recovery_code": .string(codes[5])]).problemCode == "auth/invalid-code")
        #expect(try world.post("/v1/auth/mfa/verify", ["mfa_token": .string(later), "recovery_code": .string(fresh[0])]).status == 200)
    }

    @Test(arguments: TestDatabase.kinds)
    func wrongCodesAreCountedLikeEmailedCodesThenRefused(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let token = try #require(try world.server.signUp(world.app)["access_token"]?.stringValue)
        let (_, secret, codes) = try world.enrol(bearer: token)
        let mfaToken = try #require(try world.signIn().json?["mfa_token"]?.stringValue)
        let wrong = world.code(secret, steps: 10)
        for attempt in 1...EmailCodes.guessLimits[0].failures {
            let response = try world.post("/v1/auth/mfa/verify", ["mfa_token": .string(mfaToken), attempt % 2 == 0 ? "code" : "recovery_code": .string(attempt % 2 == 0 ? wrong : "aaaaa-aaaaa")])
            #expect(response.status == 400 && response.problemCode == "auth/invalid-code", "attempt \(attempt)")
        }
        // Past the hour's failures, even the right code and a good recovery code wait.
        let refused = try world.post("/v1/auth/mfa/verify", ["mfa_token": .string(mfaToken), "code": .string(world.code(secret))])
        #expect(refused.status == 429 && refused.problemCode == "auth/too-many-attempts" && refused.header("Retry-After") != nil)
        #expect(try world.post("/v1/auth/mfa/verify", ["mfa_token": .string(mfaToken), "recovery_code": .string(codes[0])]).status == 429)
        // Each failure is in the audit log.
        let events = try world.server.request("GET", "/v1/admin/events?type=user.sign_in_failed", bearer: world.app.secretKey)
        #expect(events.data?.arrayValue?.filter { $0["data"]?["method"] == "mfa" }.count == Int(EmailCodes.guessLimits[0].failures))
    }

    @Test(arguments: TestDatabase.kinds)
    func wrongCodesSentAtOnceAreCheckedNoMoreThanTheLimit(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let token = try #require(try world.server.signUp(world.app)["access_token"]?.stringValue)
        let (_, secret, _) = try world.enrol(bearer: token)
        let mfaToken = try #require(try world.signIn().json?["mfa_token"]?.stringValue)
        let wrong = world.code(secret, steps: 10)
        // 16 wrong codes at once: each attempt is counted before its code is checked, so at most
        // the hour's 10 are checked and the rest wait.
        let statuses = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 16) { _ in
            let answer = try? world.post("/v1/auth/mfa/verify", ["mfa_token": .string(mfaToken), "code": .string(wrong)])
            statuses.withLock { $0.append(answer?.problemCode ?? "no answer") }
        }
        let seen = statuses.withLock { $0 }
        #expect(seen.filter { $0 == "auth/invalid-code" }.count == Int(EmailCodes.guessLimits[0].failures), "\(seen)")
        #expect(seen.filter { $0 == "auth/too-many-attempts" }.count == 16 - Int(EmailCodes.guessLimits[0].failures), "\(seen)")
    }

    @Test(arguments: TestDatabase.kinds)
    func anExpiredUsedUnknownOrOtherAppsMFATokenIsRefused(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let other = try world.server.createApp(["name": "Other", "mfa": ["policy": "optional"]])
        let token = try #require(try world.server.signUp(world.app)["access_token"]?.stringValue)
        let (_, secret, _) = try world.enrol(bearer: token)

        let mfaToken = try #require(try world.signIn().json?["mfa_token"]?.stringValue)
        let elsewhere = try world.post("/v1/auth/mfa/verify", ["mfa_token": .string(mfaToken), "code": .string(world.code(secret))], appKey: other.appKey)
        #expect(elsewhere.status == 401 && elsewhere.problemCode == "auth/invalid-mfa-token")
        #expect(try world.post("/v1/auth/mfa/verify", ["mfa_token": "mfa_unknown", "code": .string(world.code(secret))]).problemCode == "auth/invalid-mfa-token")
        #expect(try world.post("/v1/auth/mfa/verify", ["mfa_token": "not-a-token", "code": .string(world.code(secret))]).problemCode == "auth/invalid-mfa-token")
        world.clock.advance(seconds: 301)
        let expired = try world.post("/v1/auth/mfa/verify", ["mfa_token": .string(mfaToken), "code": .string(world.code(secret))])
        #expect(expired.status == 401 && expired.problemCode == "auth/invalid-mfa-token")
        // An answering token does not enrol.
        let fresh = try #require(try world.signIn().json?["mfa_token"]?.stringValue)
        #expect(try world.post("/v1/me/mfa/totp", [:], bearer: fresh).problemCode == "auth/invalid-mfa-token")
    }

    @Test(arguments: TestDatabase.kinds)
    func anOpenSecondStepDiesWithAPasswordChangeAndASignOutEverywhere(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let signedUp = try world.server.signUp(world.app)
        let token = try #require(signedUp["access_token"]?.stringValue)
        let userID = try #require(signedUp["user"]?["id"]?.stringValue)
        let (_, secret, _) = try world.enrol(bearer: token)

        // Someone who knew the old password got as far as the second step; the owner changes it.
        let stolen = try #require(try world.signIn().json?["mfa_token"]?.stringValue)
        let changed = try world.server.request(
            "PUT", "/v1/me/password", appKey: world.app.appKey, bearer: token,
            json: ["current_password": "correct horse battery", "password": "a new staple battery"])
        #expect(changed.status == 204, "\(changed.text)")
        let late = try world.post("/v1/auth/mfa/verify", ["mfa_token": .string(stolen), "code": .string(world.code(secret))])
        #expect(late.status == 401 && late.problemCode == "auth/invalid-mfa-token")

        // A tenant admin signs the user out everywhere: pending second steps end too.
        let pending = try #require(try world.signIn(password: "a new staple battery").json?["mfa_token"]?.stringValue)
        #expect(try world.server.request("DELETE", "/v1/admin/users/\(userID)/sessions", bearer: world.app.secretKey).status == 204)
        let after = try world.post("/v1/auth/mfa/verify", ["mfa_token": .string(pending), "code": .string(world.code(secret))])
        #expect(after.problemCode == "auth/invalid-mfa-token")
        // And a second step begun afterwards still works.
        let fresh = try #require(try world.signIn(password: "a new staple battery").json?["mfa_token"]?.stringValue)
        #expect(try world.post("/v1/auth/mfa/verify", ["mfa_token": .string(fresh), "code": .string(world.code(secret))]).status == 200)
    }

    @Test(arguments: TestDatabase.kinds)
    func theOwnerOfTheAddressTakesTheAccountOverWithoutTheSquattersFactors(_ kind: TestDatabaseKind) throws {
        let world = try EmailFlowsAPITests.World(kind, settings: [
            "mfa": ["policy": "optional"], "sign_in_methods": ["password", "email_code"],
            "passkeys": ["rp_id": "example.com", "origins": ["https://example.com"]],
        ])
        defer { world.stop() }
        // A stranger signs up with Grace's address (unverified) and enrols an authenticator app.
        let squatter = try world.post("/v1/auth/signup", ["email": "grace@example.com", "password": "correct horse battery"])
        let token = try #require(squatter.data?["access_token"]?.stringValue)
        _ = try world.code(to: "grace@example.com")  // the verification mail, unread by the squatter
        let begun = try world.post("/v1/me/mfa/totp", [:], bearer: token)
        let id = try #require(begun.data?["id"]?.stringValue)
        let secret = try #require(begun.data?["secret"]?.stringValue.flatMap(Base32.decode))
        let step = TOTP.step(at: world.clock.nowMillis() / 1000)
        #expect(try world.post("/v1/me/mfa/totp/\(id)/confirm", ["code": .string(TOTP.code(secret: secret, step: step))], bearer: token).status == 200)
        // And a passkey, to come back with.
        let key = try SoftAuthenticator(origin: "https://example.com", rpID: "example.com")
        let creation = try #require(try world.post("/v1/me/passkeys/options", [:], bearer: token).data)
        #expect(try world.post("/v1/me/passkeys", ["credential": try key.register(creation)], bearer: token).status == 201)

        // Grace proves the address with an emailed code: the account is hers, with no second step
        // of the stranger's between her and it, and the factor is gone.
        #expect(try world.post("/v1/auth/email-code/send", ["email": "grace@example.com"]).status == 202)
        let owner = try world.post("/v1/auth/email-code/verify", ["email": "grace@example.com", "code": .string(try world.code(to: "grace@example.com").code)])
        #expect(owner.status == 200, "\(owner.text)")
        let ownerToken = try #require(owner.data?["access_token"]?.stringValue)
        let overview = try world.server.request("GET", "/v1/me/mfa", appKey: world.app.appKey, bearer: ownerToken)
        #expect(overview.data?["factors"] == [] && overview.data?["recovery_codes_left"] == 0, "\(overview.text)")
        let removed = try world.server.request("GET", "/v1/admin/events?type=mfa.removed", bearer: world.app.secretKey)
        #expect(removed.data?.arrayValue?.first?["data"]?["by"] == "address_proved", "\(removed.text)")
        // The stranger's passkey opens nothing any more.
        let request = try #require(try world.post("/v1/auth/passkey/options", [:]).data)
        let back = try world.post("/v1/auth/passkey/verify", ["credential": try key.assert(request)])
        #expect(back.status == 400 && back.problemCode == "auth/invalid-credential", "\(back.text)")
        #expect(try world.server.request("GET", "/v1/me/passkeys", appKey: world.app.appKey, bearer: ownerToken).data == [])
    }

    @Test(arguments: TestDatabase.kinds)
    func emailedCodeSignInsAreGatedToo(_ kind: TestDatabaseKind) throws {
        let world = try EmailFlowsAPITests.World(kind, settings: ["mfa": ["policy": "optional"]])
        defer { world.stop() }
        #expect(try world.post("/v1/auth/email-code/send", ["email": "grace@example.com"]).status == 202)
        let created = try world.post("/v1/auth/email-code/verify", ["email": "grace@example.com", "code": .string(try world.code(to: "grace@example.com").code)])
        #expect(created.status == 201)
        let token = try #require(created.data?["access_token"]?.stringValue)
        let begun = try world.post("/v1/me/mfa/totp", [:], bearer: token)
        let id = try #require(begun.data?["id"]?.stringValue)
        let secret = try #require(begun.data?["secret"]?.stringValue.flatMap(Base32.decode))
        let now = world.clock.nowMillis() / 1000
        #expect(try world.post("/v1/me/mfa/totp/\(id)/confirm", ["code": .string(TOTP.code(secret: secret, step: TOTP.step(at: now)))], bearer: token).status == 200)
        world.clock.advance(seconds: 61)

        #expect(try world.post("/v1/auth/email-code/send", ["email": "grace@example.com"]).status == 202)
        let gated = try world.post("/v1/auth/email-code/verify", ["email": "grace@example.com", "code": .string(try world.code(to: "grace@example.com").code)])
        #expect(gated.status == 401 && gated.problemCode == "auth/mfa-required")
        let mfaToken = try #require(gated.json?["mfa_token"]?.stringValue)
        let code = TOTP.code(secret: secret, step: TOTP.step(at: world.clock.nowMillis() / 1000))
        let verified = try world.post("/v1/auth/mfa/verify", ["mfa_token": .string(mfaToken), "code": .string(code)])
        #expect(verified.status == 200)
        #expect(try Self.amr(verified) == ["otp", "mfa"])
    }

    @Test(arguments: TestDatabase.kinds)
    func googleSignInsAreGatedToo(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind, settings: ["mfa": ["policy": "optional"]])
        defer { world.stop() }
        func google(_ nonce: String) throws -> TestResponse {
            try world.server.request(
                "POST", "/v1/auth/oauth/google", appKey: world.app.appKey,
                json: ["id_token": .string(world.google.mintIDToken(sub: "g-1", aud: ProviderWorld.googleClient, email: "gabe@gmail.com", nonce: nonce)), "nonce": .string(nonce)])
        }
        let first = try google("n1")
        #expect(first.status == 201)
        let token = try #require(first.data?["access_token"]?.stringValue)
        let begun = try world.server.request("POST", "/v1/me/mfa/totp", appKey: world.app.appKey, bearer: token, json: [:])
        let id = try #require(begun.data?["id"]?.stringValue)
        let secret = try #require(begun.data?["secret"]?.stringValue.flatMap(Base32.decode))
        let confirm = try world.server.request(
            "POST", "/v1/me/mfa/totp/\(id)/confirm", appKey: world.app.appKey, bearer: token,
            json: ["code": .string(TOTP.code(secret: secret, step: TOTP.step(at: world.clock.nowMillis() / 1000)))])
        #expect(confirm.status == 200)
        world.clock.advance(seconds: 30)

        let gated = try google("n2")
        #expect(gated.status == 401 && gated.problemCode == "auth/mfa-required")
        let mfaToken = try #require(gated.json?["mfa_token"]?.stringValue)
        let verified = try world.server.request(
            "POST", "/v1/auth/mfa/verify", appKey: world.app.appKey,
            json: ["mfa_token": .string(mfaToken), "code": .string(TOTP.code(secret: secret, step: TOTP.step(at: world.clock.nowMillis() / 1000)))])
        #expect(verified.status == 200)
        #expect(try Self.amr(verified) == ["google", "otp", "mfa"])
    }

    @Test(arguments: TestDatabase.kinds)
    func aSignUpUnderRequiredEnrolsWithTheMFATokenThenFinishesWithNoProof(_ kind: TestDatabaseKind) throws {
        let world = try World(kind, policy: "required")
        defer { world.stop() }
        let signUp = try world.post("/v1/auth/signup", ["email": "new@example.com", "password": "correct horse battery"])
        #expect(signUp.status == 401 && signUp.problemCode == "auth/mfa-required")
        #expect(signUp.json?["enroll"] == true && signUp.json?["methods"] == ["totp", "passkey"])
        let mfaToken = try #require(signUp.json?["mfa_token"]?.stringValue)
        // The account was made all the same: signing up again is a conflict.
        #expect(try world.post("/v1/auth/signup", ["email": "new@example.com", "password": "correct horse battery"]).status == 409)
        // Nothing enrolled yet: no proof is no answer.
        #expect(try world.post("/v1/auth/mfa/verify", ["mfa_token": .string(mfaToken)]).problemCode == "request/validation-failed")
        // The token enrols, and nothing else.
        #expect(try world.server.request("GET", "/v1/me/mfa", appKey: world.app.appKey, bearer: mfaToken).status == 401)
        let begun = try world.post("/v1/me/mfa/totp", [:], bearer: mfaToken)
        #expect(begun.status == 201)
        let id = try #require(begun.data?["id"]?.stringValue)
        let secret = try #require(begun.data?["secret"]?.stringValue.flatMap(Base32.decode))
        #expect(try world.post("/v1/me/mfa/totp/\(id)/confirm", ["code": .string(world.code(secret))], bearer: mfaToken).status == 200)

        let verified = try world.post("/v1/auth/mfa/verify", ["mfa_token": .string(mfaToken)])
        #expect(verified.status == 201, "\(verified.text)")
        #expect(verified.data?["is_new_user"] == true)
        #expect(try Self.amr(verified) == ["pwd", "otp", "mfa"])
        // Once.
        #expect(try world.post("/v1/auth/mfa/verify", ["mfa_token": .string(mfaToken)]).problemCode == "auth/invalid-mfa-token")
        // From now on the user answers with the factor.
        let next = try world.signIn("new@example.com")
        #expect(next.problemCode == "auth/mfa-required" && next.json?["enroll"] == false && next.json?["methods"] == ["totp", "recovery_code"])
    }

    @Test(arguments: TestDatabase.kinds)
    func policyOffAsksNothingAndAllowsNoEnrolment(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let token = try #require(try world.server.signUp(world.app)["access_token"]?.stringValue)
        _ = try world.enrol(bearer: token)
        #expect(try world.signIn().problemCode == "auth/mfa-required")
        let pending = try world.post("/v1/me/mfa/totp", [:], bearer: token)
        let pendingID = try #require(pending.data?["id"]?.stringValue)
        let pendingSecret = try #require(pending.data?["secret"]?.stringValue.flatMap(Base32.decode))
        let patched = try world.server.request("PATCH", "/v1/admin/app", bearer: world.app.secretKey, json: ["mfa": ["policy": "off"]])
        #expect(patched.status == 200 && patched.data?["mfa"] == ["policy": "off", "methods": ["totp", "passkey"]])
        #expect(try world.signIn().status == 200)
        #expect(try world.post("/v1/me/mfa/totp", [:], bearer: token).problemCode == "auth/sign-in-method-disabled")
        let confirm = try world.post("/v1/me/mfa/totp/\(pendingID)/confirm", ["code": .string(world.code(pendingSecret))], bearer: token)
        #expect(confirm.status == 403 && confirm.problemCode == "auth/sign-in-method-disabled")
        // The settings are checked.
        let bad = try world.server.request("PATCH", "/v1/admin/app", bearer: world.app.secretKey, json: ["mfa": ["policy": "always", "methods": ["sms"]]])
        #expect(bad.status == 400 && bad.json?["errors"]?.arrayValue?.count == 2)
    }

    @Test(arguments: TestDatabase.kinds)
    func theAdminSeesTheFactorsAndRemovesOneAndTheUserRemovesOneAfterARecentLogin(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let signedUp = try world.server.signUp(world.app)
        let token = try #require(signedUp["access_token"]?.stringValue)
        let userID = try #require(signedUp["user"]?["id"]?.stringValue)
        let (factorID, secret, _) = try world.enrol(bearer: token)
        let secretText = Base32.encode(secret)

        let user = try world.server.request("GET", "/v1/admin/users/\(userID)", bearer: world.app.secretKey)
        #expect(user.data?["factors"]?.arrayValue?.count == 1)
        #expect(user.data?["factors"]?.arrayValue?.first?["id"] == .string(factorID) && user.data?["factors"]?.arrayValue?.first?["type"] == "totp")
        #expect(!user.text.contains(secretText))
        let listed = try world.server.request("GET", "/v1/admin/users", bearer: world.app.secretKey)
        #expect(listed.data?.arrayValue?.first?["factors"] == user.data?["factors"])
        // Another app's admin reaches nothing of it.
        let other = try world.server.createApp(["name": "Other"])
        #expect(try world.server.request("DELETE", "/v1/admin/users/\(userID)/factors/\(factorID)", bearer: other.secretKey).status == 404)
        #expect(try world.server.request("DELETE", "/v1/admin/users/\(userID)/factors/fac_unknown", bearer: world.app.secretKey).status == 404)

        #expect(try world.server.request("DELETE", "/v1/admin/users/\(userID)/factors/\(factorID)", bearer: world.app.secretKey).status == 204)
        #expect(try world.signIn().status == 200)
        #expect(try world.count("mfa_recovery_codes") == 0)
        let removed = try world.server.request("GET", "/v1/admin/events?type=mfa.removed", bearer: world.app.secretKey)
        #expect(removed.data?.arrayValue?.first?["data"]?["by"] == "admin")
        #expect(try world.server.request("GET", "/v1/admin/events?type=mfa.enrolled", bearer: world.app.secretKey).data?.arrayValue?.count == 1)

        // The user's own removal needs a recent login.
        let (second, secondSecret, _) = try world.enrol(bearer: token)
        world.clock.advance(seconds: 301)
        let stale = try world.server.request("DELETE", "/v1/me/mfa/totp/\(second)", appKey: world.app.appKey, bearer: token)
        #expect(stale.status == 403 && stale.problemCode == "auth/requires-recent-login")
        let mfaToken = try #require(try world.signIn().json?["mfa_token"]?.stringValue)
        let fresh = try #require(
            try world.post("/v1/auth/mfa/verify", ["mfa_token": .string(mfaToken), "code": .string(world.code(secondSecret))]).data?["access_token"]?.stringValue)
        #expect(try world.server.request("DELETE", "/v1/me/mfa/totp/\(second)", appKey: world.app.appKey, bearer: fresh).status == 204)
        #expect(try world.signIn().status == 200)
    }

    @Test(arguments: TestDatabase.kinds)
    func deletingTheAccountErasesItsFactorsAndSecondSteps(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let token = try #require(try world.server.signUp(world.app)["access_token"]?.stringValue)
        _ = try world.enrol(bearer: token)
        #expect(try world.signIn().problemCode == "auth/mfa-required")
        #expect(try world.count("mfa_totp_factors") == 1 && world.count("mfa_recovery_codes") == 10 && world.count("mfa_challenges") == 1)
        #expect(try world.server.request("DELETE", "/v1/me", appKey: world.app.appKey, bearer: token).status == 204)
        #expect(try world.count("mfa_totp_factors") == 0 && world.count("mfa_recovery_codes") == 0 && world.count("mfa_challenges") == 0)
    }
}
