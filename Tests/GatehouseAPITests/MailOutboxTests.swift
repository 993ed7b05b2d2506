import Foundation
import GatehouseCore
import GatehouseMail
import GatehouseTesting
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
        #expect(messages.first?.header("From")?.contains("no-reply@mail.example.com") == true)
        let body = String(decoding: messages.first?.raw ?? [], as: UTF8.self)
        #expect(body.contains("918273"))
        #expect(try server.gatehouse.database.query("SELECT payload FROM outbox")[0].string("payload") == "", "erased once delivered")
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
