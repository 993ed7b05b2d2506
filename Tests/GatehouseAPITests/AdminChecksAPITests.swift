import Foundation
import GatehouseCore
import Synchronization
import GatehouseTesting
import Testing

/// An admin's checks of the app's outbound settings (ADR 0035), on both databases, against real
/// parts: a test message through a real SMTP server (scripts/smtp-sink.py, with AUTH), a test
/// webhook delivery to a real HTTP receiver, its signature checked by Python's standard library,
/// and the list of the app's deliveries.
@Suite("Admin checks: the test message, the test delivery, the deliveries")
struct AdminChecksAPITests {
    static let password = "sink-secret-pw-1"
    static let hookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

    func server(_ kind: TestDatabaseKind, clock: ManualClock = ManualClock()) throws -> TestServer {
        try TestServer(kind, clock: clock) { $0.allowPrivateOutbound = true }
    }

    func mailApp(_ server: TestServer, _ sink: SMTPSink, password: String = AdminChecksAPITests.password) throws -> TestServer.CreatedApp {
        try server.createApp([
            "name": "Mailer", "email": ["smtp_url": .string(sink.url), "smtp_username": "tester", "smtp_password": .string(password), "from": "Shop <shop@example.com>"],
        ])
    }

    func test(_ server: TestServer, _ app: TestServer.CreatedApp, to: String) throws -> TestResponse {
        try server.request("POST", "/v1/admin/app/email/test", bearer: app.secretKey, json: ["to": .string(to)])
    }

    @Test(arguments: TestDatabase.kinds)
    func aTestMessageGoesThroughTheAppsOwnServerWithItsLogin(_ kind: TestDatabaseKind) throws {
        let sink = try SMTPSink(credentials: ("tester", Self.password))
        defer { sink.stop() }
        let server = try server(kind)
        defer { server.stop() }
        let app = try mailApp(server, sink)
        let sent = try test(server, app, to: "admin@example.com")
        #expect(sent.status == 200, "\(sent.text)")
        #expect(sent.data == ["sent": true])
        let messages = try sink.messages()
        #expect(messages.count == 1)
        let message = try #require(messages.first)
        #expect(message.recipients == ["admin@example.com"])
        #expect(message.mailFrom == "shop@example.com", "the app's own sender over its own server")
        #expect(message.authenticatedAs == "tester")
        #expect(message.header("Subject") == "Test message from Mailer")
        // Nothing queued: a test is sent now, not through the outbox.
        #expect(try server.gatehouse.database.query("SELECT id FROM outbox").isEmpty)
    }

    @Test(arguments: TestDatabase.kinds)
    func aFailedTestSaysWhyAndNothingSecret(_ kind: TestDatabaseKind) throws {
        let sink = try SMTPSink(credentials: ("tester", Self.password))
        defer { sink.stop() }
        let server = try server(kind)
        defer { server.stop() }

        // The server refuses the recipient.
        let app = try mailApp(server, sink)
        try sink.setMode(.refusePermanently)
        var failed = try test(server, app, to: "nobody@example.com")
        #expect(failed.status == 502, "\(failed.text)")
        #expect(failed.header("Content-Type") == "application/problem+json")
        #expect(failed.problemCode == "email/test-failed")
        #expect(failed.json?["reason"] == "recipient", "\(failed.text)")
        #expect(failed.json?["detail"]?.stringValue?.contains("550") == true, "\(failed.text)")
        try sink.setMode(.accept)

        // The server refuses the login: the password is never in the answer.
        let wrong = "the-wrong-password-9"
        let badLogin = try mailApp(server, sink, password: wrong)
        failed = try test(server, badLogin, to: "admin@example.com")
        #expect(failed.status == 502, "\(failed.text)")
        #expect(failed.json?["reason"] == "authentication", "\(failed.text)")
        #expect(!failed.text.contains(wrong) && !failed.text.contains("tester"), "\(failed.text)")

        // TLS from the first byte to a server that speaks plain SMTP: the handshake fails.
        let tls = try server.createApp(["name": "TLS", "email": ["smtp_url": .string(sink.url.replacingOccurrences(of: "smtp://", with: "smtps://"))]])
        failed = try test(server, tls, to: "admin@example.com")
        #expect(failed.status == 502, "\(failed.text)")
        #expect(failed.json?["reason"] == "tls", "\(failed.text)")

        // Nothing listens at the address.
        let closed = try server.createApp(["name": "Closed", "email": ["smtp_url": .string("smtp://127.0.0.1:\(try Self.closedPort())")]])
        failed = try test(server, closed, to: "admin@example.com")
        #expect(failed.status == 502, "\(failed.text)")
        #expect(failed.json?["reason"] == "connection", "\(failed.text)")
        #expect(try sink.messages().isEmpty)
    }

    /// A server that never greets: the test gives up at its time limit and says so, and meanwhile
    /// a second test of the app is refused at once instead of waiting on another thread.
    @Test
    func aSilentServerTimesOutAndOneTestOfAnAppRunsAtATime() throws {
        let sink = try SMTPSink(credentials: ("tester", Self.password))
        defer { sink.stop() }
        let server = try server(.sqlite)
        defer { server.stop() }
        let app = try mailApp(server, sink)
        try sink.setMode(.hang)
        let first = Mutex<TestResponse?>(nil)
        let done = DispatchSemaphore(value: 0)
        let started = ContinuousClock.now
        Thread.detachNewThread {
            let answer = try? self.test(server, app, to: "admin@example.com")
            first.withLock { $0 = answer }
            done.signal()
        }
        // The first is waiting for the greeting (the sink counts its connection).
        for _ in 0..<100 where sink.connectionCount == 0 { Thread.sleep(forTimeInterval: 0.05) }
        #expect(sink.connectionCount == 1)
        let second = try test(server, app, to: "admin@example.com")
        #expect(second.status == 429 && second.problemCode == "auth/too-many-requests", "\(second.text)")
        #expect(second.json?["detail"]?.stringValue?.contains("being sent") == true, "\(second.text)")
        done.wait()
        let answer = try #require(first.withLock { $0 })
        #expect(answer.status == 502 && answer.json?["reason"] == "timeout", "\(answer.text)")
        #expect(ContinuousClock.now - started < .seconds(25), "bounded by the mailer's limits")
        try sink.setMode(.accept)
        #expect(try test(server, app, to: "admin@example.com").status == 200, "the next test runs once the first is over")
    }

    /// Test messages count against the node's budget of calls to servers tenants chose, with the
    /// apps' own issuers: with 2 provider threads (a budget of 1), one app's test to a server that
    /// never answers leaves another app's test refused at once (503 `server/busy`), not waiting
    /// for a thread, until it is over.
    @Test
    func testsOfEveryAppShareTheNodesBudgetOfTenantCalls() throws {
        let sink = try SMTPSink(credentials: ("tester", Self.password))
        defer { sink.stop() }
        let server = try TestServer(.sqlite) { configuration in
            configuration.allowPrivateOutbound = true
            configuration.providerThreads = 2
        }
        defer { server.stop() }
        let hanging = try mailApp(server, sink)
        let other = try mailApp(server, sink)
        try sink.setMode(.hang)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            _ = try? self.test(server, hanging, to: "admin@example.com")
            done.signal()
        }
        for _ in 0..<100 where sink.connectionCount == 0 { Thread.sleep(forTimeInterval: 0.05) }
        #expect(sink.connectionCount == 1)
        let refused = try test(server, other, to: "admin@example.com")
        #expect(refused.status == 503 && refused.problemCode == "server/busy" && refused.header("Retry-After") != nil, "\(refused.text)")
        #expect(sink.connectionCount == 1, "the refused test opened no connection")
        done.wait()
        try sink.setMode(.accept)
        #expect(try test(server, other, to: "admin@example.com").status == 200, "once the first is over")
    }

    @Test(arguments: TestDatabase.kinds)
    func badRequestsAreProblemsAndAnAppWithoutItsOwnServerHasNothingToTest(_ kind: TestDatabaseKind) throws {
        let server = try server(kind)
        defer { server.stop() }
        let plain = try server.createApp(["name": "Platform mail"])
        var answer = try test(server, plain, to: "admin@example.com")
        #expect(answer.status == 400 && answer.problemCode == "request/validation-failed", "\(answer.text)")
        #expect(answer.json?["errors"]?.arrayValue?.first?["field"] == "email.smtp_url", "\(answer.text)")
        for address in ["not an address", "a<b@example.com", "a,b@example.com", "a\"b@example.com"] {
            answer = try test(server, plain, to: address)
            #expect(answer.status == 400 && answer.json?["errors"]?.arrayValue?.first?["field"] == "to", "\(address): \(answer.text)")
        }
        answer = try server.request("POST", "/v1/admin/app/email/test", bearer: plain.secretKey, json: ["to": "a@example.com", "cc": "b@example.com"])
        #expect(answer.status == 400 && answer.header("Content-Type") == "application/problem+json", "\(answer.text)")
        answer = try server.request("POST", "/v1/admin/app/email/test", json: ["to": "a@example.com"])
        #expect(answer.status == 401, "the secret key is required: \(answer.text)")
        answer = try server.request("POST", "/v1/admin/app/webhooks/test", bearer: plain.secretKey, json: [:])
        #expect(answer.status == 400 && answer.json?["errors"]?.arrayValue?.first?["field"] == "webhooks", "\(answer.text)")
        for query in ["state=gone", "event_type=Nope", "limit=0", "cursor=xyz"] {
            answer = try server.request("GET", "/v1/admin/webhooks/deliveries?\(query)", bearer: plain.secretKey)
            #expect(answer.status == 400 && answer.problemCode == "request/validation-failed", "\(query): \(answer.text)")
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func testsAreRateLimitedPerApp(_ kind: TestDatabaseKind) throws {
        let sink = try SMTPSink(credentials: ("tester", Self.password))
        defer { sink.stop() }
        let hooks = try WebhookSink()
        defer { hooks.stop() }
        let clock = ManualClock()
        let server = try server(kind, clock: clock)
        defer { server.stop() }
        server.gatehouse.stopBackgroundWork()
        // The window is a fixed minute: start at its beginning, so that all eleven fall in one.
        clock.advance(seconds: 60 - (clock.nowMillis() / 1000) % 60)
        let app = try server.createApp([
            "name": "Busy", "email": ["smtp_url": .string(sink.url), "smtp_username": "tester", "smtp_password": .string(Self.password)],
            "webhooks": [["url": .string(hooks.url()), "secret": .string(Self.hookSecret), "events": ["user.created"]]],
        ])
        let other = try mailApp(server, sink)
        for _ in 0..<10 {
            #expect(try test(server, app, to: "admin@example.com").status == 200)
            #expect(try server.request("POST", "/v1/admin/app/webhooks/test", bearer: app.secretKey).status == 202)
        }
        let refused = try test(server, app, to: "admin@example.com")
        #expect(refused.status == 429 && refused.header("Retry-After") != nil, "\(refused.text)")
        #expect(try server.request("POST", "/v1/admin/app/webhooks/test", bearer: app.secretKey).status == 429)
        #expect(try sink.messages().count == 10)
        #expect(try test(server, other, to: "admin@example.com").status == 200, "another app's tests are its own")
        clock.advance(seconds: 60)
        #expect(try test(server, app, to: "admin@example.com").status == 200, "a new minute")
    }

    @Test(arguments: TestDatabase.kinds)
    func aTestDeliveryArrivesSignedAndIsListedWithItsStatus(_ kind: TestDatabaseKind) throws {
        let hooks = try WebhookSink()
        defer { hooks.stop() }
        let clock = ManualClock()
        let server = try server(kind, clock: clock)
        defer { server.stop() }
        server.gatehouse.stopBackgroundWork()
        let worker = server.gatehouse.outboxWorker
        let app = try server.createApp([
            "name": "Hooks",
            "webhooks": [
                ["url": .string(hooks.url("a")), "secret": .string(Self.hookSecret), "events": ["user.created"]],
                ["url": .string(hooks.url("b")), "secret": .string(Self.hookSecret), "events": ["user.deleted"]],
            ],
        ])
        // One webhook, picked by its URL.
        let queued = try server.request("POST", "/v1/admin/app/webhooks/test", bearer: app.secretKey, json: ["url": .string(hooks.url("b"))])
        #expect(queued.status == 202, "\(queued.text)")
        let ids = try #require(queued.data?["deliveries"]?.arrayValue)
        #expect(ids.count == 1 && ids[0]["url"]?.stringValue == hooks.url("b"))
        let id = try #require(ids[0]["id"]?.stringValue)
        let unknown = try server.request("POST", "/v1/admin/app/webhooks/test", bearer: app.secretKey, json: ["url": "https://elsewhere.example.com/hook"])
        #expect(unknown.status == 400 && unknown.json?["errors"]?.arrayValue?.first?["field"] == "url", "\(unknown.text)")

        var listed = try server.request("GET", "/v1/admin/webhooks/deliveries", bearer: app.secretKey)
        #expect(listed.status == 200, "\(listed.text)")
        var item = try #require(listed.json?["data"]?.arrayValue?.first)
        #expect(item["id"]?.stringValue == id && item["state"] == "queued" && item["event_type"] == "webhook.test")
        #expect(item["attempts"] == 0 && item["last_status"] == .null && item["next_attempt_at"]?.stringValue != nil)

        // The receiver fails once: the status is kept, and the delivery stays queued.
        hooks.answerNext(1, status: 503)
        #expect(try worker.runOnce() == 1)
        item = try #require(try server.request("GET", "/v1/admin/webhooks/deliveries?state=queued", bearer: app.secretKey).json?["data"]?.arrayValue?.first)
        #expect(item["state"] == "queued" && item["attempts"] == 1 && item["last_status"] == 503, "\(item)")
        #expect(item["last_error"]?.stringValue?.contains("503") == true)
        // A later attempt that got no answer at all (a connection failure) keeps the last status seen.
        clock.advance(seconds: 10)
        let outbox = server.gatehouse.store.outbox
        let claimed = try outbox.claim(kinds: [OutboxKind.webhook], limit: 10, leaseMillis: 60_000, node: "test", now: clock.nowMillis())
        #expect(claimed.map(\.id) == [id])
        try outbox.markRetry(
            id, node: "test", nextAttemptAt: clock.nowMillis(), error: "connection refused", now: clock.nowMillis(), destination: nil, breaker: nil, status: nil)
        item = try #require(try server.request("GET", "/v1/admin/webhooks/deliveries?state=queued", bearer: app.secretKey).json?["data"]?.arrayValue?.first)
        #expect(item["attempts"] == 2 && item["last_status"] == 503 && item["last_error"] == "connection refused", "\(item)")
        #expect(try worker.runOnce() == 1)

        let delivered = try #require(hooks.deliveries.last)
        #expect(delivered.path == "/hooks/b")
        let body = try #require(delivered.json)
        #expect(body["type"] == "webhook.test" && body["app_id"]?.stringValue == app.id)
        let webhookID = try #require(delivered.header("webhook-id"))
        #expect(webhookID == ids[0]["webhook_id"]?.stringValue && webhookID == body["id"]?.stringValue)
        let timestamp = try #require(delivered.header("webhook-timestamp"))
        let signature = try #require(delivered.header("webhook-signature"))
        #expect(try IndependentWebhookVerifier.verify(id: webhookID, timestamp: timestamp, body: delivered.body, secret: Self.hookSecret, signature: signature))

        listed = try server.request("GET", "/v1/admin/webhooks/deliveries?state=delivered&event_type=webhook.test", bearer: app.secretKey)
        let items = try #require(listed.json?["data"]?.arrayValue)
        #expect(items.count == 1)
        item = items[0]
        #expect(item["state"] == "delivered" && item["attempts"] == 3 && item["last_status"] == 204 && item["last_error"] == .null)
        #expect(item["url"]?.stringValue == hooks.url("b") && item["delivered_at"]?.stringValue != nil && item["next_attempt_at"] == .null)
        #expect(!listed.text.contains("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), "never the secret")
        #expect(try server.request("GET", "/v1/admin/webhooks/deliveries?state=dead", bearer: app.secretKey).json?["data"]?.arrayValue?.isEmpty == true)

        // Without a URL: one delivery to each webhook, whatever they subscribe to.
        let both = try server.request("POST", "/v1/admin/app/webhooks/test", bearer: app.secretKey)
        #expect(both.status == 202 && both.data?["deliveries"]?.arrayValue?.count == 2, "\(both.text)")
        #expect(try worker.runOnce() == 2)
        #expect(Set(hooks.deliveries.suffix(2).map(\.path)) == ["/hooks/a", "/hooks/b"])
        #expect(hooks.errors.isEmpty)
    }

    @Test(arguments: TestDatabase.kinds)
    func anAppListsItsOwnDeliveriesOnlyAPageAtATime(_ kind: TestDatabaseKind) throws {
        let hooks = try WebhookSink()
        defer { hooks.stop() }
        let clock = ManualClock()
        let server = try server(kind, clock: clock)
        defer { server.stop() }
        server.gatehouse.stopBackgroundWork()
        func hookApp(_ name: String) throws -> TestServer.CreatedApp {
            try server.createApp(["name": .string(name), "webhooks": [["url": .string(hooks.url(name)), "secret": .string(Self.hookSecret), "events": ["user.created"]]]])
        }
        let mine = try hookApp("mine")
        let theirs = try hookApp("theirs")
        for n in 0..<3 {
            _ = try server.signUp(mine, email: "m\(n)@example.com")
            clock.advance(seconds: 1)
        }
        _ = try server.signUp(theirs, email: "t@example.com")
        #expect(try server.request("POST", "/v1/admin/app/webhooks/test", bearer: theirs.secretKey).status == 202)

        var seen: [String] = []
        var cursor: String?
        repeat {
            let page = try server.request(
                "GET", "/v1/admin/webhooks/deliveries?limit=2" + (cursor.map { "&cursor=\($0)" } ?? ""), bearer: mine.secretKey)
            #expect(page.status == 200, "\(page.text)")
            let items = try #require(page.json?["data"]?.arrayValue)
            #expect(items.allSatisfy { $0["url"]?.stringValue == hooks.url("mine") && $0["event_type"] == "user.created" })
            seen += items.compactMap { $0["id"]?.stringValue }
            cursor = page.json?["next_cursor"]?.stringValue
        } while cursor != nil
        let own = try server.gatehouse.database.query("SELECT id FROM outbox WHERE app_id = \(mine.id) AND kind = 'webhook' ORDER BY created_at DESC, id DESC").map { try $0.string("id") }
        #expect(seen == own && seen.count == 3, "newest first, each once")
        let theirIDs = try server.gatehouse.database.query("SELECT id FROM outbox WHERE app_id = \(theirs.id) AND kind = 'webhook'").map { try $0.string("id") }
        #expect(theirIDs.count == 2 && Set(theirIDs).isDisjoint(with: seen), "another app's deliveries are never listed")
        let theirList = try server.request("GET", "/v1/admin/webhooks/deliveries", bearer: theirs.secretKey).json?["data"]?.arrayValue ?? []
        #expect(Set(theirList.compactMap { $0["id"]?.stringValue }) == Set(theirIDs))
        // The platform token is not an app: the list is the app's admin's.
        #expect(try server.request("GET", "/v1/admin/webhooks/deliveries", bearer: TestServer.adminToken).status == 401)
    }

    /// A TCP port on loopback nothing listens on (bound, then closed).
    static func closedPort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        try withUnsafeMutablePointer(to: &address) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                guard bind(fd, raw, length) == 0, getsockname(fd, raw, &length) == 0 else { throw POSIXError(.EADDRINUSE) }
            }
        }
        return UInt16(bigEndian: address.sin_port)
    }
}
