import Foundation
import GatehouseCore
import GatehouseOutbound
import GatehouseProviders
import GatehouseTesting
import Testing

/// Webhooks end to end, on both databases: settings, queuing in the change's transaction, and
/// delivery to a real receiver, the signature checked by Python's standard library.
@Suite("Webhooks")
struct WebhookTests {
    static let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    static let otherSecret = "whsec_" + Data(repeating: 0x5A, count: 32).base64EncodedString()

    /// The test vector the Standard Webhooks specification publishes.
    @Test func theSignatureIsStandardWebhooks() throws {
        let key = try #require(AppSettings.Webhook.key(ofSecret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"))
        let signature = WebhookSignature.sign(key: key, id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1614265330, body: Array(#"{"test": 2432232314}"#.utf8))
        #expect(signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
    }

    /// A server that may reach the local receiver, and a worker stepped by hand.
    func world(_ kind: TestDatabaseKind, clock: ManualClock) throws -> (TestServer, OutboxWorker) {
        let server = try TestServer(kind, clock: clock) { $0.allowPrivateOutbound = true }
        server.gatehouse.stopBackgroundWork()
        return (server, server.gatehouse.outboxWorker)
    }

    func hook(_ url: String, _ events: [String], secret: String = WebhookTests.secret) -> JSON {
        ["url": .string(url), "secret": .string(secret), "events": .array(events.map(JSON.string))]
    }

    func webhookItems(_ server: TestServer) throws -> Int {
        try server.gatehouse.database.query("SELECT id FROM outbox WHERE kind = 'webhook'").count
    }

    @Test(arguments: TestDatabase.kinds)
    func aSignUpIsDeliveredAsUserCreatedSignedAndShapedAsTheContractSays(_ kind: TestDatabaseKind) throws {
        let sink = try WebhookSink()
        defer { sink.stop() }
        let clock = ManualClock()
        let (server, worker) = try world(kind, clock: clock)
        defer { server.stop() }
        let app = try server.createApp(["name": "Hooks", "webhooks": [hook(sink.url(), ["user.created"])]])
        let session = try server.signUp(app, email: "ada@example.com")
        let userID = try #require(session["user"]?["id"]?.stringValue)

        let stored = try server.gatehouse.database.query("SELECT payload, sealed FROM outbox WHERE kind = 'webhook'")
        #expect(stored.count == 1)
        #expect(try !stored[0].string("payload").contains("ada@example.com"), "personal data is sealed in the table")
        try worker.runOnce()
        let deliveries = sink.deliveries
        #expect(deliveries.count == 1)
        let delivery = try #require(deliveries.first)
        #expect(delivery.header("Content-Type") == "application/json")
        let body = try #require(delivery.json)
        let event = try #require(server.gatehouse.store.app(AppID(unchecked: app.id)).auditLog.events(EventQuery(type: .userSignedUp)).first)
        #expect(body["id"]?.stringValue == event.id.rawValue)
        #expect(delivery.header("webhook-id") == event.id.rawValue)
        #expect(body["type"] == "user.created")
        #expect(body["app_id"]?.stringValue == app.id)
        #expect(body["created_at"]?.stringValue == rfc3339(millis: event.createdAt))
        let user = try #require(body["data"]?["user"])
        #expect(user == session["user"], "the user object of the API")
        #expect(user["id"]?.stringValue == userID)
        #expect(user["identities"] == ["password"])
        #expect(body.objectValue.map { Set($0.keys) } == ["id", "type", "app_id", "created_at", "data"])
        let timestamp = try #require(delivery.header("webhook-timestamp"))
        #expect(timestamp == String(clock.nowMillis() / 1000))
        let signature = try #require(delivery.header("webhook-signature"))
        #expect(signature.hasPrefix("v1,"))
        #expect(try IndependentWebhookVerifier.verify(id: event.id.rawValue, timestamp: timestamp, body: delivery.body, secret: Self.secret, signature: signature))
        #expect(try !IndependentWebhookVerifier.verify(id: event.id.rawValue, timestamp: timestamp, body: delivery.body, secret: Self.otherSecret, signature: signature))
        #expect(try server.gatehouse.database.query("SELECT payload FROM outbox WHERE kind = 'webhook'")[0].string("payload") == "", "erased once delivered")
        #expect(sink.errors.isEmpty)
    }

    /// Each webhook gets the types it subscribed to; a profile change is user.updated, an
    /// unchanged profile nothing.
    @Test(arguments: TestDatabase.kinds)
    func onlySubscribedTypesAreSentAndAProfileChangeIsUserUpdated(_ kind: TestDatabaseKind) throws {
        let sink = try WebhookSink()
        defer { sink.stop() }
        let clock = ManualClock()
        let (server, worker) = try world(kind, clock: clock)
        defer { server.stop() }
        let app = try server.createApp([
            "name": "Hooks", "webhooks": [hook(sink.url("created"), ["user.created"]), hook(sink.url("updated"), ["user.updated", "user.banned"])],
        ])
        let session = try server.signUp(app)
        let token = try #require(session["access_token"]?.stringValue)
        try worker.runOnce()
        #expect(sink.deliveries.map(\.path) == ["/hooks/created"])

        let patched = try server.request("PATCH", "/v1/me", appKey: app.appKey, bearer: token, json: ["first_name": "Ada", "last_name": "Lovelace"])
        #expect(patched.status == 200)
        #expect(try server.request("PATCH", "/v1/me", appKey: app.appKey, bearer: token, json: ["first_name": "Ada"]).status == 200)
        #expect(try webhookItems(server) == 2, "an unchanged profile queues nothing")
        try worker.runOnce()
        let updated = try #require(sink.deliveries.last)
        #expect(sink.deliveries.map(\.path) == ["/hooks/created", "/hooks/updated"])
        #expect(updated.json?["type"] == "user.updated")
        #expect(updated.json?["data"]?["user"] == patched.data)
        let events = try server.gatehouse.store.app(AppID(unchecked: app.id)).auditLog.events(EventQuery(type: .userUpdated))
        #expect(events.count == 1)
        #expect(events.first?.data["fields"] == ["first_name", "last_name"])
    }

    /// A receiver that fails is tried again with the same webhook-id, signed anew each time.
    @Test(arguments: TestDatabase.kinds)
    func aFailingReceiverGetsTheSameWebhookIDUntilItAnswers(_ kind: TestDatabaseKind) throws {
        let sink = try WebhookSink()
        defer { sink.stop() }
        let clock = ManualClock()
        let (server, worker) = try world(kind, clock: clock)
        defer { server.stop() }
        let app = try server.createApp(["name": "Hooks", "webhooks": [hook(sink.url(), ["user.created"])]])
        sink.answerNext(2, status: 500)
        _ = try server.signUp(app)
        try worker.runOnce()
        #expect(sink.deliveries.count == 1)
        try worker.runOnce()
        #expect(sink.deliveries.count == 1, "not before its back-off")
        clock.advance(seconds: 5)
        try worker.runOnce()
        clock.advance(seconds: 10)
        try worker.runOnce()
        let deliveries = sink.deliveries
        #expect(deliveries.map(\.status) == [500, 500, 204])
        #expect(Set(deliveries.compactMap { $0.header("webhook-id") }).count == 1)
        #expect(Set(deliveries.compactMap { $0.header("webhook-timestamp") }).count == 3, "each attempt its own timestamp")
        for delivery in deliveries {
            #expect(delivery.body == deliveries[0].body)
            #expect(try IndependentWebhookVerifier.verify(
                id: delivery.header("webhook-id") ?? "", timestamp: delivery.header("webhook-timestamp") ?? "", body: delivery.body,
                secret: Self.secret, signature: delivery.header("webhook-signature") ?? ""))
        }
        let row = try server.gatehouse.database.query("SELECT attempts, delivered_at FROM outbox WHERE kind = 'webhook'")[0]
        #expect(try row.int64("attempts") == 3)
        #expect(try row.optionalInt64("delivered_at") != nil)
    }

    /// A secret change through `PATCH /v1/admin/app`: for 24 hours every delivery carries two
    /// `v1,` signatures, the new secret's and the replaced one's, so a retry already in flight and a
    /// receiver that has not switched yet both verify; after that, the new secret's only.
    @Test(arguments: TestDatabase.kinds)
    func aChangedSecretSignsWithBothSecretsFor24Hours(_ kind: TestDatabaseKind) throws {
        let sink = try WebhookSink()
        defer { sink.stop() }
        let clock = ManualClock()
        let (server, worker) = try world(kind, clock: clock)
        defer { server.stop() }
        let app = try server.createApp(["name": "Hooks", "webhooks": [hook(sink.url(), ["user.created"])]])
        func verifies(_ delivery: WebhookSink.Delivery, _ secret: String) throws -> Bool {
            try IndependentWebhookVerifier.verify(
                id: delivery.header("webhook-id") ?? "", timestamp: delivery.header("webhook-timestamp") ?? "", body: delivery.body,
                secret: secret, signature: delivery.header("webhook-signature") ?? "")
        }
        // Queued (and failed once) under the old secret; the secret changes before the retry.
        sink.answerNext(1, status: 500)
        _ = try server.signUp(app, email: "first@example.com")
        try worker.runOnce()
        #expect(sink.deliveries.count == 1)
        #expect(sink.deliveries[0].header("webhook-signature")?.split(separator: " ").count == 1, "one secret, one signature")
        let changed = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["webhooks": [hook(sink.url(), ["user.created"], secret: Self.otherSecret)]])
        #expect(changed.status == 200)
        #expect(changed.data?["webhooks"] == [["url": .string(sink.url()), "secret": ["set": true], "events": ["user.created"]]], "the replaced secret is never shown")
        clock.advance(seconds: 10)
        try worker.runOnce()
        let retried = try #require(sink.deliveries.last)
        #expect(retried.status == 204)
        let signatures = (retried.header("webhook-signature") ?? "").split(separator: " ")
        #expect(signatures.count == 2 && signatures.allSatisfy { $0.hasPrefix("v1,") }, "\(signatures)")
        #expect(try verifies(retried, Self.otherSecret), "the new secret verifies")
        #expect(try verifies(retried, Self.secret), "the replaced secret verifies")
        // Saving the settings again unchanged ({"set": true}) keeps the overlap.
        let read = try server.request("GET", "/v1/admin/app", bearer: app.secretKey)
        #expect(try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["webhooks": read.data?["webhooks"] ?? .null]).status == 200)
        clock.advance(seconds: 23 * 3600)
        _ = try server.signUp(app, email: "second@example.com")
        try worker.runOnce()
        let late = try #require(sink.deliveries.last)
        #expect(late.header("webhook-signature")?.split(separator: " ").count == 2)
        #expect(try verifies(late, Self.secret))
        // 24 hours after the change, the replaced secret no longer signs.
        clock.advance(seconds: 3600)
        _ = try server.signUp(app, email: "third@example.com")
        try worker.runOnce()
        let after = try #require(sink.deliveries.last)
        #expect(sink.deliveries.count == 4)
        #expect(after.header("webhook-signature")?.split(separator: " ").count == 1)
        #expect(try verifies(after, Self.otherSecret))
        #expect(try !verifies(after, Self.secret))
        // The database holds the replaced secret sealed only, never in clear.
        let stored = try server.gatehouse.database.query("SELECT settings FROM apps WHERE id = \(app.id)")[0].string("settings")
        #expect(!stored.contains("MfKQ9r8") && stored.contains("previous_secret"), "sealed at rest")
    }

    @Test(arguments: TestDatabase.kinds)
    func aRedirectIsNeverFollowedButRetried(_ kind: TestDatabaseKind) throws {
        let sink = try WebhookSink()
        defer { sink.stop() }
        let clock = ManualClock()
        let (server, worker) = try world(kind, clock: clock)
        defer { server.stop() }
        let app = try server.createApp(["name": "Hooks", "webhooks": [hook(sink.url("a"), ["user.created"])]])
        sink.answerNext(1, status: 302, location: sink.url("elsewhere"))
        _ = try server.signUp(app)
        try worker.runOnce()
        #expect(sink.deliveries.map(\.path) == ["/hooks/a"])
        #expect(worker.retried.load(ordering: .relaxed) == 1)
        clock.advance(seconds: 5)
        try worker.runOnce()
        #expect(sink.deliveries.map(\.path) == ["/hooks/a", "/hooks/a"])
        #expect(sink.deliveries.map(\.status) == [302, 204])
    }

    /// The secret is looked up when delivering: a webhook removed meanwhile is a dead letter, whose
    /// reason names no secret.
    @Test(arguments: TestDatabase.kinds)
    func aDeliveryToAWebhookRemovedMeanwhileIsADeadLetter(_ kind: TestDatabaseKind) throws {
        let sink = try WebhookSink()
        defer { sink.stop() }
        let clock = ManualClock()
        let (server, worker) = try world(kind, clock: clock)
        defer { server.stop() }
        let app = try server.createApp(["name": "Hooks", "webhooks": [hook(sink.url(), ["user.created"])]])
        _ = try server.signUp(app)
        #expect(try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["webhooks": []]).status == 200)
        try worker.runOnce()
        #expect(sink.deliveries.isEmpty)
        #expect(worker.deadLettered.load(ordering: .relaxed) == 1)
        let row = try server.gatehouse.database.query("SELECT last_error, payload, sealed FROM outbox WHERE kind = 'webhook'")[0]
        #expect(try row.string("last_error").contains("no longer"))
        #expect(try !row.string("last_error").contains("MfKQ9r8"))
        // Kept sealed 30 days, to be retried by hand (the maintenance job erases it then).
        #expect(try row.bool("sealed") && !row.string("payload").isEmpty && !row.string("payload").contains("ada@example.com"))
    }

    /// Without GATEHOUSE_ALLOW_PRIVATE_OUTBOUND, a delivery is refused after DNS resolution when
    /// the address is private (here the receiver's, 127.0.0.1), and dead-lettered, not retried.
    @Test(arguments: TestDatabase.kinds)
    func aDeliveryToAPrivateAddressIsRefusedWithoutTheFlag(_ kind: TestDatabaseKind) throws {
        let sink = try WebhookSink()
        defer { sink.stop() }
        let clock = ManualClock()
        let (server, _) = try world(kind, clock: clock)
        defer { server.stop() }
        let app = try server.createApp(["name": "Hooks", "webhooks": [hook(sink.url(), ["user.created"])]])
        _ = try server.signUp(app)
        let strict = WebhookOutboxHandler(
            directory: server.gatehouse.directory, sealer: server.gatehouse.sealer, transport: OutboundWebhookTransport(allowPrivate: false),
            clock: clock)
        let worker = OutboxWorker(outbox: server.gatehouse.store.outbox, handlers: [strict], policy: OutboxRetryPolicy(maxBackoffSeconds: 600), clock: clock)
        #expect(try worker.runOnce() == 1)
        #expect(sink.deliveries.isEmpty)
        #expect(worker.deadLettered.load(ordering: .relaxed) == 1)
        let error = try server.gatehouse.database.query("SELECT last_error FROM outbox WHERE kind = 'webhook'")[0].string("last_error")
        #expect(error.contains("127.0.0.1"))
        #expect(!error.contains("/hooks/"), "the path stays out of the reason")
    }

    @Test(arguments: TestDatabase.kinds)
    func anotherAppsEventsNeverReachThisAppsWebhook(_ kind: TestDatabaseKind) throws {
        let sink = try WebhookSink()
        defer { sink.stop() }
        let clock = ManualClock()
        let (server, worker) = try world(kind, clock: clock)
        defer { server.stop() }
        let mine = try server.createApp(["name": "Mine", "webhooks": [hook(sink.url("mine"), ["user.created"])]])
        let theirs = try server.createApp(["name": "Theirs", "webhooks": [hook(sink.url("theirs"), ["user.updated"])]])
        _ = try server.signUp(theirs, email: "eve@example.com")
        #expect(try webhookItems(server) == 0)
        _ = try server.signUp(mine, email: "ada@example.com")
        try worker.runOnce()
        #expect(sink.deliveries.map(\.path) == ["/hooks/mine"])
        #expect(sink.deliveries.first?.json?["app_id"]?.stringValue == mine.id)
        #expect(sink.deliveries.first?.json?["data"]?["user"]?["email"] == "ada@example.com")
    }

    /// Settings to API.md; every refusal is 400 request/validation-failed naming its field.
    @Test(arguments: TestDatabase.kinds)
    func badWebhookSettingsAreRefusedWithTheirFields(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(["name": "Hooks"])
        let good = "https://hooks.example.com/a"
        let cases: [(JSON, String)] = [
            (hook("http://hooks.example.com/a", ["user.created"]), "webhooks[0].url"),
            (hook("https://127.0.0.1/a", ["user.created"]), "webhooks[0].url"),
            (hook("https://10.1.2.3/a", ["user.created"]), "webhooks[0].url"),
            (hook("https://[::1]/a", ["user.created"]), "webhooks[0].url"),
            (hook("https://localhost/a", ["user.created"]), "webhooks[0].url"),
            (hook("https://169.254.169.254/latest", ["user.created"]), "webhooks[0].url"),
            (hook("https://user:pw@hooks.example.com/a", ["user.created"]), "webhooks[0].url"),
            (hook(good, ["user.created"], secret: "0123456789abcdef0123"), "webhooks[0].secret"),
            (hook(good, ["user.created"], secret: "whsec_" + Data(repeating: 1, count: 16).base64EncodedString()), "webhooks[0].secret"),
            (hook(good, ["user.created"], secret: "whsec_" + Data(repeating: 1, count: 65).base64EncodedString()), "webhooks[0].secret"),
            (hook(good, ["user.created"], secret: "whsec_not base64 at all!!"), "webhooks[0].secret"),
            (["url": .string(good), "events": ["user.created"]], "webhooks[0].secret"),
            (hook(good, []), "webhooks[0].events"),
            (hook(good, ["*"]), "webhooks[0].events"),
            (hook(good, ["user.signed_up"]), "webhooks[0].events"),
            (hook(good, ["user.created", "user.exploded"]), "webhooks[0].events"),
            (["url": .string(good), "secret": .string(Self.secret)], "webhooks[0].events"),
        ]
        for (webhook, field) in cases {
            let refused = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["webhooks": [webhook]])
            #expect(refused.status == 400, "\(webhook)")
            #expect(refused.problemCode == "request/validation-failed", "\(webhook)")
            #expect(refused.json?["errors"]?.arrayValue?.compactMap { $0["field"]?.stringValue } == [field], "\(webhook)")
        }
        let saved = try server.request(
            "PATCH", "/v1/admin/app", bearer: app.secretKey,
            json: ["webhooks": [hook(good, ["user.created", "session.revoked"]), hook("https://hooks.example.com/b", ["user.deleted"], secret: Self.otherSecret)]])
        #expect(saved.status == 200)
        let read = try server.request("GET", "/v1/admin/app", bearer: app.secretKey)
        #expect(read.data?["webhooks"] == [
            ["url": .string(good), "secret": ["set": true], "events": ["user.created", "session.revoked"]],
            ["url": "https://hooks.example.com/b", "secret": ["set": true], "events": ["user.deleted"]],
        ])
        #expect(!read.text.contains("MfKQ9r8") && !saved.text.contains("MfKQ9r8"), "write-only")
        let stored = try server.gatehouse.database.query("SELECT settings FROM apps WHERE id = \(app.id)")[0].string("settings")
        #expect(!stored.contains("MfKQ9r8") && stored.contains("sealed"), "sealed at rest")
        // Read back and sent again, {"set": true} keeps each secret.
        let again = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["webhooks": read.data?["webhooks"] ?? .null])
        #expect(again.status == 200)
        let settings = try #require(try server.gatehouse.directory.current(id: AppID(unchecked: app.id))?.settings)
        #expect(settings.webhooks.map(\.secret) == [Self.secret, Self.otherSecret])
    }

    /// Under GATEHOUSE_ALLOW_PRIVATE_OUTBOUND, plain http and private addresses are accepted.
    @Test(arguments: TestDatabase.kinds)
    func httpAndPrivateAddressesNeedTheFlag(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock()
        let (server, _) = try world(kind, clock: clock)
        defer { server.stop() }
        let app = try server.createApp(["name": "Hooks"])
        let saved = try server.request(
            "PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["webhooks": [hook("http://127.0.0.1:9/a", ["user.created"]), hook("http://localhost/b", ["user.updated"])]])
        #expect(saved.status == 200)
        let refused = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["webhooks": [hook("ftp://127.0.0.1/a", ["user.created"])]])
        #expect(refused.status == 400)
    }

    /// A webhook stored by an earlier version (a short plain secret, no events: every type, http to
    /// localhost) still loads, and is delivered, signed with its secret's bytes.
    @Test(arguments: TestDatabase.kinds)
    func aWebhookStoredUnderTheLooserRulesStillLoadsAndDelivers(_ kind: TestDatabaseKind) throws {
        let sink = try WebhookSink()
        defer { sink.stop() }
        let clock = ManualClock()
        let (server, worker) = try world(kind, clock: clock)
        defer { server.stop() }
        let app = try server.createApp(["name": "Older", "webhooks": [hook(sink.url(), ["user.created"])]])
        let appID = AppID(unchecked: app.id)
        let legacySecret = "0123456789abcdef0123"
        let stored = try JSON.parse(Array(try server.gatehouse.database.query("SELECT settings FROM apps")[0].string("settings").utf8))
        var settings = try #require(stored.objectValue)
        settings["webhooks"] = [[
            "url": .string(sink.url()), "secret": ["sealed": .string(server.gatehouse.sealer.seal(legacySecret, app: appID, field: "webhooks[0].secret"))],
        ]]
        try server.gatehouse.database.execute("UPDATE apps SET settings = \(JSON.object(settings).serializedString), version = version + 1")
        server.gatehouse.directory.invalidate(appID)
        #expect(try server.request("GET", "/v1/app", appKey: app.appKey).status == 200)
        _ = try server.signUp(app)
        try worker.runOnce()
        let delivery = try #require(sink.deliveries.first)
        let expected = WebhookSignature.sign(
            key: Array(legacySecret.utf8), id: delivery.header("webhook-id") ?? "", timestamp: Int64(delivery.header("webhook-timestamp") ?? "") ?? 0,
            body: delivery.body)
        #expect(delivery.header("webhook-signature") == expected)
    }

    /// A sign-up by emailed code is user.created too, and a password change is
    /// user.password_changed with session.revoked for each other session it ends.
    @Test(arguments: TestDatabase.kinds)
    func anEmailCodeSignUpAndAPasswordChangeAreDelivered(_ kind: TestDatabaseKind) throws {
        let hooks = try WebhookSink()
        defer { hooks.stop() }
        let mail = try SMTPSink()
        defer { mail.stop() }
        let clock = ManualClock()
        let smtp = mail.url
        let server = try TestServer(kind, clock: clock) {
            $0.allowPrivateOutbound = true
            $0.smtpURL = smtp
        }
        defer { server.stop() }
        server.gatehouse.stopBackgroundWork()
        let worker = server.gatehouse.outboxWorker
        let app = try server.createApp([
            "name": "Hooks", "sign_in_methods": ["password", "email_code"], "rate_limits": ["auth_per_minute_per_ip": 1000],
            "webhooks": [hook(hooks.url(), ["user.created", "user.password_changed", "session.revoked"])],
        ])
        #expect(try server.request("POST", "/v1/auth/email-code/send", appKey: app.appKey, json: ["email": "grace@example.com"]).status == 202)
        while try worker.runOnce() > 0 {}
        let code = try #require(try mail.newestCode(to: "grace@example.com"))
        let created = try server.request("POST", "/v1/auth/email-code/verify", appKey: app.appKey, json: ["email": "grace@example.com", "code": .string(code)])
        #expect(created.status == 201)
        while try worker.runOnce() > 0 {}
        #expect(hooks.deliveries.compactMap { $0.json?["type"]?.stringValue } == ["user.created"])
        #expect(hooks.deliveries.first?.json?["data"]?["user"]?["email"] == "grace@example.com")

        _ = try server.signUp(app, email: "ada@example.com", password: "correct horse battery")
        let other = try server.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"])
        let token = try #require(other.data?["access_token"]?.stringValue)
        let changed = try server.request(
            "PUT", "/v1/me/password", appKey: app.appKey, bearer: token,
            json: ["current_password": "correct horse battery", "password": "a new horse battery"])
        #expect(changed.status == 204)
        while try worker.runOnce() > 0 {}
        let types = hooks.deliveries.compactMap { $0.json?["type"]?.stringValue }
        #expect(types.sorted() == ["session.revoked", "user.created", "user.created", "user.password_changed"])
        #expect(hooks.deliveries.allSatisfy { $0.status == 204 })
    }
}

extension WebhookTests {
    /// A deletion's webhook shows the account as it was (the event is recorded before the erase);
    /// a restore's shows it back.
    @Test(arguments: TestDatabase.kinds)
    func deletionAndRestoreReachWebhooksWithTheUser(_ kind: TestDatabaseKind) throws {
        let sink = try WebhookSink()
        defer { sink.stop() }
        let clock = ManualClock()
        let (server, worker) = try world(kind, clock: clock)
        defer { server.stop() }
        let app = try server.createApp([
            "name": "Hooks", "deletion_grace_days": 2, "webhooks": [hook(sink.url(), ["user.deleted", "user.restored", "session.revoked"])],
        ])
        let session = try server.signUp(app, email: "ada@example.com")
        #expect(try server.request("DELETE", "/v1/me", appKey: app.appKey, bearer: session["access_token"]?.stringValue).status == 204)
        _ = try server.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"])
        while try worker.runOnce() > 0 {}
        let bodies = sink.deliveries.compactMap(\.json)
        #expect(bodies.compactMap { $0["type"]?.stringValue }.sorted() == ["session.revoked", "user.deleted", "user.restored"])
        #expect(bodies.allSatisfy { $0["data"]?["user"]?["email"] == "ada@example.com" })
    }
}
