import Foundation
import GatehouseCore
import GatehouseMail
import GatehouseTesting
import Testing

/// One tenant's stalled destinations never delay another tenant's mail (API.md, "Tenants share one
/// server safely"): the audit's attack, through the real HTTP server, with real outbox workers on
/// their own threads, a real server that accepts and never answers, and the real SMTP sink.
@Suite("Noisy neighbours")
struct NoisyNeighbourTests {
    /// How long another app's code may take to arrive.
    static let bound: Double = 5
    /// How long the test waits for it before it reports the delay as "more than this".
    static let patience: Double = Double(ProcessInfo.processInfo.environment["GATEHOUSE_TEST_NOISY_PATIENCE"] ?? "") ?? 15

    /// App A points 10 webhooks at a server that never answers and queues 500 deliveries (25 bans
    /// and 25 lifts of one user); then app B's sign-in code is sent. On one node and on two.
    @Test(arguments: TestDatabase.kinds, [1, 2])
    func anotherAppsCodeArrivesWhileOneAppsWebhooksStall(_ kind: TestDatabaseKind, nodes: Int) throws {
        let stall = try StallingServer()
        defer { stall.stop() }
        let sink = try SMTPSink()
        defer { sink.stop() }
        let smtp = sink.url
        let first = try TestServer(kind) { $0.allowPrivateOutbound = true; $0.smtpURL = smtp }
        defer { first.stop() }
        let second = nodes == 2 ? try TestServer(anotherNodeOf: first) { $0.allowPrivateOutbound = true; $0.smtpURL = smtp } : nil
        defer { second?.stop() }
        let nodeB = second ?? first

        let hooks: [JSON] = (1...10).map {
            ["url": .string(stall.url("hook-\($0)")), "secret": .string(WebhookTests.secret), "events": ["user.banned", "user.unbanned"]]
        }
        let noisy = try first.createApp(["name": "Noisy", "webhooks": .array(hooks)])
        let quiet = try first.createApp(["name": "Quiet", "sign_in_methods": ["password", "email_code"]])
        let victim = try #require(first.signUp(noisy, email: "victim@example.com")["user"]?["id"]?.stringValue)
        for _ in 0..<25 {
            let ban = try first.request(
                "POST", "/v1/admin/users/\(victim)/ban", bearer: noisy.secretKey, json: ["sanction_code": "spam"])
            #expect(ban.status == 200)
            #expect(try first.request("DELETE", "/v1/admin/users/\(victim)/ban", bearer: noisy.secretKey).status == 200)
        }
        let queued = try first.gatehouse.database.query(
            "SELECT id FROM outbox WHERE kind = 'webhook' AND app_id = \(noisy.id) AND delivered_at IS NULL AND dead_at IS NULL").count
        #expect(queued == 500)
        // The stalled deliveries are under way before the code is asked for.
        let deadline = Date().addingTimeInterval(10)
        while stall.connections < 2 && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        #expect(stall.connections >= 2)

        try expectCodeArrives(from: nodeB, app: quiet, sink: sink, within: Self.bound, label: "\(kind), \(nodes) node(s), stalled webhooks")
    }

    /// App A's own SMTP server greets and then says nothing more, with 500 of A's mails queued;
    /// app B's code goes through the platform's mailer meanwhile.
    @Test(arguments: TestDatabase.kinds)
    func anotherAppsCodeArrivesWhileOneAppsMailServerStalls(_ kind: TestDatabaseKind) throws {
        let stall = try StallingServer(greeting: "220 stalling.example ESMTP")
        defer { stall.stop() }
        let sink = try SMTPSink()
        defer { sink.stop() }
        let smtp = sink.url
        let server = try TestServer(kind) { $0.allowPrivateOutbound = true; $0.smtpURL = smtp }
        defer { server.stop() }
        let noisy = try server.createApp(["name": "Noisy", "email": ["smtp_url": .string("smtp://127.0.0.1:\(stall.port)")]])
        let quiet = try server.createApp(["name": "Quiet", "sign_in_methods": ["password", "email_code"]])
        let outbox = server.gatehouse.store.outbox
        for i in 0..<500 {
            let mail = QueuedMail(to: "user\(i)@example.com", subject: "Hello", text: "Hello", html: "<p>Hello</p>")
            _ = try outbox.enqueue(
                mail.outboxItem(app: AppID(unchecked: noisy.id), idempotencyKey: "noisy-\(i)", sealer: server.gatehouse.sealer), now: server.clock.nowMillis())
        }
        server.gatehouse.outboxWorker.wake()
        let deadline = Date().addingTimeInterval(10)
        while stall.connections < 2 && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        #expect(stall.connections >= 2)
        try expectCodeArrives(from: server, app: quiet, sink: sink, within: Self.bound, label: "\(kind), stalled SMTP server")
    }

    /// Sends `app` a sign-in code to a fresh address and expects it in the sink within `bound` seconds.
    func expectCodeArrives(from server: TestServer, app: TestServer.CreatedApp, sink: SMTPSink, within bound: Double, label: String) throws {
        let address = "bea-\(UUID().uuidString.prefix(8).lowercased())@example.com"
        let sent = Date()
        let send = try server.request("POST", "/v1/auth/email-code/send", appKey: app.appKey, json: ["email": .string(address)])
        #expect(send.status == 202)
        var delay: Double?
        while delay == nil && Date().timeIntervalSince(sent) < Self.patience {
            if try sink.messages().contains(where: { $0.recipients == [address] }) { delay = Date().timeIntervalSince(sent) }
            else { Thread.sleep(forTimeInterval: 0.02) }
        }
        let figure = delay.map { String(format: "%.2f s", $0) } ?? "more than \(Int(Self.patience)) s"
        print("noisy neighbour (\(label)): the quiet app's code arrived after \(figure)")
        #expect(delay.map { $0 <= bound } == true, "the quiet app's code arrived after \(figure)")
    }
}
