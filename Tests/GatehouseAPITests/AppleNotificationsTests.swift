import Foundation
import GatehouseCore
import GatehouseCrypto
import GatehouseSQL
import GatehouseTesting
import Testing

/// Gatehouse with the fake Apple (which signs and sends the notifications), an SMTP sink and a
/// webhook sink over real HTTP, one clock, and an outbox stepped by hand.
final class AppleNotificationsWorld {
    static let bundleID = "com.example.photos"
    static let servicesID = "com.example.photos.web"
    static let hookedEvents = [
        "identity.apple_consent_revoked", "identity.apple_account_deleted", "user.email_relay_changed", "user.updated", "user.deleted", "session.revoked",
        "identity.linked",
    ]

    let clock = ManualClock()
    let apple: FakeApple
    let smtp: SMTPSink
    let hooks: WebhookSink
    let server: TestServer
    let app: TestServer.CreatedApp

    init(_ kind: TestDatabaseKind) throws {
        apple = try FakeApple(clock: clock)
        smtp = try SMTPSink()
        hooks = try WebhookSink()
        let (appleURL, smtpURL) = (apple.baseURL, smtp.url)
        server = try TestServer(kind, clock: clock) {
            $0.appleURL = appleURL
            $0.smtpURL = smtpURL
            $0.allowPrivateOutbound = true
        }
        server.gatehouse.stopBackgroundWork()
        let credentials = try apple.makeCredentials()
        app = try server.createApp([
            "name": "Photos", "rate_limits": ["auth_per_minute_per_ip": 1000],
            "apple": [
                "client_ids": [.string(Self.bundleID)], "services_id": .string(Self.servicesID), "team_id": .string(credentials.teamID),
                "key_id": .string(credentials.keyID), "private_key": .string(credentials.privateKeyPEM),
            ],
            "webhooks": [["url": .string(hooks.url()), "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "events": .array(Self.hookedEvents.map(JSON.string))]],
        ])
    }

    func stop() {
        server.stop()
        apple.stop()
        smtp.stop()
        hooks.stop()
    }

    static func hash(_ nonce: String) -> String { Digest.hex(Digest.sha256(Array(nonce.utf8))) }

    /// Signs in with Apple natively (a fresh nonce each time), with an authorization code so that
    /// Apple's refresh token is kept. The session response's `data`.
    func appleSignIn(sub: String = "001.apple.user", email: String? = "pat@example.com", expectStatus: Int? = nil) throws -> JSON {
        let nonce = "n-" + SecureRandom.token(byteCount: 8)
        let code = apple.issueCode(for: FakeAppleUser(sub: sub, email: email, nonce: Self.hash(nonce)), clientID: Self.bundleID)
        let token = apple.mintIdentityToken(sub: sub, aud: Self.bundleID, email: email, nonce: Self.hash(nonce))
        let response = try server.request(
            "POST", "/v1/auth/oauth/apple", appKey: app.appKey,
            json: ["identity_token": .string(token), "nonce": .string(nonce), "authorization_code": .string(code)])
        if let expectStatus { #expect(response.status == expectStatus, "\(response.text)") }
        return try #require(response.data, "Apple sign-in answered \(response.status): \(response.text)")
    }

    /// The fake Apple sends a notification of `type` for `sub` to this app's endpoint.
    @discardableResult
    func notify(_ type: String, sub: String = "001.apple.user", aud: String = AppleNotificationsWorld.bundleID, email: String? = nil, eventTime: Int64? = nil) throws -> TestResponse {
        try apple.sendNotification(apple.mintNotification(type: type, sub: sub, aud: aud, email: email, eventTime: eventTime), to: server.baseURL, appID: app.id)
    }

    func me(_ session: JSON) throws -> TestResponse {
        try server.request("GET", "/v1/me", appKey: app.appKey, bearer: session["access_token"]?.stringValue)
    }

    func events(_ type: String) throws -> [JSON] {
        try server.request("GET", "/v1/admin/events?type=\(type)", bearer: app.secretKey).json?["data"]?.arrayValue ?? []
    }

    func count(_ sql: SQL) throws -> Int {
        try server.gatehouse.database.query(sql).count
    }

    /// Delivers everything due; the webhook types delivered so far, in order.
    func deliverWebhooks() throws -> [String] {
        while try server.gatehouse.outboxWorker.runOnce() > 0 {}
        return hooks.deliveries.compactMap { $0.json?["type"]?.stringValue }
    }
}

/// Apple's server-to-server notifications (`POST /v1/apps/{app_id}/apple/notifications`) through
/// the real server, sent by the fake Apple as Apple sends them. Both databases.
@Suite("Apple server-to-server notifications")
struct AppleNotificationsTests {
    @Test(arguments: TestDatabase.kinds)
    func consentRevokedUnlinksAppleEndsEverySessionKeepsTheAccountAndTheSameAppleAccountLinksItAgain(_ kind: TestDatabaseKind) throws {
        let world = try AppleNotificationsWorld(kind)
        defer { world.stop() }
        let first = try world.appleSignIn(expectStatus: 201)
        let second = try world.appleSignIn(expectStatus: 200)
        let userID = try #require(first["user"]?["id"]?.stringValue)
        #expect(try world.count("SELECT 1 AS found FROM provider_tokens") == 1)
        let notification = world.apple.mintNotification(type: "consent-revoked", sub: "001.apple.user", aud: AppleNotificationsWorld.bundleID)

        let answer = try world.apple.sendNotification(notification, to: world.server.baseURL, appID: world.app.id)
        #expect(answer.status == 200 && answer.data?["outcome"] == "applied", "\(answer.text)")
        for session in [first, second] { #expect(try world.me(session).problemCode == "auth/session-revoked") }
        #expect(try world.server.request("POST", "/v1/auth/refresh", appKey: world.app.appKey, json: ["refresh_token": second["refresh_token"]!]).status == 401)
        let kept = try world.server.request("GET", "/v1/admin/users/\(userID)", bearer: world.app.secretKey)
        #expect(kept.status == 200 && kept.data?["identities"] == [], "the account stays, with no way in: \(kept.text)")
        #expect(try world.count("SELECT 1 AS found FROM provider_tokens") == 0, "Apple revoked them already: dropped")
        #expect(world.apple.revokeCalls.isEmpty)
        let event = try #require(try world.events("identity.apple_consent_revoked").first)
        #expect(event["user_id"]?.stringValue == userID && event["data"]?["only_method"] == true && event["data"]?["sessions_ended"] == 2)
        #expect(try world.events("session.revoked").map { $0["data"]?["reason"] } == ["apple_consent_revoked", "apple_consent_revoked"])
        #expect(try world.deliverWebhooks().sorted() == ["identity.apple_consent_revoked", "session.revoked", "session.revoked"])

        // The same Apple account signs in again: the same account, linked anew.
        let again = try world.appleSignIn(expectStatus: 200)
        #expect(again["user"]?["id"]?.stringValue == userID && again["is_new_user"] == false && again["user"]?["identities"] == ["apple"])
        let relinked = try #require(try world.events("identity.linked").first)
        #expect(relinked["user_id"]?.stringValue == userID && relinked["data"]?["relinked"] == true)

        // Apple retries the notification it already delivered: nothing changes.
        let repeated = try world.apple.sendNotification(notification, to: world.server.baseURL, appID: world.app.id)
        #expect(repeated.status == 200 && repeated.data?["outcome"] == "repeat")
        #expect(try world.me(again).status == 200)
        #expect(try world.events("identity.apple_consent_revoked").count == 1)
        #expect(world.apple.errors.isEmpty && world.hooks.errors.isEmpty)
    }

    @Test(arguments: TestDatabase.kinds)
    func consentRevokedOfAnAccountWithAPasswordEndsOnlyTheSessionsAppleStarted(_ kind: TestDatabaseKind) throws {
        let world = try AppleNotificationsWorld(kind)
        defer { world.stop() }
        let passwordSession = try world.server.signUp(world.app, email: "ada@example.com")
        let userID = try #require(passwordSession["user"]?["id"]?.stringValue)
        let nonce = "link-nonce"
        let code = world.apple.issueCode(for: FakeAppleUser(sub: "001.apple.user", email: "ada@example.com", nonce: AppleNotificationsWorld.hash(nonce)), clientID: AppleNotificationsWorld.bundleID)
        let linked = try world.server.request(
            "POST", "/v1/me/identities/apple", appKey: world.app.appKey, bearer: passwordSession["access_token"]?.stringValue,
            json: [
                "identity_token": .string(world.apple.mintIdentityToken(sub: "001.apple.user", aud: AppleNotificationsWorld.bundleID, email: "ada@example.com", nonce: AppleNotificationsWorld.hash(nonce))),
                "nonce": .string(nonce), "authorization_code": .string(code),
            ])
        #expect(linked.status == 200, "\(linked.text)")
        let appleSession = try world.appleSignIn(email: "ada@example.com", expectStatus: 200)
        #expect(appleSession["user"]?["id"]?.stringValue == userID)

        #expect(try world.notify("consent-revoked").data?["outcome"] == "applied")
        #expect(try world.me(appleSession).problemCode == "auth/session-revoked")
        let me = try world.me(passwordSession)
        #expect(me.status == 200 && me.data?["identities"] == ["password"], "\(me.text)")
        #expect(try world.count("SELECT 1 AS found FROM provider_tokens") == 0)
        let event = try #require(try world.events("identity.apple_consent_revoked").first)
        #expect(event["data"]?["only_method"] == false && event["data"]?["sessions_ended"] == 1)

        // Apple again: the same account, Apple linked beside the password.
        let again = try world.appleSignIn(email: "ada@example.com", expectStatus: 200)
        #expect(again["user"]?["id"]?.stringValue == userID && again["user"]?["identities"]?.arrayValue?.compactMap(\.stringValue).sorted() == ["apple", "password"])
    }

    @Test(arguments: TestDatabase.kinds)
    func accountDeleteErasesAnAccountAppleWasTheOnlyWayInto(_ kind: TestDatabaseKind) throws {
        let world = try AppleNotificationsWorld(kind)
        defer { world.stop() }
        let session = try world.appleSignIn(expectStatus: 201)
        let userID = try #require(session["user"]?["id"]?.stringValue)

        #expect(try world.notify("account-delete").data?["outcome"] == "applied")
        #expect(try world.me(session).problemCode == "auth/session-revoked")
        #expect(try world.server.request("GET", "/v1/admin/users/\(userID)", bearer: world.app.secretKey).status == 404)
        let tombstone = try #require(try world.server.gatehouse.database.query("SELECT email, deleted_at FROM users WHERE id = \(userID)").first)
        #expect(try tombstone.optionalString("email") == nil && tombstone.optionalInt64("deleted_at") != nil)
        #expect(try world.count("SELECT 1 AS found FROM identities") == 0 && world.count("SELECT 1 AS found FROM provider_tokens") == 0)
        #expect(try world.count("SELECT 1 AS found FROM outbox WHERE kind = 'apple_revocation'") == 0, "Apple revoked its tokens with the account")
        let deleted = try #require(try world.events("user.deleted").first)
        #expect(deleted["data"]?["by"] == "apple" && deleted["data"]?["apple_revocations"] == ["status": "revoked_by_apple", "count": 1])
        let event = try #require(try world.events("identity.apple_account_deleted").first)
        #expect(event["data"]?["only_method"] == true && event["data"]?["erased"] == true)
        let delivered = try world.deliverWebhooks()
        #expect(delivered.sorted() == ["identity.apple_account_deleted", "session.revoked", "user.deleted"])
        #expect(world.hooks.deliveries.first { $0.json?["type"] == "user.deleted" }?.json?["data"]?["user"]?["id"]?.stringValue == userID)

        // Should the same Apple id ever sign in again, it is a new account.
        let again = try world.appleSignIn(expectStatus: 201)
        #expect(again["user"]?["id"]?.stringValue != userID)
    }

    @Test(arguments: TestDatabase.kinds)
    func accountDeleteKeepsAnAccountWithAnotherWayIn(_ kind: TestDatabaseKind) throws {
        let world = try AppleNotificationsWorld(kind)
        defer { world.stop() }
        let passwordSession = try world.server.signUp(world.app, email: "ada@example.com")
        let userID = try #require(passwordSession["user"]?["id"]?.stringValue)
        try world.server.gatehouse.store.app(AppID(unchecked: world.app.id)).identities.addIdentity(
            UserID(unchecked: userID), Identity(provider: .apple, subject: "001.apple.user", email: nil, createdAt: world.clock.nowMillis()))
        let appleSession = try world.appleSignIn(email: nil, expectStatus: 200)

        #expect(try world.notify("account-delete").data?["outcome"] == "applied")
        #expect(try world.me(appleSession).problemCode == "auth/session-revoked")
        #expect(try world.me(passwordSession).data?["identities"] == ["password"])
        let event = try #require(try world.events("identity.apple_account_deleted").first)
        #expect(event["data"]?["only_method"] == false && event["data"]?["erased"] == false && event["data"]?["sessions_ended"] == 1)
        #expect(try world.events("user.deleted").isEmpty)
        #expect(try world.events("session.revoked").first?["data"]?["reason"] == "apple_account_deleted")
    }

    @Test(arguments: TestDatabase.kinds)
    func mailToARelayAddressWithForwardingOffIsNotSentUntilAppleTurnsItOnAgain(_ kind: TestDatabaseKind) throws {
        let world = try AppleNotificationsWorld(kind)
        defer { world.stop() }
        let relay = "x1y2z3@privaterelay.appleid.com"
        let session = try world.appleSignIn(email: relay, expectStatus: 201)
        let userID = try #require(session["user"]?["id"]?.stringValue)
        let bearer = session["access_token"]?.stringValue
        let disabledAt = world.clock.nowMillis()

        #expect(try world.notify("email-disabled", email: relay, eventTime: disabledAt).data?["outcome"] == "applied")
        let changed = try #require(try world.events("user.email_relay_changed").first)
        #expect(changed["user_id"]?.stringValue == userID && changed["data"]?["forwarding"] == "off" && changed["data"]?["email"]?.stringValue == relay)
        #expect(try world.events("user.updated").first?["data"]?["fields"] == ["email_relay_forwarding"])
        #expect(try world.deliverWebhooks().sorted() == ["user.email_relay_changed", "user.updated"])

        // A code mailed now dead-letters, saying why; the sink receives nothing.
        #expect(try world.server.request("POST", "/v1/auth/reauthenticate/send-code", appKey: world.app.appKey, bearer: bearer).status == 202)
        _ = try world.deliverWebhooks()
        #expect(try world.smtp.messages().isEmpty)
        let dead = try #require(try world.server.gatehouse.database.query("SELECT last_error, dead_at FROM outbox WHERE kind = 'mail'").first)
        #expect(try dead.optionalInt64("dead_at") != nil && dead.optionalString("last_error") == AppleRelayForwarding.turnedOffReason)
        #expect(try world.events("outbox.dead_lettered").first?["data"]?["reason"]?.stringValue == AppleRelayForwarding.turnedOffReason)
        // Another user's ordinary address is mailed as ever.
        let other = try world.server.signUp(world.app, email: "ada@example.com")
        _ = try world.deliverWebhooks()
        let before = try world.smtp.messages().count  // the sign-up's own mail, if any
        #expect(try world.smtp.messages().allSatisfy { $0.recipients == ["ada@example.com"] })
        #expect(try world.server.request("POST", "/v1/auth/reauthenticate/send-code", appKey: world.app.appKey, bearer: other["access_token"]?.stringValue).status == 202)
        _ = try world.deliverWebhooks()
        #expect(try world.smtp.messages().dropFirst(before).map(\.recipients) == [["ada@example.com"]])

        // Forwarding on again: new mail goes.
        world.clock.advance(seconds: 61)
        #expect(try world.notify("email-enabled", email: relay, eventTime: disabledAt + 30_000).data?["outcome"] == "applied")
        #expect(try world.events("user.email_relay_changed").first?["data"]?["forwarding"] == "on")
        #expect(try world.server.request("POST", "/v1/auth/reauthenticate/send-code", appKey: world.app.appKey, bearer: bearer).status == 202)
        _ = try world.deliverWebhooks()
        #expect(try world.smtp.messages().dropFirst(before).map(\.recipients) == [["ada@example.com"], [relay]])

        // A disabling older than the enabling (Apple delivers out of order) changes nothing.
        #expect(try world.notify("email-disabled", email: relay, eventTime: disabledAt + 10_000).data?["outcome"] == "applied")
        #expect(try world.events("user.email_relay_changed").count == 2)
        #expect(try world.count("SELECT 1 AS found FROM apple_relay_forwarding WHERE forwarding = 1") == 1)
    }

    @Test(arguments: TestDatabase.kinds)
    func aRepeatedNotificationChangesNothing(_ kind: TestDatabaseKind) throws {
        let world = try AppleNotificationsWorld(kind)
        defer { world.stop() }
        let relay = "r1@privaterelay.appleid.com"
        _ = try world.appleSignIn(email: relay, expectStatus: 201)
        let time = world.clock.nowMillis()
        let disabled = world.apple.mintNotification(type: "email-disabled", sub: "001.apple.user", aud: AppleNotificationsWorld.bundleID, email: relay, eventTime: time)
        #expect(try world.apple.sendNotification(disabled, to: world.server.baseURL, appID: world.app.id).data?["outcome"] == "applied")
        #expect(try world.notify("email-enabled", email: relay, eventTime: time + 1).data?["outcome"] == "applied")
        // The first one again (Apple retries what it thinks failed), and a new JWT of the same event.
        #expect(try world.apple.sendNotification(disabled, to: world.server.baseURL, appID: world.app.id).data?["outcome"] == "repeat")
        #expect(try world.notify("email-disabled", email: relay, eventTime: time).data?["outcome"] == "repeat")
        #expect(try world.count("SELECT 1 AS found FROM apple_relay_forwarding WHERE forwarding = 1") == 1, "still on")
        #expect(try world.events("user.email_relay_changed").count == 2)
        #expect(try world.count("SELECT 1 AS found FROM apple_notifications") == 2)

        // Remembered 30 days: the maintenance job drops them after.
        let policyRetention = world.server.gatehouse.maintenance.policy.appleNotificationRetentionMillis
        #expect(policyRetention == 30 * 86_400_000)
        _ = try world.server.gatehouse.maintenance.run(now: world.clock.nowMillis() + policyRetention - 60_000)
        #expect(try world.count("SELECT 1 AS found FROM apple_notifications") == 2)
        _ = try world.server.gatehouse.maintenance.run(now: world.clock.nowMillis() + policyRetention + 1)
        #expect(try world.count("SELECT 1 AS found FROM apple_notifications") == 0)
    }

    @Test(arguments: TestDatabase.kinds)
    func aNotificationForAnotherAppsClientIDIsRefusedAndChangesNothing(_ kind: TestDatabaseKind) throws {
        let world = try AppleNotificationsWorld(kind)
        defer { world.stop() }
        let other = try world.server.createApp(["name": "Other", "apple": ["client_ids": ["com.other.app"]]])
        let session = try world.appleSignIn(expectStatus: 201)
        let userID = try #require(session["user"]?["id"]?.stringValue)

        let foreign = world.apple.mintNotification(type: "account-delete", sub: "001.apple.user", aud: "com.other.app")
        let refused = try world.apple.sendNotification(foreign, to: world.server.baseURL, appID: world.app.id)
        #expect(refused.status == 400 && refused.problemCode == "auth/invalid-credential", "\(refused.text)")
        #expect(refused.header("Content-Type")?.hasPrefix("application/problem+json") == true)
        #expect(try world.me(session).status == 200)
        #expect(try world.server.request("GET", "/v1/admin/users/\(userID)", bearer: world.app.secretKey).data?["identities"] == ["apple"])
        #expect(try world.events("identity.apple_account_deleted").isEmpty)
        #expect(try world.count("SELECT 1 AS found FROM apple_notifications") == 0)
        // At the other app's endpoint it verifies, but that app has no such user.
        let there = try world.apple.sendNotification(foreign, to: world.server.baseURL, appID: other.id)
        #expect(there.status == 200 && there.data?["outcome"] == "unknown_subject")
        #expect(try world.me(session).status == 200)
    }

    @Test(arguments: TestDatabase.kinds)
    func badNotificationsAreRefusedAndChangeNothing(_ kind: TestDatabaseKind) throws {
        let world = try AppleNotificationsWorld(kind)
        defer { world.stop() }
        let session = try world.appleSignIn(expectStatus: 201)
        let now = world.clock.nowSeconds
        let aud = AppleNotificationsWorld.bundleID
        let bad: [(String, String)] = [
            ("bad signature", world.apple.mintNotification(type: "account-delete", sub: "001.apple.user", aud: aud, signature: .foreignKey)),
            ("alg none", world.apple.mintNotification(type: "account-delete", sub: "001.apple.user", aud: aud, signature: .none)),
            ("expired", world.apple.mintNotification(type: "account-delete", sub: "001.apple.user", aud: aud, issuedAt: now - 90_000, expiresAt: now - 3_600)),
            ("wrong issuer", world.apple.mintNotification(type: "account-delete", sub: "001.apple.user", aud: aud, issuer: "https://evil.example.com")),
            ("events an object", world.apple.mintNotification(
                type: "x", sub: "x", aud: aud, events: ["type": "account-delete", "sub": "001.apple.user", "event_time": .int(world.clock.nowMillis())])),
            ("events without sub", world.apple.mintNotification(type: "x", sub: "x", aud: aud, events: .string(#"{"type": "account-delete", "event_time": 1}"#))),
            ("not a JWT", "not-a-jwt"),
        ]
        for (what, payload) in bad {
            let answer = try world.apple.sendNotification(payload, to: world.server.baseURL, appID: world.app.id)
            #expect(answer.status == 400 && answer.problemCode == "auth/invalid-credential", "\(what): \(answer.text)")
        }
        for body: JSON in [[:], ["payload": 7], ["payload": ""]] {
            let answer = try world.server.request("POST", "/v1/apps/\(world.app.id)/apple/notifications", json: body)
            #expect(answer.status == 400 && answer.problemCode == "request/validation-failed", "\(body): \(answer.text)")
        }
        #expect(try world.me(session).status == 200)
        #expect(try world.count("SELECT 1 AS found FROM apple_notifications") == 0)
        #expect(try world.events("identity.apple_account_deleted").isEmpty && world.events("user.deleted").isEmpty)
        // An app that does not exist, or is not an app id at all.
        let good = world.apple.mintNotification(type: "account-delete", sub: "001.apple.user", aud: aud)
        for appID in ["app_doesnotexist", "%20"] {
            #expect(try world.apple.sendNotification(good, to: world.server.baseURL, appID: appID).status == 404)
        }
        #expect(try world.me(session).status == 200)
    }

    @Test(arguments: TestDatabase.kinds)
    func anUnknownSubjectOrTypeIsAnswered200AndChangesNothing(_ kind: TestDatabaseKind) throws {
        let world = try AppleNotificationsWorld(kind)
        defer { world.stop() }
        let session = try world.appleSignIn(expectStatus: 201)
        let unknown = try world.notify("account-delete", sub: "009.nobody.here")
        #expect(unknown.status == 200 && unknown.data?["outcome"] == "unknown_subject")
        let newType = try world.notify("something-apple-adds-later")
        #expect(newType.status == 200 && newType.data?["outcome"] == "ignored")
        // The answers are as the OpenAPI document says.
        let template = "/v1/apps/{app_id}/apple/notifications"
        let exchanges = [unknown, newType].map { OpenAPIConformance.Exchange("POST", template, requestBody: nil, requestContentType: nil, $0) }
        #expect(try OpenAPIConformance.problems(document: DocumentationTests.root.appendingPathComponent("docs/openapi.json"), exchanges) == [])
        #expect(try world.me(session).status == 200)
        #expect(try world.count("SELECT 1 AS found FROM apple_notifications") == 0)
        #expect(try world.deliverWebhooks().isEmpty)
    }

    @Test(arguments: TestDatabase.kinds)
    func aNotificationSignedByANewKeyFetchesApplesKeysOnce(_ kind: TestDatabaseKind) throws {
        let world = try AppleNotificationsWorld(kind)
        defer { world.stop() }
        _ = try world.appleSignIn(expectStatus: 201)
        let fetched = world.apple.keysFetchCount
        #expect(try world.notify("email-enabled", email: "r@privaterelay.appleid.com").status == 200)
        #expect(world.apple.keysFetchCount == fetched, "a cached kid: no outbound call")
        try world.apple.rotateKeys()
        world.clock.advance(seconds: 31)  // past the unknown-kid refetch interval since the sign-in's fetch
        #expect(try world.notify("email-disabled", email: "r@privaterelay.appleid.com").status == 200)
        #expect(world.apple.keysFetchCount == fetched + 1, "one fetch for the new kid")
        let madeUp = world.apple.mintNotification(type: "consent-revoked", sub: "001.apple.user", aud: AppleNotificationsWorld.bundleID, kid: "apple-key-made-up")
        #expect(try world.apple.sendNotification(madeUp, to: world.server.baseURL, appID: world.app.id).status == 400)
        #expect(world.apple.keysFetchCount == fetched + 1, "no second fetch within the refetch interval")
    }
}
