import Foundation
import GatehouseCore
import GatehouseAPI
import GatehouseApp
import GatehouseMail
import GatehouseTesting
import Synchronization
import Testing

/// Mail through the outbox to a real SMTP server (the aiosmtpd sink), on both databases.
@Suite("Mail through the outbox")
struct MailOutboxTests {
    /// A server whose platform mailer is the sink, and a worker stepped by hand (the server's own
    /// worker is stopped, so that the test decides when deliveries happen).
    func world(_ kind: TestDatabaseKind, clock: ManualClock, sink: SMTPSink) throws -> (TestServer, OutboxWorker) {
        let url = sink.url
        let server = try TestServer(kind, clock: clock) { $0.smtpURL = url }
        server.gatehouse.stopBackgroundWork()
        return (server, server.gatehouse.outboxWorker)
    }

    func queue(_ server: TestServer, app: String, to: String, key: String, code: String = "123456") throws {
        let mail = QueuedMail(to: to, subject: "Your code", text: "Your code is \(code).", html: "<p>Your code is <b>\(code)</b>.</p>")
        let item = mail.outboxItem(app: AppID(unchecked: app), idempotencyKey: key, sealer: server.gatehouse.sealer)
        #expect(try server.gatehouse.store.outbox.enqueue(item, now: server.clock.nowMillis()))
    }

    @Test(arguments: TestDatabase.kinds)
    func aQueuedMailIsSentSealedUntilThenAndErasedAfter(_ kind: TestDatabaseKind) throws {
        let sink = try SMTPSink()
        defer { sink.stop() }
        let clock = ManualClock()
        let (server, worker) = try world(kind, clock: clock, sink: sink)
        defer { server.stop() }
        let app = try server.createApp(["name": "Mail Test", "email": ["from": "Mail Test <no-reply@mail.example.com>"]])
        try queue(server, app: app.id, to: "ada@example.com", key: "k1", code: "918273")
        let stored = try server.gatehouse.database.query("SELECT payload FROM outbox")[0].string("payload")
        #expect(!stored.contains("918273"), "the code is sealed in the table")
        #expect(try worker.runOnce() == 1)
        let messages = try sink.messages()
        #expect(messages.count == 1)
        #expect(messages.first?.recipients == ["ada@example.com"])
        #expect(messages.first?.header("Reply-To")?.contains("no-reply@mail.example.com") == true)
        let body = String(decoding: messages.first?.raw ?? [], as: UTF8.self)
        #expect(body.contains("918273"))
        #expect(try server.gatehouse.database.query("SELECT payload FROM outbox")[0].string("payload") == "", "erased once delivered")
    }

    /// Over the platform's mailer an app sends from `GATEHOUSE_SMTP_FROM` under its own name,
    /// envelope and header alike; its `email.from`, however it reads, is only where replies go.
    @Test(arguments: TestDatabase.kinds)
    func theFromOfATenantIsOnlyItsReplyToOverThePlatformsMailer(_ kind: TestDatabaseKind) throws {
        let sink = try SMTPSink()
        defer { sink.stop() }
        let clock = ManualClock()
        let url = sink.url
        let server = try TestServer(kind, clock: clock) {
            $0.smtpURL = url
            $0.smtpFrom = "mail@gatehouse.example"
        }
        defer { server.stop() }
        server.gatehouse.stopBackgroundWork()
        let hostile = try server.createApp(["name": "Caf\u{00E9} Shop", "email": ["from": "PayPal Security <service@paypal.com>"]])
        try queue(server, app: hostile.id, to: "ada@example.com", key: "hostile")
        #expect(try server.gatehouse.outboxWorker.runOnce() == 1)
        let message = try #require(try sink.messages().first)
        #expect(message.mailFrom == "mail@gatehouse.example")
        let parsed = try IndependentMailParser.parse(message.raw)
        #expect(parsed.from == [["Caf\u{00E9} Shop", "mail@gatehouse.example"]], "the app's name, encoded, beside the platform's address")
        #expect(parsed.defects.isEmpty, "\(parsed.defects)")
        #expect(parsed.longestLine <= 78)
        #expect(parsed.headers["Reply-To"] == "PayPal Security <service@paypal.com>")
        #expect(!(message.header("From") ?? "").contains("paypal"), "never the sender over the platform's mailer")
        #expect(!(message.header("Message-ID") ?? "").contains("paypal.com"))
    }

    /// Without `GATEHOUSE_SMTP_FROM` the platform sends from `no-reply@` its public host.
    @Test
    func thePlatformSendsFromNoReplyAtItsPublicHostByDefault() throws {
        #expect(try Configuration.fromEnvironment(["GATEHOUSE_PUBLIC_URL": "http://auth.example.com"]).platformSenderAddress == "no-reply@auth.example.com")
        #expect(try Configuration.fromEnvironment(["GATEHOUSE_PUBLIC_URL": "http://127.0.0.1:8080"]).platformSenderAddress == "no-reply@localhost")
        #expect(try Configuration.fromEnvironment(["GATEHOUSE_SMTP_FROM": "mail@example.org"]).platformSenderAddress == "mail@example.org")
        for wrong in ["Shop <mail@example.org>", "no at sign", "a@b@c", "caf\u{00E9}@example.org"] {
            #expect(throws: ConfigurationError.self, "\(wrong)") { try Configuration.fromEnvironment(["GATEHOUSE_SMTP_FROM": wrong]) }
        }
    }

    /// Over its own SMTP server an app's `email.from` is its sender.
    @Test(arguments: TestDatabase.kinds)
    func anAppsOwnSMTPServerSendsFromItsOwnAddress(_ kind: TestDatabaseKind) throws {
        let sink = try SMTPSink()
        defer { sink.stop() }
        let platform = try SMTPSink()
        defer { platform.stop() }
        let clock = ManualClock()
        let platformURL = platform.url
        let server = try TestServer(kind, clock: clock) {
            $0.smtpURL = platformURL
            $0.allowPrivateOutbound = true
        }
        defer { server.stop() }
        server.gatehouse.stopBackgroundWork()
        let app = try server.createApp(["name": "Shop", "email": ["from": "Shop <hello@shop.example>", "smtp_url": .string(sink.url)]])
        try queue(server, app: app.id, to: "ada@example.com", key: "own")
        #expect(try server.gatehouse.outboxWorker.runOnce() == 1)
        let message = try #require(try sink.messages().first)
        #expect(message.mailFrom == "hello@shop.example")
        #expect(try IndependentMailParser.parse(message.raw).from == [["Shop", "hello@shop.example"]])
        #expect(message.header("Reply-To") == nil)
        #expect(try platform.messages().isEmpty)
    }

    /// A code is in no log line but the `log:` mailer's own: not the access log, not the outbox's
    /// retries or dead letters, at the most verbose level.
    @Test(arguments: TestDatabase.kinds)
    func codesStayOutOfLogs(_ kind: TestDatabaseKind) throws {
        let sink = try SMTPSink()
        defer { sink.stop() }
        let lines = Mutex<[String]>([])
        let log = Log(level: .debug) { bytes in lines.withLock { $0.append(String(decoding: bytes, as: UTF8.self)) } }
        let clock = ManualClock()
        let url = sink.url
        let server = try TestServer(kind, clock: clock, log: log) {
            $0.smtpURL = url
            $0.accessLog = true
        }
        defer { server.stop() }
        server.gatehouse.stopBackgroundWork()
        let app = try server.createApp(["name": "Quiet", "sign_in_methods": ["password", "email_code"]])
        #expect(try server.request("POST", "/v1/auth/email-code/send", appKey: app.appKey, json: ["email": "ada@example.com"]).status == 202)
        try sink.setMode(.refuseTemporarily)
        #expect(try server.gatehouse.outboxWorker.runOnce() == 1)
        try sink.setMode(.accept)
        clock.advance(seconds: 5)
        #expect(try server.gatehouse.outboxWorker.runOnce() == 1)
        let mail = try #require(try sink.messages().first)
        let text = try IndependentMailParser.parse(mail.raw).parts.first { $0.contentType == "text/plain" }?.content ?? ""
        let code = try #require(text.range(of: #"\b[0-9]{6}\b"#, options: .regularExpression).map { String(text[$0]) })
        let wrong = String((Int(code)! + 1) % 1_000_000)
        for tried in [wrong, code] {
            _ = try server.request("POST", "/v1/auth/email-code/verify", appKey: app.appKey, json: ["email": "ada@example.com", "code": .string(tried)])
        }
        // A mail refused for good, its reason in the log and the audit log.
        try sink.setMode(.refusePermanently)
        clock.advance(seconds: 61)
        #expect(try server.request("POST", "/v1/auth/email-code/send", appKey: app.appKey, json: ["email": "ada@example.com"]).status == 202)
        #expect(try server.gatehouse.outboxWorker.runOnce() == 1)
        let logged = lines.withLock { $0 }
        #expect(logged.contains { $0.contains("outbox delivery failed") } && logged.contains { $0.contains("dead-lettered") })
        #expect(logged.contains { $0.contains("/v1/auth/email-code/verify") }, "the access log was on")
        #expect(!logged.contains { $0.contains(code) }, "\(logged.filter { $0.contains(code) })")
    }

    /// The handler keeps its mailer, and the mailer its connections, from one batch to the next.
    @Test(arguments: TestDatabase.kinds)
    func laterBatchesReuseTheConnectionsOfEarlierOnes(_ kind: TestDatabaseKind) throws {
        let sink = try SMTPSink()
        defer { sink.stop() }
        let clock = ManualClock()
        let (server, worker) = try world(kind, clock: clock, sink: sink)
        defer { server.stop() }
        let app = try server.createApp(["name": "Mail Test"])
        // One mail a batch: a batch of several may send in parallel, and how many connections
        // that opens depends on timing (a loaded machine sent a first batch of three on one
        // connection, then the second in parallel on new ones).
        for batch in 0..<3 {
            try queue(server, app: app.id, to: "batch\(batch)@example.com", key: "batch-\(batch)")
            #expect(try worker.runOnce() == 1)
            #expect(sink.connectionCount == 1, "batch \(batch): the first batch's connection, not a new one")
        }
        #expect(try sink.messages().count == 3)
    }

    @Test(arguments: TestDatabase.kinds)
    func aMailServerThatRefusesForNowGetsTheMailWhenItIsBack(_ kind: TestDatabaseKind) throws {
        let sink = try SMTPSink()
        defer { sink.stop() }
        let clock = ManualClock()
        let (server, worker) = try world(kind, clock: clock, sink: sink)
        defer { server.stop() }
        let app = try server.createApp(["name": "Mail Test"])
        try sink.setMode(.refuseTemporarily)
        try queue(server, app: app.id, to: "ada@example.com", key: "k2")
        #expect(try worker.runOnce() == 1)
        #expect(try sink.messages().isEmpty)
        #expect(worker.retried.load(ordering: .relaxed) == 1)
        try sink.setMode(.accept)
        #expect(try worker.runOnce() == 0, "not before its back-off")
        clock.advance(seconds: 5)
        #expect(try worker.runOnce() == 1)
        #expect(try sink.messages().count == 1, "nothing lost")
    }

    @Test(arguments: TestDatabase.kinds)
    func aMailTheServerRefusesForGoodIsADeadLetter(_ kind: TestDatabaseKind) throws {
        let sink = try SMTPSink()
        defer { sink.stop() }
        let clock = ManualClock()
        let (server, worker) = try world(kind, clock: clock, sink: sink)
        defer { server.stop() }
        let app = try server.createApp(["name": "Mail Test"])
        try sink.setMode(.refusePermanently)
        try queue(server, app: app.id, to: "nobody@example.com", key: "k3")
        #expect(try worker.runOnce() == 1)
        #expect(worker.deadLettered.load(ordering: .relaxed) == 1)
        let events = try server.gatehouse.database.query("SELECT data FROM events WHERE type = 'outbox.dead_lettered'")
        #expect(events.count == 1)
        #expect(try events.first?.string("data").contains("550") == true)
    }

    /// An app's own SMTP URL is a tenant URL: on a loopback address it is refused (a dead letter,
    /// nothing connected) unless the server allows private outbound connections.
    @Test(arguments: TestDatabase.kinds)
    func anAppsOwnSMTPServerOnALoopbackAddressIsRefused(_ kind: TestDatabaseKind) throws {
        let sink = try SMTPSink()
        defer { sink.stop() }
        let clock = ManualClock()
        let (server, worker) = try world(kind, clock: clock, sink: sink)
        defer { server.stop() }
        let app = try server.createApp(["name": "Own SMTP", "email": ["smtp_url": .string(sink.url)]])
        try queue(server, app: app.id, to: "ada@example.com", key: "k4")
        #expect(try worker.runOnce() == 1)
        #expect(worker.deadLettered.load(ordering: .relaxed) == 1)
        #expect(sink.connectionCount == 0)
    }
}
