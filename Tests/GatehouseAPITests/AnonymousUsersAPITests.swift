import Foundation
import GatehouseCore
import GatehouseCrypto
import GatehouseTesting
import Testing

/// Anonymous users (API.md, "Moving users in and out", 2026-12-05): `allow_anonymous` and
/// `anonymous_ttl_days`, `POST /v1/auth/anonymous`, the upgrades in place (a password with an
/// email, a confirmed email, Google), their collisions, what an anonymous account may not do, and
/// the erasure of the ones not seen for their app's TTL. The real server, a real SMTP sink, a
/// fake Google over HTTP, a clock moved by hand; both databases.
@Suite("Anonymous users")
struct AnonymousUsersAPITests {
    static let googleClient = "1234-anon.apps.googleusercontent.com"

    final class World: @unchecked Sendable {
        let clock = ManualClock()
        let sink: SMTPSink
        let google: FakeGoogle
        let hooks: WebhookSink
        let server: TestServer
        let app: TestServer.CreatedApp
        var seenMails = 0

        init(_ kind: TestDatabaseKind, settings: [String: JSON] = [:]) throws {
            sink = try SMTPSink()
            google = try FakeGoogle(clock: clock)
            hooks = try WebhookSink()
            let (smtp, keys) = (sink.url, google.keysURL)
            server = try TestServer(kind, clock: clock) {
                $0.smtpURL = smtp
                $0.googleJWKSURL = keys
                $0.allowPrivateOutbound = true
            }
            server.gatehouse.stopBackgroundWork()
            var all: [String: JSON] = [
                "name": "Guests", "allow_anonymous": true, "sign_in_methods": ["password", "email_code", "google"],
                "rate_limits": ["auth_per_minute_per_ip": 1000], "google": ["client_ids": [.string(AnonymousUsersAPITests.googleClient)]],
                "webhooks": [["url": .string(hooks.url()), "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "events": ["user.upgraded", "user.deleted"]]],
            ]
            for (key, value) in settings { all[key] = value }
            app = try server.createApp(.object(all))
        }

        func stop() {
            server.stop()
            google.stop()
            sink.stop()
            hooks.stop()
        }

        func post(_ path: String, _ json: JSON? = nil, bearer: String? = nil, app: TestServer.CreatedApp? = nil) throws -> TestResponse {
            try server.request("POST", path, appKey: (app ?? self.app).appKey, bearer: bearer, json: json)
        }

        func get(_ path: String, bearer: String) throws -> TestResponse {
            try server.request("GET", path, appKey: app.appKey, bearer: bearer)
        }

        /// A new anonymous session's `data`.
        func anonymous(app: TestServer.CreatedApp? = nil) throws -> JSON {
            let response = try post("/v1/auth/anonymous", app: app)
            guard response.status == 201, let data = response.data else {
                throw MailExpectation("anonymous sign-in answered \(response.status): \(response.text)")
            }
            return data
        }

        func admin(_ path: String, app: TestServer.CreatedApp? = nil) throws -> TestResponse {
            try server.request("GET", path, bearer: (app ?? self.app).secretKey)
        }

        func events(_ type: String, user: String) throws -> [JSON] {
            try admin("/v1/admin/events?type=\(type)&user_id=\(user)").json?["data"]?.arrayValue ?? []
        }

        /// The code in the one new mail to `address`.
        func code(to address: String) throws -> String {
            while try server.gatehouse.outboxWorker.runOnce() > 0 {}
            let mails = Array(try sink.messages().dropFirst(seenMails)).filter { $0.recipients == [address] }
            seenMails = try sink.messages().count
            guard mails.count == 1, let mail = mails.first else { throw MailExpectation("expected one mail to \(address), got \(mails.count)") }
            let text = try IndependentMailParser.parse(mail.raw).parts.first { $0.contentType == "text/plain" }?.content ?? ""
            guard let range = text.range(of: #"\b[0-9]{6}\b"#, options: .regularExpression) else { throw MailExpectation("no code in: \(text)") }
            return String(text[range])
        }

        /// The webhook bodies delivered so far, as `(type, user)`.
        func webhooks() throws -> [(String, JSON)] {
            while try server.gatehouse.outboxWorker.runOnce() > 0 {}
            return hooks.deliveries.compactMap { delivery in
                guard let body = delivery.json, let type = body["type"]?.stringValue, let user = body["data"]?["user"] else { return nil }
                return (type, user)
            }
        }

        func googleToken(sub: String, email: String?, nonce: String) -> String {
            google.mintIDToken(sub: sub, aud: AnonymousUsersAPITests.googleClient, email: email, nonce: nonce)
        }
    }

    struct MailExpectation: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    static func claims(_ token: String?) throws -> JSON { try JSON.parse(JWT.parse(try #require(token)).payload) }

    static func fields(_ response: TestResponse) -> Set<String> {
        Set((response.json?["errors"]?.arrayValue ?? []).compactMap { $0["field"]?.stringValue })
    }

    // MARK: - The settings and the sign-in

    @Test(arguments: TestDatabase.kinds)
    func anonymousSignInIsOffUntilTheAppAllowsItAndTheSettingsAreChecked(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let plain = try world.server.createApp(["name": "Plain"])
        let refused = try world.post("/v1/auth/anonymous", app: plain)
        #expect(refused.status == 403 && refused.problemCode == "auth/sign-in-method-disabled")
        #expect(try world.server.gatehouse.database.query("SELECT id FROM users").isEmpty)
        let settings = try world.server.request("GET", "/v1/admin/app", bearer: plain.secretKey)
        #expect(settings.data?["allow_anonymous"] == false && settings.data?["anonymous_ttl_days"] == 30)
        #expect(try world.server.request("GET", "/v1/app", appKey: plain.appKey).data?["allow_anonymous"] == false)
        #expect(try world.server.request("GET", "/v1/app", appKey: world.app.appKey).data?["allow_anonymous"] == true)

        for bad: JSON in [["anonymous_ttl_days": 0], ["anonymous_ttl_days": 3651], ["anonymous_ttl_days": "30"], ["allow_anonymous": "yes"]] {
            let patched = try world.server.request("PATCH", "/v1/admin/app", bearer: plain.secretKey, json: bad)
            #expect(patched.status == 400 && patched.problemCode == "request/validation-failed")
            #expect(Self.fields(patched) == Set(bad.objectValue?.keys.map { $0 } ?? []))
        }
        let on = try world.server.request("PATCH", "/v1/admin/app", bearer: plain.secretKey, json: ["allow_anonymous": true, "anonymous_ttl_days": 7])
        #expect(on.status == 200 && on.data?["allow_anonymous"] == true && on.data?["anonymous_ttl_days"] == 7)
        #expect(try world.post("/v1/auth/anonymous", app: plain).status == 201)
        // Not with a required second step, which an anonymous session could never pass.
        let required = try world.server.request("PATCH", "/v1/admin/app", bearer: plain.secretKey, json: ["mfa": ["policy": "required"]])
        #expect(required.status == 400 && Self.fields(required) == ["allow_anonymous"])
        // No new accounts at all: no anonymous ones either.
        _ = try world.server.request("PATCH", "/v1/admin/app", bearer: plain.secretKey, json: ["allow_signup": false])
        #expect(try world.post("/v1/auth/anonymous", app: plain).problemCode == "auth/signup-disabled")
    }

    @Test(arguments: TestDatabase.kinds)
    func anAnonymousSignInOpensASessionMarkedAnonymousInTheUserAndTheToken(_ kind: TestDatabaseKind) throws {
        let world = try World(kind, settings: ["mfa": ["policy": "optional"]])
        defer { world.stop() }
        // An empty body, `{}` and a locale are all fine; anything else is refused.
        let empty = try world.server.request("POST", "/v1/auth/anonymous", appKey: world.app.appKey)
        #expect(empty.status == 201)
        let session = try #require(try world.post("/v1/auth/anonymous", ["locale": "ko-KR"]).data)
        #expect(try world.post("/v1/auth/anonymous", [:]).status == 201)
        let unknown = try world.post("/v1/auth/anonymous", ["email": "x@example.com"])
        #expect(unknown.status == 400 && Self.fields(unknown) == ["email"])
        #expect(try world.post("/v1/auth/anonymous", ["locale": "not a tag!"]).status == 400)

        // A session at once: there is no second factor to ask for.
        #expect(session["is_new_user"] == true && session["refresh_token"]?.stringValue != nil)
        let user = try #require(session["user"])
        #expect(user["is_anonymous"] == true && user["email"] == .null && user["identities"] == [] && user["locale"] == "ko-KR")
        let id = try #require(user["id"]?.stringValue)
        let claims = try Self.claims(session["access_token"]?.stringValue)
        #expect(claims["is_anonymous"] == true && claims["amr"] == ["anon"] && claims["sub"]?.stringValue == id && claims["email"] == nil)

        let token = try #require(session["access_token"]?.stringValue)
        #expect(try world.get("/v1/me", bearer: token).data?["is_anonymous"] == true)
        #expect(try world.get("/v1/me/identities", bearer: token).json?["data"] == [])
        #expect(try world.get("/v1/me/sessions", bearer: token).json?["data"]?.arrayValue?.first?["method"] == "anonymous")
        let refreshed = try world.post("/v1/auth/refresh", ["refresh_token": .string(try #require(session["refresh_token"]?.stringValue))])
        #expect(refreshed.status == 200 && refreshed.data?["user"]?["id"]?.stringValue == id)
        #expect(try Self.claims(refreshed.data?["access_token"]?.stringValue)["is_anonymous"] == true)
        #expect(try world.events("user.signed_up", user: id).first?["data"]?["method"] == "anonymous")

        // Any other user's token has no such claim, and its user object says false.
        _ = try world.server.request("PATCH", "/v1/admin/app", bearer: world.app.secretKey, json: ["mfa": ["policy": "off"]])
        let member = try world.server.signUp(world.app, email: "ada@example.com")
        #expect(member["user"]?["is_anonymous"] == false)
        #expect(try Self.claims(member["access_token"]?.stringValue)["is_anonymous"] == nil)

        // The admin's list shows it, and filters on it.
        let all = try #require(try world.admin("/v1/admin/users").json?["data"]?.arrayValue)
        #expect(all.count == 4 && all.filter { $0["is_anonymous"] == true }.count == 3)
        let onlyAnonymous = try #require(try world.admin("/v1/admin/users?anonymous=true").json?["data"]?.arrayValue)
        #expect(onlyAnonymous.count == 3 && onlyAnonymous.allSatisfy { $0["is_anonymous"] == true })
        let members = try #require(try world.admin("/v1/admin/users?anonymous=false").json?["data"]?.arrayValue)
        #expect(members.map { $0["email"] } == ["ada@example.com"])
        let bad = try world.admin("/v1/admin/users?anonymous=yes")
        #expect(bad.status == 400 && Self.fields(bad) == ["anonymous"])
        #expect(try world.admin("/v1/admin/users/\(id)").data?["is_anonymous"] == true)
    }

    @Test(arguments: TestDatabase.kinds)
    func anonymousSignInsAreLimitedPerAddressLikeSignUps(_ kind: TestDatabaseKind) throws {
        let world = try World(kind, settings: ["rate_limits": ["auth_per_minute_per_ip": 3]])
        defer { world.stop() }
        for _ in 0..<3 { #expect(try world.post("/v1/auth/anonymous").status == 201) }
        let limited = try world.post("/v1/auth/anonymous")
        #expect(limited.status == 429 && limited.problemCode == "auth/too-many-requests")
        // The same bucket as sign-up's: a sign-up from the address is over the limit too.
        let signUp = try world.post("/v1/auth/signup", ["email": "ada@example.com", "password": "correct horse battery"])
        #expect(signUp.status == 429)
        world.clock.advance(seconds: 61)
        #expect(try world.post("/v1/auth/anonymous").status == 201)
        #expect(try world.server.gatehouse.database.query("SELECT id FROM users WHERE is_anonymous = 1").count == 4)
    }

    // MARK: - Upgrades

    @Test(arguments: TestDatabase.kinds)
    func aPasswordWithAnEmailUpgradesTheSameUserLongAfterItsSignIn(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let session = try world.anonymous()
        let id = try #require(session["user"]?["id"]?.stringValue)
        let token = try #require(session["access_token"]?.stringValue)
        // Long past `recent_login_seconds`: an anonymous user cannot reauthenticate, and need not.
        world.clock.advance(seconds: 600)
        let firstRefresh = try #require(session["refresh_token"]?.stringValue)
        let refreshed = try #require(try world.post("/v1/auth/refresh", ["refresh_token": .string(firstRefresh)]).data)
        let access = try #require(refreshed["access_token"]?.stringValue)
        #expect(token != access)

        let noEmail = try world.post("/v1/me/identities/password", ["password": "correct horse battery"], bearer: access)
        #expect(noEmail.status == 400 && Self.fields(noEmail) == ["email"])
        let weak = try world.post("/v1/me/identities/password", ["password": "short", "email": "pat@example.com"], bearer: access)
        #expect(weak.status == 400 && weak.problemCode == "auth/weak-password")
        let linked = try world.post("/v1/me/identities/password", ["password": "correct horse battery", "email": "Pat@Example.com"], bearer: access)
        #expect(linked.status == 200)
        #expect(linked.json?["data"]?.arrayValue?.map { $0["provider"] } == ["password"])

        let me = try #require(try world.get("/v1/me", bearer: access).data)
        #expect(me["id"]?.stringValue == id && me["is_anonymous"] == false && me["email"] == "pat@example.com" && me["email_verified"] == false)
        #expect(try world.events("user.upgraded", user: id).first?["data"]?["method"] == "password")
        // The app's backend hears of it, with the user as it is now.
        let upgradedHooks = try world.webhooks().filter { $0.0 == "user.upgraded" }
        #expect(upgradedHooks.count == 1 && upgradedHooks.first?.1["id"]?.stringValue == id && upgradedHooks.first?.1["is_anonymous"] == false)
        // A verification code went out, as after a sign-up; it verifies the address.
        let code = try world.code(to: "pat@example.com")
        #expect(try world.post("/v1/auth/email/verification/confirm", ["code": .string(code)], bearer: access).status == 200)
        // The session goes on, and the password signs in to the same user, no longer anonymous.
        let signedIn = try world.post("/v1/auth/signin", ["email": "pat@example.com", "password": "correct horse battery"])
        #expect(signedIn.status == 200 && signedIn.data?["user"]?["id"]?.stringValue == id)
        #expect(try Self.claims(signedIn.data?["access_token"]?.stringValue)["is_anonymous"] == nil)
        let next = try world.post("/v1/auth/refresh", ["refresh_token": .string(try #require(refreshed["refresh_token"]?.stringValue))])
        #expect(next.status == 200 && next.data?["user"]?["is_anonymous"] == false)
        #expect(try Self.claims(next.data?["access_token"]?.stringValue)["is_anonymous"] == nil)

        // Now an ordinary account: `email` is refused, and a recent login needed again.
        let again = try world.post("/v1/me/identities/password", ["password": "another horse battery", "email": "x@example.com"], bearer: access)
        #expect(again.status == 403 && again.problemCode == "auth/requires-recent-login")
        let fresh = try #require(signedIn.data?["access_token"]?.stringValue)
        let withEmail = try world.post("/v1/me/identities/password", ["password": "another horse battery", "email": "x@example.com"], bearer: fresh)
        #expect(withEmail.status == 400 && Self.fields(withEmail) == ["email"])
        // A member without an address may not give one here either.
        let memberWithoutEmail = try world.post(
            "/v1/auth/oauth/google", ["id_token": .string(world.googleToken(sub: "g-hidden", email: nil, nonce: "n0")), "nonce": "n0"])
        let hidden = try #require(memberWithoutEmail.data?["access_token"]?.stringValue)
        let refusedEmail = try world.post("/v1/me/identities/password", ["password": "correct horse battery", "email": "y@example.com"], bearer: hidden)
        #expect(refusedEmail.status == 400 && Self.fields(refusedEmail) == ["email"])
    }

    @Test(arguments: TestDatabase.kinds)
    func aPasswordUpgradeAtAnAddressInUseIsRefusedAsASignUpWouldBe(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        _ = try world.server.signUp(world.app, email: "ada@example.com")
        let session = try world.anonymous()
        let access = try #require(session["access_token"]?.stringValue)
        let taken = try world.post("/v1/me/identities/password", ["password": "correct horse battery", "email": "ada@example.com"], bearer: access)
        #expect(taken.status == 409 && taken.problemCode == "auth/email-already-in-use")
        let signUpAnswer = try world.post("/v1/auth/signup", ["email": "ada@example.com", "password": "correct horse battery"])
        #expect(signUpAnswer.problemCode == taken.problemCode && signUpAnswer.status == taken.status)
        let me = try #require(try world.get("/v1/me", bearer: access).data)
        #expect(me["is_anonymous"] == true && me["email"] == .null && me["identities"] == [])
        let id = try #require(me["id"]?.stringValue)
        #expect(try world.events("user.upgraded", user: id).isEmpty)
        // The password was not kept: the address still signs in only to its owner.
        #expect(try world.post("/v1/auth/signin", ["email": "ada@example.com", "password": "correct horse battery"]).data?["user"]?["id"]?.stringValue != id)
    }

    @Test(arguments: TestDatabase.kinds)
    func aConfirmedEmailUpgradesTheSameUserWhichThenSignsInByCode(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let session = try world.anonymous()
        let id = try #require(session["user"]?["id"]?.stringValue)
        let access = try #require(session["access_token"]?.stringValue)
        world.clock.advance(seconds: 301)  // past the recent login an email change asks of others
        _ = try world.server.signUp(world.app, email: "ada@example.com")
        let taken = try world.post("/v1/me/email", ["email": "ada@example.com"], bearer: access)
        #expect(taken.status == 409 && taken.problemCode == "auth/email-already-in-use")
        #expect(try world.post("/v1/me/email", ["email": "grace@example.com"], bearer: access).status == 202)
        let code = try world.code(to: "grace@example.com")
        let confirmed = try world.post("/v1/me/email/confirm", ["email": "grace@example.com", "code": .string(code)], bearer: access)
        #expect(confirmed.status == 200)
        let user = try #require(confirmed.data)
        #expect(user["id"]?.stringValue == id && user["is_anonymous"] == false && user["email"] == "grace@example.com" && user["email_verified"] == true)
        #expect(try world.events("user.upgraded", user: id).first?["data"]?["method"] == "email")
        #expect(try world.events("user.email_changed", user: id).count == 1)
        // No notice to a previous address: there was none (only the code and the sign-in code went out).
        #expect(try world.post("/v1/auth/email-code/send", ["email": "grace@example.com"]).status == 202)
        let signInCode = try world.code(to: "grace@example.com")
        let signedIn = try world.post("/v1/auth/email-code/verify", ["email": "grace@example.com", "code": .string(signInCode)])
        #expect(signedIn.status == 200 && signedIn.data?["user"]?["id"]?.stringValue == id && signedIn.data?["is_new_user"] == false)
    }

    @Test(arguments: TestDatabase.kinds)
    func linkingGoogleUpgradesTheSameUserAndAGoogleAccountInUseIsRefused(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        // Someone signed up with Google already.
        let owner = try world.post("/v1/auth/oauth/google", ["id_token": .string(world.googleToken(sub: "g-owner", email: "owner@gmail.com", nonce: "n1")), "nonce": "n1"])
        #expect(owner.status == 201)
        let guest = try world.anonymous()
        let id = try #require(guest["user"]?["id"]?.stringValue)
        let access = try #require(guest["access_token"]?.stringValue)
        world.clock.advance(seconds: 600)
        let inUse = try world.post("/v1/me/identities/google", ["id_token": .string(world.googleToken(sub: "g-owner", email: "owner@gmail.com", nonce: "n2")), "nonce": "n2"], bearer: access)
        #expect(inUse.status == 409 && inUse.problemCode == "auth/credential-already-in-use")
        #expect(try world.get("/v1/me", bearer: access).data?["is_anonymous"] == true)

        let linked = try world.post("/v1/me/identities/google", ["id_token": .string(world.googleToken(sub: "g-guest", email: "guest@gmail.com", nonce: "n3")), "nonce": "n3"], bearer: access)
        #expect(linked.status == 200)
        #expect(linked.json?["data"]?.arrayValue?.map { $0["provider"] } == ["google"])
        let me = try #require(try world.get("/v1/me", bearer: access).data)
        #expect(me["id"]?.stringValue == id && me["is_anonymous"] == false && me["email"] == "guest@gmail.com" && me["email_verified"] == true)
        #expect(try world.events("user.upgraded", user: id).first?["data"]?["method"] == "google")
        #expect(try world.events("identity.linked", user: id).count == 1)
        let signedIn = try world.post("/v1/auth/oauth/google", ["id_token": .string(world.googleToken(sub: "g-guest", email: "guest@gmail.com", nonce: "n4")), "nonce": "n4"])
        #expect(signedIn.status == 200 && signedIn.data?["user"]?["id"]?.stringValue == id)

        // Google's vouched-for address another account has: the upgrade happens, without it.
        let second = try world.anonymous()
        let secondAccess = try #require(second["access_token"]?.stringValue)
        let upgraded = try world.post("/v1/me/identities/google", ["id_token": .string(world.googleToken(sub: "g-other", email: "owner@gmail.com", nonce: "n5")), "nonce": "n5"], bearer: secondAccess)
        #expect(upgraded.status == 200)
        let secondMe = try #require(try world.get("/v1/me", bearer: secondAccess).data)
        #expect(secondMe["is_anonymous"] == false && secondMe["email"] == .null)
    }

    @Test(arguments: TestDatabase.kinds)
    func anAnonymousUserEnrolsNoFactorButDeletesItsAccountWithoutARecentLogin(_ kind: TestDatabaseKind) throws {
        let world = try World(kind, settings: ["mfa": ["policy": "optional"], "passkeys": ["rp_id": "example.com", "origins": ["https://example.com"]]])
        defer { world.stop() }
        let session = try world.anonymous()
        let access = try #require(session["access_token"]?.stringValue)
        let totp = try world.post("/v1/me/mfa/totp", ["name": "Phone"], bearer: access)
        #expect(totp.status == 403 && totp.problemCode == "auth/anonymous-user")
        let passkey = try world.post("/v1/me/passkeys/options", [:], bearer: access)
        #expect(passkey.status == 403 && passkey.problemCode == "auth/anonymous-user")
        #expect(try world.server.gatehouse.database.query("SELECT id FROM mfa_totp_factors").isEmpty)

        world.clock.advance(seconds: 600)
        let deleted = try world.server.request("DELETE", "/v1/me", appKey: world.app.appKey, bearer: access)
        #expect(deleted.status == 204)
        #expect(try world.get("/v1/me", bearer: access).status == 401)
        // Another user still needs a recent login for it.
        let member = try world.server.signUp(world.app, email: "ada@example.com")
        world.clock.advance(seconds: 600)
        let refused = try world.server.request("DELETE", "/v1/me", appKey: world.app.appKey, bearer: try #require(member["access_token"]?.stringValue))
        #expect(refused.status == 403 && refused.problemCode == "auth/requires-recent-login")
    }

    // MARK: - Expiry

    @Test(arguments: TestDatabase.kinds)
    func theExpiryErasesOnlyAnonymousUsersUnseenForTheirOwnAppsTTL(_ kind: TestDatabaseKind) throws {
        let world = try World(kind, settings: ["anonymous_ttl_days": 1])
        defer { world.stop() }
        let other = try world.server.createApp(["name": "Patient", "allow_anonymous": true, "anonymous_ttl_days": 30, "rate_limits": ["auth_per_minute_per_ip": 1000]])
        let day: Int64 = 86_400
        let stale = try world.anonymous()
        let active = try world.anonymous()
        let upgraded = try world.anonymous()
        let elsewhere = try world.anonymous(app: other)
        let member = try world.server.signUp(world.app, email: "ada@example.com")
        func id(_ session: JSON) throws -> String { try #require(session["user"]?["id"]?.stringValue) }
        // The stale one kept a file: it goes with the account.
        let upload = try world.server.request(
            "POST", "/v1/files", appKey: world.app.appKey, bearer: try #require(stale["access_token"]?.stringValue),
            headers: [("Content-Type", "multipart/form-data; boundary=\(FilesAPITests.boundary)")],
            body: FilesAPITests.multipart(files: [("file", "notes.txt", Array("kept by a guest".utf8))]))
        #expect(upload.status == 201)
        let profile = try world.server.request(
            "PATCH", "/v1/me", appKey: world.app.appKey, bearer: try #require(stale["access_token"]?.stringValue),
            json: ["display_name": "Guest 7", "locale": "ja", "user_metadata": ["cart": ["sku-1"]]])
        #expect(profile.status == 200)
        #expect(try world.post("/v1/me/identities/password", ["password": "correct horse battery", "email": "up@example.com"], bearer: try #require(upgraded["access_token"]?.stringValue)).status == 200)

        world.clock.advance(seconds: day + day / 2)
        // Seen: a refresh moves its last sighting.
        let activeToken = try #require(active["refresh_token"]?.stringValue)
        let activeRefresh = try #require(try world.post("/v1/auth/refresh", ["refresh_token": .string(activeToken)]).data)
        world.clock.advance(seconds: day / 2 + 3600)
        let now = world.clock.nowMillis()
        #expect(try world.server.gatehouse.deletion.eraseUnseenAnonymousUsers(now: now) == 1)

        let erased = try world.admin("/v1/admin/users/\(try id(stale))")
        #expect(erased.status == 404)
        let staleRefresh = try world.post("/v1/auth/refresh", ["refresh_token": .string(try #require(stale["refresh_token"]?.stringValue))])
        #expect(staleRefresh.status == 401)
        let deletion = try #require(try world.events("user.deleted", user: try id(stale)).first)
        #expect(deletion["data"]?["by"] == "expiry" && deletion["data"]?["reason"] == "anonymous_expired")
        // As any deletion, user.deleted goes to the webhooks: the backend drops what it kept for the id.
        let deletedHooks = try world.webhooks().filter { $0.0 == "user.deleted" }
        #expect(deletedHooks.map { $0.1["id"]?.stringValue } == [try id(stale)])
        #expect(try world.server.gatehouse.database.query("SELECT id FROM files WHERE user_id = \(try id(stale))").isEmpty)
        // What the guest kept in its profile goes with it (the tombstone keeps none of it).
        let tombstone = try #require(try world.server.gatehouse.database.query(
            "SELECT display_name, locale, user_metadata, app_metadata FROM users WHERE id = \(try id(stale))").first)
        #expect(try tombstone.optionalString("display_name") == nil && tombstone.optionalString("locale") == nil)
        #expect(try tombstone.string("user_metadata") == "{}" && tombstone.string("app_metadata") == "{}")
        for kept in [active, upgraded, member] {
            #expect(try world.admin("/v1/admin/users/\(try id(kept))").status == 200)
        }
        #expect(try world.post("/v1/auth/refresh", ["refresh_token": .string(try #require(activeRefresh["refresh_token"]?.stringValue))]).status == 200)
        // The other app's TTL is its own: its guest, unseen as long, stays…
        #expect(try world.admin("/v1/admin/users/\(try id(elsewhere))", app: other).status == 200)
        // …until its 30 days have passed; by then the first app's other guest, unseen for days, goes too.
        world.clock.advance(seconds: 29 * day)
        #expect(try world.server.gatehouse.deletion.eraseUnseenAnonymousUsers(now: world.clock.nowMillis()) == 2)
        #expect(try world.admin("/v1/admin/users/\(try id(elsewhere))", app: other).status == 404)
        #expect(try world.admin("/v1/admin/users/\(try id(active))").status == 404)
        #expect(try world.admin("/v1/admin/users/\(try id(upgraded))").status == 200)
        #expect(try world.admin("/v1/admin/users/\(try id(member))").status == 200)
        #expect(try world.server.gatehouse.deletion.eraseUnseenAnonymousUsers(now: world.clock.nowMillis()) == 0)
    }

    @Test(arguments: TestDatabase.kinds)
    func theExpiryServesEveryAppInTurnWithinItsLimits(_ kind: TestDatabaseKind) throws {
        let world = try World(kind, settings: ["anonymous_ttl_days": 1])
        defer { world.stop() }
        let other = try world.server.createApp(["name": "Second", "allow_anonymous": true, "anonymous_ttl_days": 1, "rate_limits": ["auth_per_minute_per_ip": 1000]])
        for _ in 0..<4 { _ = try world.anonymous() }
        for _ in 0..<4 { _ = try world.anonymous(app: other) }
        world.clock.advance(seconds: 2 * 86_400)
        let deletion = world.server.gatehouse.deletion
        let now = world.clock.nowMillis()
        func left(_ app: TestServer.CreatedApp) throws -> Int {
            try world.server.gatehouse.database.query("SELECT id FROM users WHERE app_id = \(app.id) AND deleted_at IS NULL").count
        }
        // At most two of one app a round, three in all: each app gets its share.
        #expect(try deletion.eraseUnseenAnonymousUsers(now: now, perApp: 2, limit: 3) == 3)
        #expect(try [left(world.app), left(other)].sorted() == [2, 3])
        #expect(try deletion.eraseUnseenAnonymousUsers(now: now, perApp: 2, limit: 3) == 3)
        #expect(try deletion.eraseUnseenAnonymousUsers(now: now, perApp: 2, limit: 3) == 2)
        #expect(try [left(world.app), left(other)] == [0, 0])
    }
}
