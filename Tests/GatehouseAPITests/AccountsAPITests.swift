import Foundation
import GatehouseCore
import GatehouseCrypto
import GatehouseTesting
import Synchronization
import Testing

/// Passwords, sessions and tokens (API.md "Tokens", "Sign-in and tokens", "Account").
@Suite("Accounts with passwords")
struct AccountsAPITests {
    static let roomy: JSON = ["name": "Accounts", "rate_limits": ["auth_per_minute_per_ip": 1000]]

    @Test(arguments: TestDatabase.kinds)
    func signUpCreatesTheAccountAndAnIndependentVerifierAcceptsItsToken(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(Self.roomy)
        let response = try server.request(
            "POST", "/v1/auth/signup", appKey: app.appKey,
            json: ["email": "  Ada@Example.COM ", "password": "correct horse battery", "first_name": " Ada ", "last_name": "Lovelace"])
        #expect(response.status == 201)
        #expect(response.header("Cache-Control") == "no-store")
        let data = try #require(response.data)
        #expect(data["token_type"] == "Bearer")
        #expect(data["expires_in"] == 900)
        #expect(data["is_new_user"] == true)
        let user = try #require(data["user"])
        #expect(user["email"] == "ada@example.com")
        #expect(user["first_name"] == "Ada")
        #expect(user["email_verified"] == false)
        #expect(user["photo_url"] == .null)
        #expect(user["identities"] == ["password"])
        #expect(user["id"]?.stringValue?.hasPrefix("usr_") == true)

        let token = try #require(data["access_token"]?.stringValue)
        #expect(try JWT.parse(token).header.typ == "at+jwt")
        let outcome = try IndependentJWTVerifier.verify(
            token: token, jwksURL: "\(server.baseURL)/v1/apps/\(app.id)/jwks.json", audience: app.id,
            issuer: "\(TestServer.publicURL)/v1/apps/\(app.id)", algorithm: "RS256")
        guard case .valid(let claims) = outcome else { Issue.record("PyJWT rejected the access token: \(outcome)"); return }
        #expect(claims["sub"] == user["id"])
        #expect(claims["sid"]?.stringValue?.hasPrefix("ses_") == true)
        #expect(claims["amr"] == ["pwd"])
        #expect(claims["email"] == "ada@example.com")
        #expect(claims["email_verified"] == false)
        #expect(claims["name"] == "Ada Lovelace")
        #expect(claims["auth_time"] != nil)
        #expect(claims["picture"] == nil)
    }

    @Test(arguments: TestDatabase.kinds)
    func signUpRefusesDuplicatesWeakPasswordsAndBadInputWithoutWritingAnything(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(["name": "Strict", "password_min_length": 10, "rate_limits": ["auth_per_minute_per_ip": 1000]])
        _ = try server.signUp(app, email: "taken@example.com", password: "long enough pw")
        let cases: [(JSON, Int, String)] = [
            (["email": "TAKEN@example.com", "password": "long enough pw"], 409, "auth/email-already-in-use"),
            (["email": "new@example.com", "password": "short"], 400, "auth/weak-password"),
            (["email": "new@example.com", "password": "nine char"], 400, "auth/weak-password"),
            (["email": "new@example.com", "password": .string(String(repeating: "p", count: 129))], 400, "request/validation-failed"),
            (["email": "new@example.com"], 400, "request/validation-failed"),
            (["email": "not-an-email", "password": "long enough pw"], 400, "request/validation-failed"),
            (["email": "x'); DROP TABLE users;--@example.com", "password": "long enough pw"], 400, "request/validation-failed"),
            (["email": 42, "password": "long enough pw"], 400, "request/validation-failed"),
            (["email": "new@example.com", "password": "long enough pw", "admin": true], 400, "request/validation-failed"),
            (["email": "new@example.com", "password": "long enough pw", "first_name": .string(String(repeating: "n", count: 51))], 400, "request/validation-failed"),
            (["email": "new@example.com", "password": "long enough pw", "first_name": "bell\u{7}"], 400, "request/validation-failed"),
            // One letter under 300 combining marks is one character to a reader, not a name of 50.
            (["email": "new@example.com", "password": "long enough pw", "first_name": .string("a" + String(repeating: "\u{301}", count: 300))], 400, "request/validation-failed"),
            (["email": .string("n" + String(repeating: "\u{301}", count: 1100) + "@example.com"), "password": "long enough pw"], 400, "request/validation-failed"),
        ]
        for (body, status, code) in cases {
            let response = try server.request("POST", "/v1/auth/signup", appKey: app.appKey, json: body)
            #expect(response.status == status, "\(body.serializedString)")
            #expect(response.problemCode == code, "\(body.serializedString)")
        }
        // Every field's problem at once.
        let several = try server.request(
            "POST", "/v1/auth/signup", appKey: app.appKey,
            json: ["email": "not-an-email", "password": .string(String(repeating: "p", count: 129)), "first_name": .string(String(repeating: "n", count: 51)), "last_name": "Lovelace"])
        #expect(several.json?["errors"]?.arrayValue?.compactMap { $0["field"]?.stringValue } == ["email", "password", "first_name"])
        let signIn = try server.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "not-an-email", "password": .string(String(repeating: "p", count: 129))])
        #expect(signIn.json?["errors"]?.arrayValue?.compactMap { $0["field"]?.stringValue } == ["email", "password"])
        let huge = try server.request(
            "POST", "/v1/auth/signup", appKey: app.appKey, headers: [("Content-Type", "application/json")],
            body: Array(#"{"email":"a@b.co","password":""#.utf8) + Array(repeating: 0x61, count: 1 << 20) + Array(#""}"#.utf8))
        #expect(huge.status == 413)
        #expect(try server.gatehouse.database.query("SELECT id FROM users").count == 1)

        // Combining marks within 6 bytes a character on average are fine: 50 accented letters,
        // each an "e" and U+0301.
        let accented = String(repeating: "e\u{301}", count: 50)
        let marked = try server.request("POST", "/v1/auth/signup", appKey: app.appKey, json: ["email": "marks@example.com", "password": "long enough pw", "last_name": .string(accented)])
        #expect(marked.status == 201)
        #expect(marked.data?["user"]?["last_name"] == .string(accented))

        // The largest email and names the rules let through (6 bytes a character) still make a
        // token every call accepts.
        let wide = "\u{1F600}\u{301}"  // 4 + 2 bytes, one character
        let largest = try server.request(
            "POST", "/v1/auth/signup", appKey: app.appKey,
            json: [
                "email": .string(String(repeating: wide, count: 242) + "@example.com"), "password": "long enough pw",
                "first_name": .string(String(repeating: wide, count: 50)), "last_name": .string(String(repeating: wide, count: 50)),
            ])
        #expect(largest.status == 201)
        let largestToken = try #require(largest.data?["access_token"]?.stringValue)
        #expect(try server.request("GET", "/v1/me", appKey: app.appKey, bearer: largestToken).status == 200)
        // An emoji with three tag characters is one character of 4 code points but 16 bytes: too
        // wide (such an email made a token over 8 KB, refused on every call).
        let tagged = "\u{1F600}\u{E0061}\u{E0062}\u{E0063}"
        let tooWide = try server.request(
            "POST", "/v1/auth/signup", appKey: app.appKey, json: ["email": .string(String(repeating: tagged, count: 240) + "@example.com"), "password": "long enough pw"])
        #expect(tooWide.problemCode == "request/validation-failed")

        let closed = try server.createApp(["name": "Closed", "allow_signup": false])
        #expect(try server.request("POST", "/v1/auth/signup", appKey: closed.appKey, json: ["email": "a@example.com", "password": "long enough pw"]).problemCode == "auth/signup-disabled")
    }

    @Test(arguments: TestDatabase.kinds)
    func signInAnswersTheSameForAnUnknownEmailAndAWrongPassword(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(Self.roomy)
        _ = try server.signUp(app)
        let ok = try server.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "ADA@example.com", "password": "correct horse battery"])
        #expect(ok.status == 200)
        #expect(ok.data?["is_new_user"] == false)
        #expect(ok.data?["user"]?["last_sign_in_at"] != .null)
        let wrong = try server.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "ada@example.com", "password": "wrong password!"])
        let unknown = try server.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "nobody@example.com", "password": "wrong password!"])
        for response in [wrong, unknown] {
            #expect(response.status == 400)
            #expect(response.problemCode == "auth/invalid-credential")
        }
        #expect(wrong.json?["detail"] == unknown.json?["detail"])
        // The same email in another app is another account.
        let other = try server.createApp(Self.roomy)
        #expect(try server.request("POST", "/v1/auth/signin", appKey: other.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"]).status == 400)
        let failures = try server.gatehouse.database.query("SELECT type FROM events WHERE type = 'user.sign_in_failed' AND app_id = \(app.id)")
        #expect(failures.count == 2)
    }

    @Test(arguments: TestDatabase.kinds)
    func refreshRotatesAndAReusedTokenEndsTheSessionAfterTheGraceWindow(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock()
        let server = try TestServer(kind, clock: clock)
        defer { server.stop() }
        let app = try server.createApp(Self.roomy)
        let first = try server.signUp(app)
        let r0 = try #require(first["refresh_token"]?.stringValue)

        let rotated = try server.request("POST", "/v1/auth/refresh", appKey: app.appKey, json: ["refresh_token": .string(r0)])
        #expect(rotated.status == 200)
        #expect(rotated.data?["is_new_user"] == false)
        let r1 = try #require(rotated.data?["refresh_token"]?.stringValue)
        let a1 = try #require(rotated.data?["access_token"]?.stringValue)
        #expect(r1 != r0)

        // A retry of r0 within the grace window answers the same new refresh token.
        clock.advance(seconds: 5)
        let retry = try server.request("POST", "/v1/auth/refresh", appKey: app.appKey, json: ["refresh_token": .string(r0)])
        #expect(retry.status == 200)
        #expect(retry.data?["refresh_token"] == .string(r1))

        // After the window, r0 again is reuse: the whole session ends, r1 with it.
        clock.advance(seconds: 6)
        let reused = try server.request("POST", "/v1/auth/refresh", appKey: app.appKey, json: ["refresh_token": .string(r0)])
        #expect(reused.status == 401)
        #expect(reused.problemCode == "auth/refresh-token-reused")
        #expect(try server.request("POST", "/v1/auth/refresh", appKey: app.appKey, json: ["refresh_token": .string(r1)]).problemCode == "auth/invalid-refresh-token")
        #expect(try server.request("GET", "/v1/me", appKey: app.appKey, bearer: a1).problemCode == "auth/session-revoked")
        let types = try server.gatehouse.database.query("SELECT type FROM events ORDER BY created_at, type").map { try $0.string("type") }
        #expect(types.contains("session.refresh_reused") && types.contains("session.revoked"))
    }

    @Test(arguments: TestDatabase.kinds)
    func aRetryAfterTheNewTokenWasUsedIsReuseEvenWithinTheGraceWindow(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock()
        let server = try TestServer(kind, clock: clock)
        defer { server.stop() }
        let app = try server.createApp(Self.roomy)
        func refresh(_ token: String) throws -> TestResponse {
            try server.request("POST", "/v1/auth/refresh", appKey: app.appKey, json: ["refresh_token": .string(token)])
        }
        let r0 = try #require(try server.signUp(app)["refresh_token"]?.stringValue)
        let r1 = try #require(try refresh(r0).data?["refresh_token"]?.stringValue)
        clock.advance(seconds: 1)
        let r2 = try #require(try refresh(r1).data?["refresh_token"]?.stringValue)
        // r0 is 1 s past its rotation, but r1, the pair it would get again, is spent.
        clock.advance(seconds: 1)
        #expect(try refresh(r0).problemCode == "auth/refresh-token-reused")
        #expect(try refresh(r2).problemCode == "auth/invalid-refresh-token")
    }

    @Test(arguments: TestDatabase.kinds)
    func racingRefreshesOfOneTokenAllGetTheSamePair(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(Self.roomy)
        let token = try #require(try server.signUp(app)["refresh_token"]?.stringValue)
        let results = Mutex<[TestResponse]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            if let response = try? server.request("POST", "/v1/auth/refresh", appKey: app.appKey, json: ["refresh_token": .string(token)]) {
                results.withLock { $0.append(response) }
            }
        }
        let responses = results.withLock { $0 }
        #expect(responses.count == 8)
        #expect(responses.allSatisfy { $0.status == 200 })
        #expect(Set(responses.compactMap { $0.data?["refresh_token"]?.stringValue }).count == 1)
        let next = try #require(responses.first?.data?["refresh_token"]?.stringValue)
        #expect(try server.request("POST", "/v1/auth/refresh", appKey: app.appKey, json: ["refresh_token": .string(next)]).status == 200)
    }

    @Test(arguments: TestDatabase.kinds)
    func ofConcurrentPasswordChangesExactlyOneWins(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(Self.roomy)
        let token = try #require(try server.signUp(app)["access_token"]?.stringValue)
        let statuses = Mutex<[Int: Int]>([:])
        DispatchQueue.concurrentPerform(iterations: 6) { i in
            let status = (try? server.request(
                "PUT", "/v1/me/password", appKey: app.appKey, bearer: token,
                json: ["current_password": "correct horse battery", "password": .string("new password number \(i)")]).status) ?? 0
            statuses.withLock { $0[i] = status }
        }
        let all = statuses.withLock { $0 }
        #expect(all.values.filter { $0 == 204 }.count == 1)
        #expect(all.values.filter { $0 == 400 }.count == 5)
        // The winner's password is the one that works, and its session stays.
        let winner = try #require(all.first { $0.value == 204 }?.key)
        for i in 0..<6 {
            let signIn = try server.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "ada@example.com", "password": .string("new password number \(i)")])
            #expect(signIn.status == (i == winner ? 200 : 400))
        }
        #expect(try server.request("GET", "/v1/me", appKey: app.appKey, bearer: token).status == 200)
    }

    @Test(arguments: TestDatabase.kinds)
    func refreshTokensAreCheckedPerAppAndStoredOnlyAsHashes(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let a = try server.createApp(Self.roomy)
        let b = try server.createApp(Self.roomy)
        let token = try #require(try server.signUp(a)["refresh_token"]?.stringValue)
        #expect(try server.request("POST", "/v1/auth/refresh", appKey: b.appKey, json: ["refresh_token": .string(token)]).problemCode == "auth/invalid-refresh-token")
        #expect(try server.request("POST", "/v1/auth/refresh", appKey: a.appKey, json: ["refresh_token": "garbage"]).problemCode == "auth/invalid-refresh-token")
        // However long: not one of ours is 401, not a validation error.
        let long = try server.request("POST", "/v1/auth/refresh", appKey: a.appKey, json: ["refresh_token": .string(String(repeating: "r", count: 600))])
        #expect(long.status == 401)
        #expect(long.problemCode == "auth/invalid-refresh-token")
        #expect(try server.request("POST", "/v1/auth/refresh", appKey: a.appKey, json: [:]).problemCode == "request/validation-failed")
        let stored = try server.gatehouse.database.query("SELECT token_hash FROM refresh_tokens").map { try $0.string("token_hash") }
        #expect(!stored.contains(token))
        #expect(try server.request("POST", "/v1/auth/refresh", appKey: a.appKey, json: ["refresh_token": .string(token)]).status == 200)
    }

    @Test(arguments: TestDatabase.kinds)
    func aRefreshTokenOutlivingItsAbsoluteLifetimeIsRefused(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock()
        let server = try TestServer(kind, clock: clock)
        defer { server.stop() }
        let app = try server.createApp(["name": "Short", "refresh_token_ttl_seconds": 3600, "rate_limits": ["auth_per_minute_per_ip": 1000]])
        var token = try #require(try server.signUp(app)["refresh_token"]?.stringValue)
        func refresh() throws -> TestResponse {
            try server.request("POST", "/v1/auth/refresh", appKey: app.appKey, json: ["refresh_token": .string(token)])
        }
        clock.advance(seconds: 1800)
        var data = try #require(try refresh().data)
        #expect(data["expires_in"] == 900)
        token = try #require(data["refresh_token"]?.stringValue)
        // 300 s before the session's end, the access token lasts only that long.
        clock.advance(seconds: 1500)
        data = try #require(try refresh().data)
        #expect(data["expires_in"] == 300)
        let claims = try JSON.parse(JWT.parse(try #require(data["access_token"]?.stringValue)).payload)
        guard case .int(let exp) = claims["exp"], case .int(let iat) = claims["iat"] else { Issue.record("no exp or iat: \(claims)"); return }
        #expect(exp - iat == 300)
        token = try #require(data["refresh_token"]?.stringValue)
        clock.advance(seconds: 301)
        #expect(try refresh().problemCode == "auth/invalid-refresh-token")
    }

    @Test(arguments: TestDatabase.kinds)
    func aSessionLeftIdleLongerThanTheAppAllowsCannotBeRefreshed(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock()
        let server = try TestServer(kind, clock: clock)
        defer { server.stop() }
        let app = try server.createApp([
            "name": "Idle", "access_token_ttl_seconds": 600, "refresh_token_idle_seconds": 3600,
            "rate_limits": ["auth_per_minute_per_ip": 1000],
        ])
        func refresh(_ token: String) throws -> TestResponse {
            try server.request("POST", "/v1/auth/refresh", appKey: app.appKey, json: ["refresh_token": .string(token)])
        }
        let signedUp = try server.signUp(app)
        var token = try #require(signedUp["refresh_token"]?.stringValue)
        // Refreshing within the idle time keeps the session alive, well past one idle period in all.
        for _ in 0..<3 {
            clock.advance(seconds: 3500)
            token = try #require(try refresh(token).data?["refresh_token"]?.stringValue)
        }
        let second = try #require(try server.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"]).data)
        let sessions = try server.request("GET", "/v1/me/sessions", appKey: app.appKey, bearer: try #require(second["access_token"]?.stringValue))
        #expect(sessions.data?.arrayValue?.count == 2)

        clock.advance(seconds: 3601)
        #expect(try refresh(token).problemCode == "auth/invalid-refresh-token")
        // Trying again is no reuse: the session was idle, not stolen.
        #expect(try refresh(token).problemCode == "auth/invalid-refresh-token")
        #expect(try server.gatehouse.database.query("SELECT 1 AS one FROM events WHERE type = 'session.refresh_reused'").isEmpty)
        #expect(try refresh(try #require(second["refresh_token"]?.stringValue)).problemCode == "auth/invalid-refresh-token")

        // A new sign-in lists only itself: the idle sessions are gone.
        let third = try #require(try server.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"]).data?["access_token"]?.stringValue)
        let listed = try server.request("GET", "/v1/me/sessions", appKey: app.appKey, bearer: third).data?.arrayValue ?? []
        #expect(listed.map { $0["current"] } == [true])
    }

    @Test(arguments: TestDatabase.kinds)
    func anIdleTimeoutShorterThanAnAccessTokenIsRefused(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(["name": "Idle", "access_token_ttl_seconds": 3600])
        let refused = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["refresh_token_idle_seconds": 1800])
        #expect(refused.problemCode == "request/validation-failed")
        #expect(refused.json?["errors"]?.arrayValue?.map { $0["field"] } == ["refresh_token_idle_seconds"])
        let accepted = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["refresh_token_idle_seconds": 7200])
        #expect(accepted.data?["refresh_token_idle_seconds"] == 7200)
        // Raising the access tokens' lifetime above the idle timeout is refused as well.
        let longer = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["access_token_ttl_seconds": 10800])
        #expect(longer.json?["errors"]?.arrayValue?.map { $0["field"] } == ["refresh_token_idle_seconds"])
        let cleared = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["refresh_token_idle_seconds": nil])
        #expect(cleared.status == 200)
        #expect(cleared.data?["refresh_token_idle_seconds"] == .null)
    }

    @Test(arguments: TestDatabase.kinds)
    func signOutScopesEndTheRightSessions(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(Self.roomy)
        _ = try server.signUp(app)
        func signIn() throws -> String {
            try #require(try server.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"]).data?["access_token"]?.stringValue)
        }
        let (a, b, c) = (try signIn(), try signIn(), try signIn())
        #expect(try server.request("POST", "/v1/auth/signout", appKey: app.appKey, bearer: a).status == 204)
        let ended = try server.request("GET", "/v1/me", appKey: app.appKey, bearer: a)
        #expect(ended.problemCode == "auth/session-revoked")
        #expect(ended.header("WWW-Authenticate") == #"Bearer error="invalid_token""#)
        #expect(try server.request("GET", "/v1/me", appKey: app.appKey, bearer: b).status == 200)
        #expect(try server.request("POST", "/v1/auth/signout", appKey: app.appKey, bearer: b, json: ["scope": "others"]).status == 204)
        #expect(try server.request("GET", "/v1/me", appKey: app.appKey, bearer: b).status == 200)
        #expect(try server.request("GET", "/v1/me", appKey: app.appKey, bearer: c).problemCode == "auth/session-revoked")
        #expect(try server.request("POST", "/v1/auth/signout", appKey: app.appKey, bearer: b, json: ["scope": "everything"]).problemCode == "request/validation-failed")
        #expect(try server.request("POST", "/v1/auth/signout", appKey: app.appKey, bearer: b, json: ["scope": "all"]).status == 204)
        #expect(try server.request("GET", "/v1/me", appKey: app.appKey, bearer: b).problemCode == "auth/session-revoked")
        let signedOut = try server.gatehouse.database.query("SELECT type FROM events WHERE type = 'session.signed_out'")
        #expect(signedOut.count == 4)
    }

    @Test(arguments: TestDatabase.kinds)
    func meShowsAndChangesTheProfile(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(Self.roomy)
        let token = try #require(try server.signUp(app)["access_token"]?.stringValue)
        let me = try server.request("GET", "/v1/me", appKey: app.appKey, bearer: token)
        #expect(me.status == 200)
        #expect(me.data?["email"] == "ada@example.com")
        let patched = try server.request("PATCH", "/v1/me", appKey: app.appKey, bearer: token, json: ["first_name": "  Grace ", "last_name": "Hopper"])
        #expect(patched.data?["first_name"] == "Grace")
        #expect(patched.data?["last_name"] == "Hopper")
        let cleared = try server.request("PATCH", "/v1/me", appKey: app.appKey, bearer: token, json: ["last_name": nil])
        #expect(cleared.data?["first_name"] == "Grace")
        #expect(cleared.data?["last_name"] == .null)
        // GET /v1/me keeps its rendered body per account: a change shows at once all the same.
        let again = try server.request("GET", "/v1/me", appKey: app.appKey, bearer: token)
        #expect(again.data?["first_name"] == "Grace")
        #expect(again.data?["last_name"] == .null)
        #expect(again.header("Cache-Control") == "no-store")
        // A photo from a file that is not the user's is 404, and nothing of the request is written.
        let foreignPhoto = try server.request("PATCH", "/v1/me", appKey: app.appKey, bearer: token, json: ["first_name": "Ada", "photo_file_id": "fil_not_yours"])
        #expect(foreignPhoto.status == 404)
        #expect(foreignPhoto.problemCode == "request/not-found")
        let noPhoto = try server.request("PATCH", "/v1/me", appKey: app.appKey, bearer: token, json: ["photo_file_id": nil])
        #expect(noPhoto.data?["photo_url"] == .null)
        #expect(noPhoto.data?["first_name"] == "Grace")
        let marks = "a" + String(repeating: "\u{301}", count: 300)
        let both = try server.request("PATCH", "/v1/me", appKey: app.appKey, bearer: token, json: ["first_name": .string(String(repeating: "x", count: 51)), "last_name": .string(marks)])
        #expect(both.json?["errors"]?.arrayValue?.compactMap { $0["field"]?.stringValue } == ["first_name", "last_name"])
        for bad: JSON in [["first_name": .string(String(repeating: "x", count: 51))], ["last_name": .string(marks)], ["first_name": "tab\tname"], ["first_name": 5], ["nickname": "x"]] {
            #expect(try server.request("PATCH", "/v1/me", appKey: app.appKey, bearer: token, json: bad).problemCode == "request/validation-failed")
        }
        // A 401 about the bearer token carries RFC 6750's challenge; one about the app key has none to give.
        let missing = try server.request("GET", "/v1/me", appKey: app.appKey)
        #expect(missing.problemCode == "auth/missing-token")
        #expect(missing.header("WWW-Authenticate") == "Bearer")
        // The scheme's case and the blanks before the token do not count (RFC 9110, 11.1); another
        // scheme, or nothing after it, is no bearer token.
        for authorization in ["bearer \(token)", "BEARER \t \(token)"] {
            #expect(try server.request("GET", "/v1/me", appKey: app.appKey, headers: [("Authorization", authorization)]).status == 200)
        }
        for authorization in ["Basic \(token)", "Bearer", "Bearer\(token)"] {
            #expect(try server.request("GET", "/v1/me", appKey: app.appKey, headers: [("Authorization", authorization)]).problemCode == "auth/missing-token")
        }
        let forged = try server.request("GET", "/v1/me", appKey: app.appKey, bearer: "not.a.token")
        #expect(forged.problemCode == "auth/invalid-token")
        #expect(forged.header("WWW-Authenticate") == #"Bearer error="invalid_token""#)
        #expect(try server.request("GET", "/v1/me", bearer: token).header("WWW-Authenticate") == nil)
    }

    @Test(arguments: TestDatabase.kinds)
    func sessionsListTheDevicesAndOneCanBeSignedOut(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind) { $0.trustedProxies = ["127.0.0.1"] }
        defer { server.stop() }
        let app = try server.createApp(Self.roomy)
        let phone = try #require(try server.signUp(app)["access_token"]?.stringValue)
        let laptop = try #require(
            try server.request(
                "POST", "/v1/auth/signin", appKey: app.appKey, headers: [("User-Agent", "Laptop/1.0"), ("X-Forwarded-For", "198.51.100.7")],
                json: ["email": "ada@example.com", "password": "correct horse battery"]
            ).data?["access_token"]?.stringValue)
        let list = try server.request("GET", "/v1/me/sessions", appKey: app.appKey, bearer: phone)
        let sessions = try #require(list.data?.arrayValue)
        #expect(sessions.count == 2)
        #expect(list.json?["next_cursor"] == .null)
        let laptopSession = try #require(sessions.first { $0["user_agent"] == "Laptop/1.0" })
        #expect(laptopSession["ip"] == "198.51.100.7")
        #expect(laptopSession["current"] == false)
        #expect(laptopSession["method"] == "password")
        #expect(sessions.contains { $0["current"] == true })

        let id = try #require(laptopSession["id"]?.stringValue)
        #expect(try server.request("DELETE", "/v1/me/sessions/\(id)", appKey: app.appKey, bearer: phone).status == 204)
        #expect(try server.request("GET", "/v1/me", appKey: app.appKey, bearer: laptop).problemCode == "auth/session-revoked")
        #expect(try server.request("DELETE", "/v1/me/sessions/\(id)", appKey: app.appKey, bearer: phone).status == 404)
        #expect(try server.request("DELETE", "/v1/me/sessions/ses_nope", appKey: app.appKey, bearer: phone).status == 404)
        // Another user's session is not found, never forbidden.
        let eve = try server.signUp(app, email: "eve@example.com")
        let eveToken = try #require(eve["access_token"]?.stringValue)
        let eveSession = try #require(try server.request("GET", "/v1/me/sessions", appKey: app.appKey, bearer: eveToken).data?.arrayValue?.first?["id"]?.stringValue)
        #expect(try server.request("DELETE", "/v1/me/sessions/\(eveSession)", appKey: app.appKey, bearer: phone).status == 404)
        #expect(try server.request("GET", "/v1/me", appKey: app.appKey, bearer: eveToken).status == 200)
    }

    @Test(arguments: TestDatabase.kinds)
    func changingThePasswordEndsTheOtherSessions(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(Self.roomy)
        let here = try #require(try server.signUp(app)["access_token"]?.stringValue)
        let there = try #require(try server.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"]).data?["access_token"]?.stringValue)
        let wrong = try server.request("PUT", "/v1/me/password", appKey: app.appKey, bearer: here, json: ["current_password": "nope nope nope", "password": "a brand new one"])
        #expect(wrong.status == 400)
        #expect(wrong.problemCode == "auth/invalid-credential")
        // Over 128 characters is no password at all, as at sign-in.
        let long = try server.request("PUT", "/v1/me/password", appKey: app.appKey, bearer: here, json: ["current_password": .string(String(repeating: "p", count: 129)), "password": "a brand new one"])
        #expect(long.problemCode == "request/validation-failed")
        #expect(long.json?["errors"]?.arrayValue?.first?["field"] == "current_password")
        let bothLong = try server.request(
            "PUT", "/v1/me/password", appKey: app.appKey, bearer: here,
            json: ["current_password": .string(String(repeating: "p", count: 129)), "password": .string(String(repeating: "q", count: 129))])
        #expect(bothLong.json?["errors"]?.arrayValue?.compactMap { $0["field"]?.stringValue } == ["current_password", "password"])
        #expect(try server.request("PUT", "/v1/me/password", appKey: app.appKey, bearer: here, json: ["current_password": "correct horse battery", "password": "short"]).problemCode == "auth/weak-password")
        #expect(try server.request("PUT", "/v1/me/password", appKey: app.appKey, bearer: here, json: ["current_password": "correct horse battery", "password": "a brand new one"]).status == 204)
        #expect(try server.request("GET", "/v1/me", appKey: app.appKey, bearer: here).status == 200)
        #expect(try server.request("GET", "/v1/me", appKey: app.appKey, bearer: there).problemCode == "auth/session-revoked")
        #expect(try server.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"]).status == 400)
        #expect(try server.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "ada@example.com", "password": "a brand new one"]).status == 200)
    }

    @Test(arguments: TestDatabase.kinds)
    func identitiesListAndAddingAPasswordTwiceIsRefused(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(Self.roomy)
        let token = try #require(try server.signUp(app)["access_token"]?.stringValue)
        let identities = try server.request("GET", "/v1/me/identities", appKey: app.appKey, bearer: token)
        #expect(identities.data?.arrayValue?.count == 1)
        #expect(identities.data?.arrayValue?.first?["provider"] == "password")
        #expect(identities.data?.arrayValue?.first?["email"] == "ada@example.com")
        #expect(try server.request("POST", "/v1/me/identities/password", appKey: app.appKey, bearer: token, json: ["password": "another password"]).problemCode == "auth/credential-already-in-use")
    }

    @Test(arguments: TestDatabase.kinds)
    func reauthenticationGivesAFreshAuthTimeAndKeepsTheRefreshToken(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock()
        let server = try TestServer(kind, clock: clock)
        defer { server.stop() }
        let app = try server.createApp(Self.roomy)
        let session = try server.signUp(app)
        let token = try #require(session["access_token"]?.stringValue)
        let refresh = try #require(session["refresh_token"]?.stringValue)
        clock.advance(seconds: 400)
        let wrong = try server.request("POST", "/v1/auth/reauthenticate", appKey: app.appKey, bearer: token, json: ["password": "not it at all"])
        #expect(wrong.problemCode == "auth/invalid-credential")
        let long = try server.request("POST", "/v1/auth/reauthenticate", appKey: app.appKey, bearer: token, json: ["password": .string(String(repeating: "p", count: 129))])
        #expect(long.problemCode == "request/validation-failed")
        let fresh = try server.request("POST", "/v1/auth/reauthenticate", appKey: app.appKey, bearer: token, json: ["password": "correct horse battery"])
        #expect(fresh.status == 200)
        #expect(fresh.data?["refresh_token"] == nil)
        let newToken = try #require(fresh.data?["access_token"]?.stringValue)
        let oldAuthTime = try #require(JSON.parse(JWT.parse(token).payload)["auth_time"])
        let newAuthTime = try #require(JSON.parse(JWT.parse(newToken).payload)["auth_time"])
        #expect(newAuthTime == .int(clock.nowSeconds))
        #expect(oldAuthTime != newAuthTime)
        #expect(try server.request("POST", "/v1/auth/refresh", appKey: app.appKey, json: ["refresh_token": .string(refresh)]).status == 200)
    }

    @Test(arguments: TestDatabase.kinds)
    func theRecentLoginPolicyFollowsTheAppSetting(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock()
        let server = try TestServer(kind, clock: clock)
        defer { server.stop() }
        let created = try server.createApp(["name": "Recent", "recent_login_seconds": 60, "rate_limits": ["auth_per_minute_per_ip": 1000]])
        let token = try #require(try server.signUp(created)["access_token"]?.stringValue)
        let app = try #require(try server.gatehouse.directory.app(key: created.appKey))
        let claims = try server.gatehouse.tokens.verifyAccessToken(token, app: app)
        try server.gatehouse.sessions.requireRecentLogin(app: app, claims: claims)
        clock.advance(seconds: 61)
        #expect(throws: GatehouseError.self) { try server.gatehouse.sessions.requireRecentLogin(app: app, claims: claims) }
    }

    @Test(arguments: TestDatabase.kinds)
    func theAuthLimiterAnswers429WithRetryAfter(_ kind: TestDatabaseKind) throws {
        // A clock that stands still: the minute's window cannot roll over during the test.
        let server = try TestServer(kind, clock: ManualClock())
        defer { server.stop() }
        let app = try server.createApp(["name": "Limited"])
        for i in 0..<10 {
            let response = try server.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "x@example.com", "password": .string("whatever \(i)")])
            #expect(response.status == 400)
        }
        let limited = try server.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "x@example.com", "password": "whatever"])
        #expect(limited.status == 429)
        #expect(limited.problemCode == "auth/too-many-requests")
        let retryAfter = try #require(limited.header("Retry-After").flatMap(Int.init))
        #expect((1...60).contains(retryAfter))
        // Limits are per app.
        let other = try server.createApp(["name": "Other"])
        #expect(try server.request("POST", "/v1/auth/signin", appKey: other.appKey, json: ["email": "x@example.com", "password": "whatever"]).status == 400)
    }

    @Test(arguments: TestDatabase.kinds)
    func theRefreshCookieIsSetAndAccepted(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(["name": "Web", "refresh_cookie": true, "rate_limits": ["auth_per_minute_per_ip": 1000]])
        let name = "gh_refresh_\(app.id)"
        let response = try server.request("POST", "/v1/auth/signup", appKey: app.appKey, json: ["email": "web@example.com", "password": "correct horse battery"])
        let cookie = try #require(response.header("Set-Cookie"))
        // It lives as long as the refresh token (30 days by default), not only until the browser closes.
        #expect(cookie.hasSuffix("; HttpOnly; Secure; SameSite=Lax; Path=/v1/auth; Max-Age=2592000"))
        let value = String(cookie.prefix { $0 != ";" })
        #expect(value == "\(name)=\(response.data?["refresh_token"]?.stringValue ?? "")")
        let refreshed = try server.request("POST", "/v1/auth/refresh", appKey: app.appKey, headers: [("Cookie", value)])
        #expect(refreshed.status == 200)
        #expect(refreshed.header("Set-Cookie")?.hasPrefix("\(name)=\(refreshed.data?["refresh_token"]?.stringValue ?? "-")") == true)
        // A cookie that no longer refreshes (here: reused once its successor was used too, which
        // ends the session) is cleared; the old shared name is left alone (it may be another app's).
        let successor = try #require(refreshed.data?["refresh_token"]?.stringValue)
        #expect(try server.request("POST", "/v1/auth/refresh", appKey: app.appKey, headers: [("Cookie", "\(name)=\(successor)")]).status == 200)
        let reused = try server.request("POST", "/v1/auth/refresh", appKey: app.appKey, headers: [("Cookie", value)])
        #expect(reused.problemCode == "auth/refresh-token-reused")
        #expect(reused.headerValues("Set-Cookie") == ["\(name)=; HttpOnly; Secure; SameSite=Lax; Path=/v1/auth; Max-Age=0"])
        let unknown = try server.request("POST", "/v1/auth/refresh", appKey: app.appKey, headers: [("Cookie", "\(name)=not-a-token")])
        #expect(unknown.problemCode == "auth/invalid-refresh-token")
        #expect(unknown.header("Set-Cookie")?.hasSuffix("Max-Age=0") == true)
    }

    /// Two web apps on one Gatehouse host: each refresh cookie is named after its app, so signing
    /// in to one does not overwrite the other's, and each refreshes its own session.
    @Test(arguments: TestDatabase.kinds)
    func twoAppsOnOneHostKeepTheirOwnRefreshCookies(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let first = try server.createApp(["name": "One", "refresh_cookie": true])
        let second = try server.createApp(["name": "Two", "refresh_cookie": "only"])
        var jar: [String: String] = [:]  // what a browser keeps for the host, by cookie name
        func keep(_ response: TestResponse) {
            for cookie in response.headerValues("Set-Cookie") {
                let pair = cookie.prefix { $0 != ";" }
                guard let equals = pair.firstIndex(of: "=") else { continue }
                let value = String(pair[pair.index(after: equals)...])
                jar[String(pair[..<equals])] = cookie.hasSuffix("Max-Age=0") ? nil : value
            }
        }
        func cookieHeader() -> String { jar.map { "\($0.key)=\($0.value)" }.sorted().joined(separator: "; ") }
        keep(try server.request("POST", "/v1/auth/signup", appKey: first.appKey, json: ["email": "a@example.com", "password": "correct horse battery"]))
        keep(try server.request("POST", "/v1/auth/signup", appKey: second.appKey, json: ["email": "b@example.com", "password": "correct horse battery"]))
        #expect(Set(jar.keys) == ["gh_refresh_\(first.id)", "gh_refresh_\(second.id)"])
        for _ in 0..<2 {
            for (app, email) in [(first, "a@example.com"), (second, "b@example.com")] {
                let refreshed = try server.request("POST", "/v1/auth/refresh", appKey: app.appKey, headers: [("Cookie", cookieHeader())])
                #expect(refreshed.status == 200, "\(app.id)")
                #expect(refreshed.data?["user"]?["email"]?.stringValue == email)
                keep(refreshed)
            }
        }
        // Signing out of one clears only its own cookie.
        let token = try #require(try server.request("POST", "/v1/auth/refresh", appKey: first.appKey, headers: [("Cookie", cookieHeader())]).data?["access_token"]?.stringValue)
        keep(try server.request("POST", "/v1/auth/signout", appKey: first.appKey, bearer: token))
        #expect(Set(jar.keys) == ["gh_refresh_\(second.id)"])
        #expect(try server.request("POST", "/v1/auth/refresh", appKey: second.appKey, headers: [("Cookie", cookieHeader())]).status == 200)
    }

    /// A browser that still holds the old shared `gh_refresh` cookie stays signed in: the old name
    /// is read until 2027-01-05, and its successor moves to the app's own name.
    @Test(arguments: TestDatabase.kinds)
    func theOldRefreshCookieNameStillRefreshesForThirtyDays(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock(millis: 1_796_515_200_000)  // 2026-12-06
        let server = try TestServer(kind, clock: clock)
        defer { server.stop() }
        let app = try server.createApp(["name": "Web", "refresh_cookie": true])
        let token = try #require(try server.request(
            "POST", "/v1/auth/signup", appKey: app.appKey, json: ["email": "web@example.com", "password": "correct horse battery"]
        ).data?["refresh_token"]?.stringValue)
        let refreshed = try server.request("POST", "/v1/auth/refresh", appKey: app.appKey, headers: [("Cookie", "gh_refresh=\(token)")])
        #expect(refreshed.status == 200)
        let successor = try #require(refreshed.data?["refresh_token"]?.stringValue)
        #expect(refreshed.headerValues("Set-Cookie").first?.hasPrefix("gh_refresh_\(app.id)=\(successor);") == true)
        #expect(refreshed.headerValues("Set-Cookie").contains("gh_refresh=; HttpOnly; Secure; SameSite=Lax; Path=/v1/auth; Max-Age=0"))
        // From 2027-01-05 the old name is no longer read.
        clock.advance(seconds: 30 * 86400)  // 2027-01-05T00:00:00Z
        let late = try server.request("POST", "/v1/auth/refresh", appKey: app.appKey, headers: [("Cookie", "gh_refresh=\(successor)")])
        #expect(late.status == 400)
        #expect(late.problemCode == "request/validation-failed")
    }

    /// The old shared `gh_refresh` cookie holds the token of whichever app of the host set it
    /// last: another app that falls back to it and fails must not clear it, nor must its sign-out,
    /// or that app would sign the user out of the first one.
    @Test(arguments: TestDatabase.kinds)
    func anotherAppNeverClearsTheOldSharedCookie(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock(millis: 1_796_515_200_000)  // 2026-12-06
        let server = try TestServer(kind, clock: clock)
        defer { server.stop() }
        let first = try server.createApp(["name": "One", "refresh_cookie": true])
        let second = try server.createApp(["name": "Two", "refresh_cookie": true])
        let firstToken = try #require(try server.request(
            "POST", "/v1/auth/signup", appKey: first.appKey, json: ["email": "web@example.com", "password": "correct horse battery"]
        ).data?["refresh_token"]?.stringValue)
        let legacy = ("Cookie", "gh_refresh=\(firstToken)")
        let failed = try server.request("POST", "/v1/auth/refresh", appKey: second.appKey, headers: [legacy])
        #expect(failed.status == 401)
        #expect(!failed.headerValues("Set-Cookie").contains { $0.hasPrefix("gh_refresh=") }, "the other app's token stays")
        let secondSession = try server.request(
            "POST", "/v1/auth/signup", appKey: second.appKey, json: ["email": "web@example.com", "password": "correct horse battery"])
        let signedOut = try server.request(
            "POST", "/v1/auth/signout", appKey: second.appKey, bearer: secondSession.data?["access_token"]?.stringValue, headers: [legacy])
        #expect(signedOut.status == 204)
        #expect(signedOut.headerValues("Set-Cookie") == ["gh_refresh_\(second.id)=; HttpOnly; Secure; SameSite=Lax; Path=/v1/auth; Max-Age=0"])
        #expect(try server.request("POST", "/v1/auth/refresh", appKey: first.appKey, headers: [legacy]).status == 200, "still signed in to the first app")
    }

    /// `refresh_cookie: "only"`: no script (XSS included) can read the refresh token, since no body carries it.
    @Test(arguments: TestDatabase.kinds)
    func aCookieOnlyAppNeverPutsTheRefreshTokenInABody(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(["name": "Web", "refresh_cookie": "only", "refresh_token_ttl_seconds": 3600])
        let signedUp = try server.request("POST", "/v1/auth/signup", appKey: app.appKey, json: ["email": "web@example.com", "password": "correct horse battery"])
        #expect(signedUp.status == 201)
        #expect(signedUp.data?["refresh_token"] == .null)
        #expect(signedUp.data?["access_token"]?.stringValue != nil)
        let cookie = try #require(signedUp.header("Set-Cookie"))
        #expect(cookie.hasSuffix("; Max-Age=3600"))
        let refreshed = try server.request("POST", "/v1/auth/refresh", appKey: app.appKey, headers: [("Cookie", String(cookie.prefix { $0 != ";" }))])
        #expect(refreshed.status == 200)
        #expect(refreshed.data?["refresh_token"] == .null)
        #expect(refreshed.header("Set-Cookie")?.hasPrefix("gh_refresh_\(app.id)=") == true)
        #expect(try server.request("GET", "/v1/admin/app", bearer: app.secretKey).data?["refresh_cookie"] == "only")
        // Anything else is refused, naming the three choices.
        let wrong = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["refresh_cookie": "yes"])
        #expect(wrong.problemCode == "request/validation-failed")
        #expect(wrong.json?["errors"]?.arrayValue?.first?["field"] == "refresh_cookie")
    }
}

/// Gatehouse rejects every access token it should not accept.
@Suite("Access tokens from outside")
struct AccessTokenRejectionTests {
    /// Each node keeps verified tokens and accounts in memory (`VerifiedTokens`, `AccountCache`):
    /// what another node changes must still show, within the poll interval.
    @Test(arguments: TestDatabase.kinds)
    func anotherNodeSeesProfileChangesAndEndedSessionsWithinAboutASecond(_ kind: TestDatabaseKind) throws {
        let first = try TestServer(kind)
        defer { first.stop() }
        let second = try TestServer(anotherNodeOf: first)
        defer { second.stop() }
        let app = try first.createApp(AccountsAPITests.roomy)
        let token = try #require(try first.signUp(app)["access_token"]?.stringValue)
        func me(_ node: TestServer) throws -> TestResponse { try node.request("GET", "/v1/me", appKey: app.appKey, bearer: token) }
        // Both nodes have now checked the token and read the account.
        #expect(try me(first).data?["first_name"] == .null)
        #expect(try me(second).data?["first_name"] == .null)

        #expect(try first.request("PATCH", "/v1/me", appKey: app.appKey, bearer: token, json: ["first_name": "Grace"]).status == 200)
        // The node that made the change shows it at once; the other within its poll.
        #expect(try me(first).data?["first_name"] == "Grace")
        #expect(try eventually { try me(second).data?["first_name"] == "Grace" })

        #expect(try first.request("POST", "/v1/auth/signout", appKey: app.appKey, bearer: token).status == 204)
        #expect(try me(first).problemCode == "auth/session-revoked")
        #expect(try eventually { try me(second).problemCode == "auth/session-revoked" })
    }

    /// A node whose clock lags changes an account and ends a session: the others poll by the
    /// database's clock, so they still see both (by the lagging clock's times they would look past them).
    @Test(arguments: TestDatabase.kinds)
    func whatANodeWhoseClockLagsChangesIsSeenByTheOthers(_ kind: TestDatabaseKind) throws {
        struct LaggingClock: Clock {
            func nowMillis() -> Int64 { SystemClock().nowMillis() - 60_000 }
        }
        let first = try TestServer(kind)
        defer { first.stop() }
        let lagging = try TestServer(anotherNodeOf: first, clock: LaggingClock())
        defer { lagging.stop() }
        let app = try first.createApp(AccountsAPITests.roomy)
        let token = try #require(try lagging.signUp(app)["access_token"]?.stringValue)
        #expect(try first.request("GET", "/v1/me", appKey: app.appKey, bearer: token).data?["first_name"] == .null)
        #expect(try lagging.request("PATCH", "/v1/me", appKey: app.appKey, bearer: token, json: ["first_name": "Ada"]).status == 200)
        #expect(try eventually { try first.request("GET", "/v1/me", appKey: app.appKey, bearer: token).data?["first_name"] == "Ada" })
        #expect(try lagging.request("POST", "/v1/auth/signout", appKey: app.appKey, bearer: token).status == 204)
        #expect(try eventually { try first.request("GET", "/v1/me", appKey: app.appKey, bearer: token).problemCode == "auth/session-revoked" })
    }

    /// During an upgrade, a node of the previous version ends sessions without `ended_db_at`
    /// (migration 0005): the others still see those ended.
    @Test(arguments: TestDatabase.kinds)
    func aSessionEndedByANodeOfThePreviousVersionIsSeenEnded(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(AccountsAPITests.roomy)
        let token = try #require(try server.signUp(app)["access_token"]?.stringValue)
        #expect(try server.request("GET", "/v1/me", appKey: app.appKey, bearer: token).status == 200)
        let session = try #require(try JSON.parse(JWT.parse(token).payload)["sid"]?.stringValue)
        try server.gatehouse.database.execute("""
            UPDATE sessions SET ended_at = \(SystemClock().nowMillis()), end_reason = 'signed_out' WHERE id = \(session)
            """)
        #expect(try eventually { try server.request("GET", "/v1/me", appKey: app.appKey, bearer: token).problemCode == "auth/session-revoked" })
    }

    /// True once `condition` holds, polling for up to 15 s (the poll it waits for runs every second).
    private func eventually(_ condition: () throws -> Bool) throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(15)
        while ContinuousClock.now < deadline {
            if try condition() { return true }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return false
    }

    @Test(arguments: TestDatabase.kinds)
    func forgedExpiredAndForeignTokensAreRefused(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock()
        let server = try TestServer(kind, clock: clock)
        defer { server.stop() }
        let app = try server.createApp(AccountsAPITests.roomy)
        let other = try server.createApp(AccountsAPITests.roomy)
        let token = try #require(try server.signUp(app)["access_token"]?.stringValue)
        let foreign = try #require(try server.signUp(other)["access_token"]?.stringValue)
        let parts = token.split(separator: ".").map(String.init)
        let payload = try JSON.parse(try #require(Base64URL.decode(parts[1])))

        func code(_ bearer: String) throws -> String? { try server.request("GET", "/v1/me", appKey: app.appKey, bearer: bearer).problemCode }
        #expect(try server.request("GET", "/v1/me", appKey: app.appKey, bearer: token).status == 200)
        #expect(try code(foreign) == "auth/invalid-token")
        // Swift's String equality is canonical equivalence: KELVIN SIGN equals "K". The token just
        // verified (and remembered) must not vouch for a different byte string.
        // A token has no K about once in 60; another sign-in gives another token (a new session).
        var withK = token
        for _ in 0..<20 where !withK.contains("K") {
            let again = try server.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"])
            withK = try #require(again.data?["access_token"]?.stringValue)
        }
        #expect(try server.request("GET", "/v1/me", appKey: app.appKey, bearer: withK).status == 200)
        let k = try #require(withK.firstIndex(of: "K"), "twenty ~700-character base64url tokens without a K")
        #expect(try code(withK.replacingCharacters(in: k...k, with: "\u{212A}")) == "auth/invalid-token")
        // Remembered tokens are found by the end of their signature: one that ends the same but
        // differs before it must not match the remembered one.
        var tampered = Array(withK.utf8)
        tampered[tampered.count / 2] = tampered[tampered.count / 2] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect(try code(String(decoding: tampered, as: UTF8.self)) == "auth/invalid-token")
        // alg none.
        #expect(try code(Base64URL.encode(#"{"alg":"none","typ":"at+jwt"}"#.utf8) + "." + parts[1] + ".") == "auth/invalid-token")
        // HS256 with the app's public key as the secret.
        let jwk = try #require(server.request("GET", "/v1/apps/\(app.id)/jwks.json").json?["keys"]?.arrayValue?.first)
        let kid = try #require(jwk["kid"]?.stringValue)
        let hsInput = Base64URL.encode(#"{"alg":"HS256","kid":"\#(kid)","typ":"at+jwt"}"#.utf8) + "." + parts[1]
        let hmac = Digest.hmacSHA256(key: Base64URL.decode(jwk["n"]!.stringValue!)!, data: Array(hsInput.utf8))
        #expect(try code(hsInput + "." + Base64URL.encode(hmac)) == "auth/invalid-token")
        // Tampered payload.
        guard case .object(var claims) = payload else { Issue.record("payload"); return }
        claims["sub"] = "usr_aaaaaaaaaaaaaaaaaaaaaaaa"
        #expect(try code(parts[0] + "." + Base64URL.encode(JSON.object(claims).serialized()) + "." + parts[2]) == "auth/invalid-token")
        // Signed by a key the app never published.
        let stranger = try SigningKey.generate(.rs256)
        #expect(try code(try JWT.sign(payload: payload.serialized(), key: stranger, kid: kid, type: "at+jwt")) == "auth/invalid-token")
        #expect(try code(try JWT.sign(payload: payload.serialized(), key: stranger, kid: "unknown", type: "at+jwt")) == "auth/invalid-token")
        #expect(try code("not.a.token") == "auth/invalid-token")
        #expect(try code(String(repeating: "a", count: 9000)) == "auth/invalid-token")
        // Expired: no leeway.
        clock.advance(seconds: 900)
        #expect(try code(token) == "auth/token-expired")
    }
}

@Suite("Adding a password to an account without one")
struct AddPasswordTests {
    @Test(arguments: TestDatabase.kinds)
    func anAccountWithoutAPasswordCanAddOneAndThenSignInWithIt(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let created = try server.createApp(AccountsAPITests.roomy)
        let app = try #require(try server.gatehouse.directory.app(key: created.appKey))
        // An account as provider sign-in will make it: an email, no password.
        let data = server.gatehouse.store.app(app.id)
        let now = server.clock.nowMillis()
        let user = User(id: .generate(), email: "sam@example.com", emailVerified: true, firstName: nil, lastName: nil, createdAt: now, updatedAt: now, lastSignInAt: now)
        try data.users.insertUser(
            user, passwordHash: nil, identity: Identity(provider: .apple, subject: "001234.abcd", email: "sam@example.com", createdAt: now),
            event: Event(type: .userSignedUp, userID: user.id, sessionID: nil, ip: nil, userAgent: nil, createdAt: now))
        let grant = try server.gatehouse.sessions.startSession(
            app: app, data, user: user, method: .apple, isNewUser: false, origin: RequestOrigin(ip: "127.0.0.1", userAgent: nil)).session()
        let token = grant.accessToken

        #expect(try server.request("POST", "/v1/auth/signin", appKey: created.appKey, json: ["email": "sam@example.com", "password": "a fine password"]).status == 400)
        #expect(try server.request("POST", "/v1/me/identities/password", appKey: created.appKey, bearer: token, json: ["password": "short"]).problemCode == "auth/weak-password")
        let added = try server.request("POST", "/v1/me/identities/password", appKey: created.appKey, bearer: token, json: ["password": "a fine password"])
        #expect(added.status == 200)
        #expect(Set(added.data?.arrayValue?.compactMap { $0["provider"]?.stringValue } ?? []) == ["apple", "password"])
        #expect(try server.request("POST", "/v1/auth/signin", appKey: created.appKey, json: ["email": "sam@example.com", "password": "a fine password"]).status == 200)
        #expect(try server.request("GET", "/v1/me", appKey: created.appKey, bearer: token).data?["identities"] == ["apple", "password"])
    }
}

@Suite("Lists and abuse limits of the account endpoints")
struct AccountLimitsTests {
    @Test(arguments: TestDatabase.kinds)
    func sessionsArePagedWithAnOpaqueCursor(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(AccountsAPITests.roomy)
        let token = try #require(try server.signUp(app)["access_token"]?.stringValue)
        for _ in 0..<4 {
            _ = try server.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"])
        }
        var seen: [String] = []
        var cursor: String?
        repeat {
            let query = "?limit=2" + (cursor.map { "&cursor=\($0)" } ?? "")
            let page = try server.request("GET", "/v1/me/sessions\(query)", appKey: app.appKey, bearer: token)
            #expect(page.status == 200)
            seen += page.data?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
            cursor = page.json?["next_cursor"]?.stringValue
        } while cursor != nil && seen.count < 10
        #expect(seen.count == 5)
        #expect(Set(seen).count == 5)
        for bad in ["?limit=0", "?limit=101", "?limit=x", "?cursor=bogus"] {
            #expect(try server.request("GET", "/v1/me/sessions\(bad)", appKey: app.appKey, bearer: token).problemCode == "request/validation-failed", "\(bad)")
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func guessingTheCurrentPasswordIsLimited(_ kind: TestDatabaseKind) throws {
        // A clock that stands still: the minute's window cannot roll over between the guesses.
        let server = try TestServer(kind, clock: ManualClock())
        defer { server.stop() }
        let app = try server.createApp(["name": "Limited", "rate_limits": ["auth_per_minute_per_ip": 5]])
        let token = try #require(try server.signUp(app)["access_token"]?.stringValue)
        var codes: [String?] = []
        for i in 0..<6 {
            codes.append(try server.request("PUT", "/v1/me/password", appKey: app.appKey, bearer: token, json: ["current_password": .string("guess number \(i)"), "password": "a brand new one"]).problemCode)
        }
        #expect(codes.last == "auth/too-many-requests")
        #expect(codes.dropLast().allSatisfy { $0 == "auth/invalid-credential" || $0 == "auth/too-many-requests" })
    }

    @Test(arguments: TestDatabase.kinds)
    func addingAPasswordNeedsARecentSignIn(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock()
        let server = try TestServer(kind, clock: clock)
        defer { server.stop() }
        let app = try server.createApp(AccountsAPITests.roomy)
        let token = try #require(try server.signUp(app)["access_token"]?.stringValue)
        clock.advance(seconds: 301)
        #expect(try server.request("POST", "/v1/me/identities/password", appKey: app.appKey, bearer: token, json: ["password": "another password"]).problemCode == "auth/requires-recent-login")
    }

    @Test
    func ipv6ClientsAreLimitedPerSlash64() {
        #expect(rateLimitSubject(ip: "2001:db8:1:2::1") == rateLimitSubject(ip: "2001:db8:1:2:ffff::9"))
        #expect(rateLimitSubject(ip: "2001:db8:1:2::1") != rateLimitSubject(ip: "2001:db8:1:3::1"))
        #expect(rateLimitSubject(ip: "198.51.100.7") == "198.51.100.7")
    }
}
