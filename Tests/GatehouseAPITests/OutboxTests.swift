import Dispatch
import Foundation
import GatehouseCore
import GatehouseTesting
import Synchronization
import Testing

/// A handler of a kind of its own for these tests: it records what it was given and answers what
/// the test scripts (the real kinds, mail first, come with their own handlers).
final class ScriptedHandler: OutboxHandler, Sendable {
    static let testKind = OutboxKind(rawValue: "test")
    var kind: OutboxKind { Self.testKind }
    let seen = Mutex<[String]>([])
    let outcome: Mutex<OutboxDelivery>
    let pause: Double
    /// Moved on by each delivery, as a slow delivery moves time on.
    let clock: ManualClock?
    let takesSeconds: Int64
    /// Where every item goes, if the handler is to say so rather than the item.
    let knownDestination: String?

    init(_ outcome: OutboxDelivery = .delivered, pause: Double = 0, clock: ManualClock? = nil, takesSeconds: Int64 = 0, destination: String? = nil) {
        self.knownDestination = destination
        self.outcome = Mutex(outcome)
        self.pause = pause
        self.clock = clock
        self.takesSeconds = takesSeconds
    }

    func destination(of item: OutboxItem) -> String? { knownDestination ?? item.destination }

    func deliver(_ item: OutboxItem) -> OutboxDelivery {
        if pause > 0 { Thread.sleep(forTimeInterval: pause) }
        clock?.advance(seconds: takesSeconds)
        seen.withLock { $0.append(item.id) }
        return outcome.withLock { $0 }
    }
}

@Suite("The outbox")
struct OutboxTests {
    func item(_ key: String, app: String? = nil, sealed: Bool = false, destination: String? = nil) -> NewOutboxItem {
        NewOutboxItem(
            appID: app.map(AppID.init(unchecked:)), kind: ScriptedHandler.testKind, idempotencyKey: key, payload: #"{"n":"\#(key)"}"#, sealed: sealed,
            destination: destination)
    }

    func worker(_ server: TestServer, _ handler: ScriptedHandler, node: String, clock: any Clock, lanes: Int = 8, perApp: Int = 2) -> OutboxWorker {
        OutboxWorker(
            outbox: server.gatehouse.store.outbox, handlers: [handler], policy: OutboxRetryPolicy(maxBackoffSeconds: 600),
            clock: clock, pollInterval: 0.05, lanes: lanes, perAppInFlight: perApp, node: node)
    }

    /// Claims go round the apps, and a node holds at most `perAppInFlight` items of one app: app A
    /// queued 6 items before app B queued 2, yet a step of 4 lanes takes 2 of A's and both of B's.
    @Test(arguments: TestDatabase.kinds)
    func claimsGoRoundTheAppsWithinEachAppsCap(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock()
        let server = try TestServer(kind, clock: clock)
        defer { server.stop() }
        let (a, b) = (try server.createApp().id, try server.createApp().id)
        let outbox = server.gatehouse.store.outbox
        for i in 0..<6 { _ = try outbox.enqueue(item("a-\(i)", app: a), now: clock.nowMillis() - 1000 + Int64(i)) }
        for i in 0..<2 { _ = try outbox.enqueue(item("b-\(i)", app: b), now: clock.nowMillis()) }
        let handler = ScriptedHandler()
        let worker = worker(server, handler, node: "fair", clock: clock, lanes: 4, perApp: 2)
        #expect(try worker.runOnce() == 4)
        let keys = try server.gatehouse.database.query("SELECT idempotency_key FROM outbox WHERE delivered_at IS NOT NULL").map { try $0.string("idempotency_key") }
        #expect(Set(keys) == ["a-0", "a-1", "b-0", "b-1"], "the oldest of each app, two of each")
        // Once B has none left, A's may fill the lanes, still two at a time on this node.
        #expect(try worker.runOnce() == 2)
        #expect(try worker.runOnce() == 2)
        #expect(try worker.runOnce() == 0)
        // The store's round robin: after an app, the next app that has a due item, wrapping around.
        for i in 0..<2 { _ = try outbox.enqueue(item("a2-\(i)", app: a), now: clock.nowMillis()) }
        for i in 0..<2 { _ = try outbox.enqueue(item("b2-\(i)", app: b), now: clock.nowMillis()) }
        let claimed = try outbox.claim(kinds: [ScriptedHandler.testKind], limit: 4, leaseMillis: 60_000, node: "n", now: clock.nowMillis())
        let apps = claimed.map { $0.appID!.rawValue }
        #expect(apps.count == 4 && apps[0] != apps[1] && apps[1] != apps[2] && apps[2] != apps[3], "alternating: \(apps)")
        // An app at its cap is skipped by the claim.
        _ = try outbox.enqueue(item("a3", app: a), now: clock.nowMillis())
        #expect(try outbox.claimNext(
            kind: ScriptedHandler.testKind, after: nil, excluding: [AppID(unchecked: a)], leaseMillis: 60_000, node: "n", now: clock.nowMillis()) == nil)
    }

    /// A destination that failed 5 times in a row is paused (30 s, doubling with each further
    /// failure): its items are not claimed, whatever their own back-off; another app's items for
    /// the same host are not held; the first success closes the breaker.
    @Test(arguments: TestDatabase.kinds)
    func aDestinationThatKeepsFailingIsPausedForItsAppAlone(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock()
        let server = try TestServer(kind, clock: clock)
        defer { server.stop() }
        let (a, b) = (try server.createApp().id, try server.createApp().id)
        let outbox = server.gatehouse.store.outbox
        let host = "hooks.example.com:443"
        for i in 0..<8 { _ = try outbox.enqueue(item("a-\(i)", app: a, destination: host), now: clock.nowMillis()) }
        let handler = ScriptedHandler(.unreachable(reason: "timed out"))
        let worker = worker(server, handler, node: "breaker", clock: clock, lanes: 4, perApp: 2)
        #expect(try worker.runOnce() == 2)
        #expect(try worker.runOnce() == 2)
        #expect(try worker.runOnce() == 2, "6 failures in a row")
        #expect(try outbox.pausedUntil(app: AppID(unchecked: a), destination: host, now: clock.nowMillis()) != nil)
        #expect(try outbox.pausedUntil(app: AppID(unchecked: b), destination: host, now: clock.nowMillis()) == nil)
        #expect(worker.breakerOpened.load(ordering: .relaxed) >= 1)
        // Its items wait out of the due range until the pause ends, so no claim walks them meanwhile.
        let until = try #require(try outbox.pausedUntil(app: AppID(unchecked: a), destination: host, now: clock.nowMillis()))
        let early = try server.gatehouse.database.query("SELECT id FROM outbox WHERE app_id = \(a) AND next_attempt_at < \(until)")
        #expect(early.isEmpty)
        let breakdown = try outbox.breakdown(now: clock.nowMillis())
        #expect(breakdown.pausedCount == 1 && breakdown.paused.first?.destination == host && breakdown.paused.first?.appID?.rawValue == a)
        #expect(breakdown.counts.contains(.init(kind: ScriptedHandler.testKind, state: "paused", count: 8)))
        let scrape = try MetricsScrape(server)
        #expect(scrape["gatehouse_outbox_destinations_paused"] == 1)
        #expect(scrape[#"gatehouse_outbox_items{kind="test",state="paused"}"#] == 8)
        #expect(scrape[#"gatehouse_outbox_items{kind="test",state="queued"}"#] == 8)
        #expect(scrape[#"gatehouse_outbox_app_queued{app_id="\#(a)",kind="test"}"#] == 8)
        #expect(scrape[#"gatehouse_outbox_destination_paused_seconds{app_id="\#(a)",destination="\#(host)",failures="6"}"#] == 60)
        // Their own back-off (5 s) is over, the pause (30 s, 60 s after the sixth failure) is not.
        clock.advance(seconds: 10)
        _ = try outbox.enqueue(item("b-0", app: b, destination: host), now: clock.nowMillis())
        handler.outcome.withLock { $0 = .delivered }
        #expect(try worker.runOnce() == 1, "B's item alone")
        #expect(handler.seen.withLock { $0.count } == 7)
        clock.advance(seconds: 60)
        #expect(try worker.runOnce() == 2, "the pause is over: a trial, which succeeds")
        #expect(try outbox.pausedUntil(app: AppID(unchecked: a), destination: host, now: clock.nowMillis()) == nil)
        #expect(try server.gatehouse.database.query("SELECT app_id FROM outbox_destinations").isEmpty, "a success closes the breaker")
    }

    /// A disabled app's items wait, unattempted, and go out once it is enabled again; another
    /// app's are delivered meanwhile.
    @Test(arguments: TestDatabase.kinds)
    func aDisabledAppsItemsWaitUntilItIsEnabled(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock()
        let server = try TestServer(kind, clock: clock)
        defer { server.stop() }
        let (off, on) = (try server.createApp(), try server.createApp())
        let outbox = server.gatehouse.store.outbox
        _ = try outbox.enqueue(item("off", app: off.id), now: clock.nowMillis())
        _ = try outbox.enqueue(item("on", app: on.id), now: clock.nowMillis())
        #expect(try server.request("POST", "/v1/admin/apps/\(off.id)/disable", bearer: TestServer.adminToken).status == 200)
        let handler = ScriptedHandler()
        let worker = worker(server, handler, node: "n", clock: clock)
        #expect(try worker.runOnce() == 1)
        #expect(try worker.runOnce() == 0, "the disabled app's item waits")
        #expect(try server.gatehouse.database.query("SELECT attempts FROM outbox WHERE idempotency_key = 'off'")[0].int64("attempts") == 0)
        #expect(try server.request("POST", "/v1/admin/apps/\(off.id)/enable", bearer: TestServer.adminToken).status == 200)
        #expect(try worker.runOnce() == 1)
        #expect(try outbox.statistics(now: clock.nowMillis()).queued == 0)
    }

    /// An item queued without its destination is claimed; when its handler then names a paused
    /// destination, it goes back unattempted, due when the pause ends, and remembers where it goes.
    @Test(arguments: TestDatabase.kinds)
    func anItemLearntToGoToAPausedDestinationWaitsUnattempted(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock()
        let server = try TestServer(kind, clock: clock)
        defer { server.stop() }
        let app = try server.createApp().id
        let outbox = server.gatehouse.store.outbox
        let host = "smtp.example.com:25"
        _ = try outbox.enqueue(item("known", app: app, destination: host), now: clock.nowMillis())
        let policy = OutboxBreakerPolicy(maxPauseSeconds: 600)
        for _ in 0..<5 {
            let claimed = try #require(try outbox.claimNext(
                kind: ScriptedHandler.testKind, after: nil, excluding: [], leaseMillis: 60_000, node: "n", now: clock.nowMillis()))
            try outbox.markRetry(claimed.id, node: "n", nextAttemptAt: clock.nowMillis(), error: "451", now: clock.nowMillis(), destination: host, breaker: policy)
        }
        let until = try #require(try outbox.pausedUntil(app: AppID(unchecked: app), destination: host, now: clock.nowMillis()))
        #expect(until == clock.nowMillis() + 30_000)
        _ = try outbox.enqueue(item("unknown", app: app), now: clock.nowMillis())
        let handler = ScriptedHandler(destination: host)
        let worker = worker(server, handler, node: "n", clock: clock)
        #expect(try worker.runOnce() == 0)
        #expect(worker.postponed.load(ordering: .relaxed) == 1 && handler.seen.withLock { $0.isEmpty })
        let row = try server.gatehouse.database.query("SELECT attempts, destination, next_attempt_at, lease_until FROM outbox WHERE idempotency_key = 'unknown'")[0]
        #expect(try row.int64("attempts") == 0 && row.optionalString("destination") == host && row.int64("next_attempt_at") == until)
        #expect(try row.optionalInt64("lease_until") == nil)
        clock.advance(seconds: 31)
        #expect(try worker.runOnce() == 2, "both, once the pause is over")
    }

    /// A lane leases one item at a time, just before delivering it: while a slow first delivery
    /// runs, the second item stays free (due, unleased), so no lease runs out before its delivery
    /// starts and another node may take it meanwhile.
    @Test(arguments: TestDatabase.kinds)
    func aLaneLeasesOneItemAtATime(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock()
        let server = try TestServer(kind, clock: clock)
        defer { server.stop() }
        let outbox = server.gatehouse.store.outbox
        for i in 0..<2 { _ = try outbox.enqueue(item("leased-\(i)"), now: clock.nowMillis()) }
        let handler = ScriptedHandler(clock: clock, takesSeconds: 30)
        let worker = worker(server, handler, node: "one-lane", clock: clock, lanes: 1)
        #expect(try worker.runOnce() == 1)
        #expect(handler.seen.withLock { $0.count } == 1)
        let statistics = try outbox.statistics(now: clock.nowMillis())
        #expect(statistics.queued == 1 && statistics.inFlight == 0, "never leased, due at once")
        #expect(try worker.runOnce() == 1, "the next claim takes it")
    }

    @Test(arguments: TestDatabase.kinds)
    func anItemIsQueuedOnceAndLeasedToOneNodeAtATime(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let outbox = server.gatehouse.store.outbox
        let now: Int64 = 1_800_000_000_000
        #expect(try outbox.enqueue(item("once"), now: now))
        #expect(try !outbox.enqueue(item("once"), now: now), "the same idempotency key queues nothing more")
        let first = try outbox.claim(kinds: [ScriptedHandler.testKind], limit: 10, leaseMillis: 60_000, node: "a", now: now)
        #expect(first.map(\.idempotencyKey) == ["once"])
        #expect(try outbox.claim(kinds: [ScriptedHandler.testKind], limit: 10, leaseMillis: 60_000, node: "b", now: now + 1000).isEmpty, "leased to a")
        #expect(try outbox.claim(kinds: [OutboxKind.mail], limit: 10, leaseMillis: 60_000, node: "b", now: now + 61_000).isEmpty, "another kind")
        #expect(try outbox.statistics(now: now + 1000) == OutboxStatistics(queued: 1, inFlight: 1, dead: 0, oldestDueAgeMillis: 0))
        // Node a died holding it: when its lease ends, node b takes it, and a late word from a changes nothing.
        let retaken = try outbox.claim(kinds: [ScriptedHandler.testKind], limit: 10, leaseMillis: 60_000, node: "b", now: now + 61_000)
        #expect(retaken.map(\.id) == first.map(\.id))
        try outbox.markRetry(first[0].id, node: "a", nextAttemptAt: now + 999_000, error: "late", now: now + 62_000)
        try outbox.markDelivered(first[0].id, node: "b", now: now + 62_000)
        #expect(try outbox.statistics(now: now + 62_000) == OutboxStatistics(queued: 0, inFlight: 0, dead: 0, oldestDueAgeMillis: 0))
        #expect(try outbox.claim(kinds: [ScriptedHandler.testKind], limit: 10, leaseMillis: 60_000, node: "a", now: now + 10_000_000).isEmpty)
    }

    @Test(arguments: TestDatabase.kinds)
    func failuresBackOffFrom5SecondsAndAreDeadLetteredAfter72Hours(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock()
        let server = try TestServer(kind, clock: clock)
        defer { server.stop() }
        let app = try server.createApp()
        let handler = ScriptedHandler(.retry(reason: "smtp said 451"))
        let worker = worker(server, handler, node: "n", clock: clock)
        let outbox = server.gatehouse.store.outbox
        #expect(try outbox.enqueue(item("flaky", app: app.id, sealed: true), now: clock.nowMillis()))
        func nextAttemptIn() throws -> Int64 {
            try server.gatehouse.database.query("SELECT next_attempt_at FROM outbox")[0].int64("next_attempt_at") - clock.nowMillis()
        }
        var waits: [Int64] = []
        for _ in 0..<9 {
            #expect(try worker.runOnce() == 1)
            #expect(try worker.runOnce() == 0, "not due again yet")
            waits.append(try nextAttemptIn())
            clock.advance(seconds: waits.last! / 1000)
        }
        // 5 s doubling, at most GATEHOUSE_OUTBOX_MAX_BACKOFF_SECONDS (600 here) apart.
        #expect(waits == [5_000, 10_000, 20_000, 40_000, 80_000, 160_000, 320_000, 600_000, 600_000])
        #expect(try outbox.statistics(now: clock.nowMillis()).oldestDueAgeMillis == 0)
        // 72 hours after it was queued, the next failure dead-letters it: an event of its app and a metric, never a silent drop.
        clock.advance(seconds: 72 * 3600)
        #expect(try worker.runOnce() == 1)
        #expect(try outbox.statistics(now: clock.nowMillis()).dead == 1)
        #expect(worker.deadLettered.load(ordering: .relaxed) == 1)
        let row = try server.gatehouse.database.query("SELECT attempts, payload, last_error FROM outbox")[0]
        #expect(try row.int64("attempts") == 10)
        #expect(try !row.string("payload").isEmpty, "a sealed payload is kept once dead, to be retried")
        #expect(try row.optionalString("last_error")?.contains("451") == true)
        // The maintenance job erases it 30 days after the item died, not before; the row stays.
        func payload() throws -> String { try server.gatehouse.database.query("SELECT payload FROM outbox")[0].string("payload") }
        let died = clock.nowMillis()
        #expect(try server.gatehouse.maintenance.run(now: died + 30 * 86_400_000 - 1)?.deleted[.deadOutboxPayloads] == 0)
        #expect(try !payload().isEmpty)
        #expect(try server.gatehouse.maintenance.run(now: died + 30 * 86_400_000 + 1)?.deleted[.deadOutboxPayloads] == 1)
        #expect(try payload() == "" && outbox.statistics(now: clock.nowMillis()).dead == 1)
        let events = try server.gatehouse.database.query("SELECT app_id, data FROM events WHERE type = 'outbox.dead_lettered'")
        #expect(events.count == 1)
        #expect(try events.first?.string("app_id") == app.id)
        #expect(handler.seen.withLock { $0.count } == 10)
        let metrics = try server.request("GET", "/metrics", bearer: TestServer.adminToken).text
        #expect(metrics.contains("gatehouse_outbox_dead 1.0"))
    }

    @Test(arguments: TestDatabase.kinds)
    func twoNodesDeliverEveryItemExactlyOnce(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let other = try TestServer(anotherNodeOf: server)
        defer { other.stop() }
        let outbox = server.gatehouse.store.outbox
        let count = 200
        for i in 0..<count { _ = try outbox.enqueue(item("item-\(i)"), now: SystemClock().nowMillis()) }
        let handlers = [ScriptedHandler(), ScriptedHandler()]
        let workers = [worker(server, handlers[0], node: "first", clock: SystemClock()), worker(other, handlers[1], node: "second", clock: SystemClock())]
        DispatchQueue.concurrentPerform(iterations: 2) { i in
            let deadline = Date().addingTimeInterval(60)
            while Date() < deadline, (try? outbox.statistics(now: SystemClock().nowMillis()).queued) != 0 {
                _ = try? workers[i].runOnce()
            }
        }
        let delivered = handlers.flatMap { handler in handler.seen.withLock { $0 } }
        #expect(delivered.count == count)
        #expect(Set(delivered).count == count, "no item twice")
        #expect(try outbox.statistics(now: SystemClock().nowMillis()).queued == 0)
    }

    @Test(arguments: TestDatabase.kinds)
    func stoppingFinishesTheDeliveryUnderWayAndGivesTheRestBack(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let outbox = server.gatehouse.store.outbox
        // More than one claim (16) holds, and than the lanes (8) deliver at once.
        for i in 0..<20 { _ = try outbox.enqueue(item("slow-\(i)"), now: SystemClock().nowMillis()) }
        let handler = ScriptedHandler(pause: 0.1)
        let worker = worker(server, handler, node: "stopping", clock: SystemClock())
        worker.start()
        let deadline = Date().addingTimeInterval(10)
        while handler.seen.withLock({ $0.isEmpty }) && Date() < deadline { usleep(5_000) }
        worker.stop()
        let delivered = handler.seen.withLock { $0.count }
        #expect(delivered >= 1 && delivered < 20)
        let statistics = try outbox.statistics(now: SystemClock().nowMillis())
        #expect(statistics.queued == 20 - delivered)
        #expect(statistics.inFlight == 0, "nothing stays leased to a stopped worker")
    }
}
