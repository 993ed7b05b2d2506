import Foundation
import GatehouseTesting
import Synchronization
import Testing

@testable import GatehouseCore

/// ADR 0022: the node's cache thread checks the apps in use before a request would have to.
@Suite struct CacheRefreshTests {
    /// Two nodes on one database, on one clock that moves by hand.
    private static func twoNodes(_ kind: TestDatabaseKind) throws -> (ManualClock, TestServer, TestServer) {
        let clock = ManualClock()
        let server = try TestServer(kind, clock: clock)
        do {
            return (clock, server, try TestServer(anotherNodeOf: server, clock: clock))
        } catch {
            server.stop()
            throw error
        }
    }

    /// A request polls only when no poll has ended for 1.5 intervals: one that took long because
    /// the database answered late is not followed at once by another on a request (the nodes bench
    /// saw requests wait 5 s for PostgreSQL that way).
    @Test func aRequestPollsOnlyWhenNoPollEndedWithinOneAndAHalfIntervals() {
        let clock = ManualClock()
        let schedule = PollSchedule(everyMillis: 1000, clock: clock)
        let polls = Mutex(0)
        func poll(taking seconds: Int64 = 0) -> () -> Void { { polls.withLock { $0 += 1 }; clock.advance(seconds: seconds) } }
        schedule.runIfOverdue(now: clock.nowMillis(), poll())
        #expect(polls.withLock { $0 } == 1, "never polled: the request polls")
        // The cache thread's poll takes 5 s: it began long ago, but it has just ended.
        clock.advance(seconds: 1)
        schedule.runIfDue(now: clock.nowMillis(), poll(taking: 5))
        #expect(polls.withLock { $0 } == 2)
        schedule.runIfOverdue(now: clock.nowMillis(), poll())
        #expect(polls.withLock { $0 } == 2, "a poll ended just now: the request goes on with it")
        clock.advance(seconds: 1)
        schedule.runIfOverdue(now: clock.nowMillis(), poll())
        #expect(polls.withLock { $0 } == 2, "1 s since it ended")
        clock.advance(seconds: 1)
        schedule.runIfOverdue(now: clock.nowMillis(), poll())
        #expect(polls.withLock { $0 } == 3, "2 s since it ended: the thread is late, the request polls")
        // One at a time: while a poll is under way (and another would be due), none starts.
        clock.advance(seconds: 2)
        schedule.runIfOverdue(now: clock.nowMillis()) {
            polls.withLock { $0 += 1 }
            clock.advance(seconds: 2)
            schedule.runIfOverdue(now: clock.nowMillis(), poll())
            schedule.runIfDue(now: clock.nowMillis(), poll())
        }
        #expect(polls.withLock { $0 } == 4)
    }

    @Test(arguments: TestDatabase.kinds)
    func theCacheThreadChecksTheAppsInUseAheadAndLeavesIdleOnesAlone(_ kind: TestDatabaseKind) throws {
        let (clock, server, other) = try Self.twoNodes(kind)
        defer { other.stop(); server.stop() }
        let used = try server.createApp(["name": "Used"])
        let idle = try server.createApp(["name": "Idle"])
        let directory = server.gatehouse.directory
        func cachedName(_ app: TestServer.CreatedApp) -> String? { directory.cached(id: AppID(unchecked: app.id))?.settings.name }
        func waitFor(_ app: TestServer.CreatedApp, named name: String) {
            let deadline = Date().addingTimeInterval(5)
            while cachedName(app) != name, Date() < deadline { usleep(20_000) }
        }
        // Both cached on the first node and used; 4 s on, the cache thread checks both.
        for app in [used, idle] { #expect(try server.request("GET", "/v1/app", appKey: app.appKey).status == 200) }
        for app in [used, idle] { #expect(try server.request("GET", "/v1/app", appKey: app.appKey).status == 200) }
        let loadedAt = try #require(directory.cached(id: AppID(unchecked: idle.id))?.checkedAt)
        clock.advance(seconds: 4)
        let deadline = Date().addingTimeInterval(5)
        while directory.cached(id: AppID(unchecked: idle.id))?.checkedAt == loadedAt, Date() < deadline { usleep(20_000) }
        #expect(directory.cached(id: AppID(unchecked: idle.id))?.checkedAt == loadedAt + 4_000, "checked again by the thread")
        // From now on only `used` is asked for. The other node renames both: the first learns
        // of it only from the database.
        #expect(try server.request("GET", "/v1/app", appKey: used.appKey).data?["name"] == "Used")
        #expect(try other.request("PATCH", "/v1/admin/app", bearer: used.secretKey, json: ["name": "Used 2"]).status == 200)
        #expect(try other.request("PATCH", "/v1/admin/app", bearer: idle.secretKey, json: ["name": "Idle 2"]).status == 200)

        // 4 s on, a fifth of the 5 s early, the cache thread's next turn (every 250 ms) checks the
        // app in use, so no request at 5 s will have to.
        clock.advance(seconds: 4)
        waitFor(used, named: "Used 2")
        #expect(cachedName(used) == "Used 2")
        // The idle app was left alone: still the entry it was, and a request still trusts it.
        usleep(300_000)
        #expect(cachedName(idle) == "Idle")
        #expect(try server.request("GET", "/v1/app", appKey: idle.appKey).data?["name"] == "Idle")
        // Past 5 s a request checks it itself (the threads stopped: this request, not a thread, must see it).
        server.gatehouse.stopBackgroundWork()
        clock.advance(seconds: 1)
        #expect(try server.request("GET", "/v1/app", appKey: idle.appKey).data?["name"] == "Idle 2")
    }

    @Test(arguments: TestDatabase.kinds)
    func whileOneRequestChecksAStaleAppTheOthersUseItForAtMostOneMoreInterval(_ kind: TestDatabaseKind) throws {
        let (clock, server, other) = try Self.twoNodes(kind)
        defer { other.stop(); server.stop() }
        server.gatehouse.stopBackgroundWork()  // only requests check, here
        let app = try server.createApp(["name": "Before"])
        #expect(try server.request("GET", "/v1/app", appKey: app.appKey).data?["name"] == "Before")
        #expect(try other.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["name": "After"]).status == 200)
        // A request is asking the database for this entry (as one stuck on a slow database would).
        let entry = try #require(server.gatehouse.directory.cached(id: AppID(unchecked: app.id)))
        entry.revalidating.store(true, ordering: .relaxed)
        clock.advance(seconds: 6)
        #expect(try server.request("GET", "/v1/app", appKey: app.appKey).data?["name"] == "Before", "past 5 s, within 10: the others go on with it")
        clock.advance(seconds: 4)
        #expect(try server.request("GET", "/v1/app", appKey: app.appKey).data?["name"] == "After", "10 s old: a request asks itself")
    }

    /// A signed-up user whose name is then changed behind the node's back: straight in the
    /// database, without `changed_at`, so no poll ever reports it and only an entry's age can.
    private static func accountChangedUnseen(_ server: TestServer) throws -> (me: @Sendable () throws -> TestResponse, name: JSON?) {
        let app = try server.createApp(["name": "Accounts"])
        let session = try server.signUp(app)
        let token = try #require(session["access_token"]?.stringValue)
        let user = try #require(session["user"]?["id"]?.stringValue)
        let me: @Sendable () throws -> TestResponse = { try server.request("GET", "/v1/me", appKey: app.appKey, bearer: token) }
        // Its sign-up is dated far back, so that the polls' overlap (5 s by the database's clock,
        // which this test's clock does not move) does not find it changed and drop it.
        try server.gatehouse.database.execute("UPDATE users SET changed_at = 0 WHERE id = \(user)")
        let first = try me()
        try server.gatehouse.database.execute("UPDATE users SET first_name = \("Grace") WHERE id = \(user)")
        return (me, first.data?["first_name"])
    }

    /// docs/adr/0007: an entry nothing changed is read again once it is 60 s old.
    @Test(arguments: TestDatabase.kinds)
    func anAccountIsReadAgainOnceItIsSixtySecondsOld(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock()
        let server = try TestServer(kind, clock: clock)
        defer { server.stop() }
        server.gatehouse.stopBackgroundWork()  // polls run on requests only, when due
        let (me, before) = try Self.accountChangedUnseen(server)
        #expect(before == .null)
        clock.advance(seconds: 59)
        #expect(try me().data?["first_name"] == .null, "59 s old: the entry")
        clock.advance(seconds: 2)
        #expect(try me().data?["first_name"] == "Grace", "61 s old: read again")
    }

    /// While one request reads an old entry again (here, held up by a lock on `users`), the others
    /// use the entry for at most 5 s more; and a poll held up the same way is slow, not failing,
    /// so it does not stop the node from using its entries. PostgreSQL only: an SQLite reader
    /// cannot be held up.
    @Test func whileARequestReadsAnOldAccountAgainTheOthersUseItForAtMostFiveSecondsMore() throws {
        guard TestDatabase.kinds.contains(.postgres) else { return }
        let clock = ManualClock()
        // Threads and connections enough for the requests left waiting, the lock's holder and the
        // test's own look at who waits. The statements waiting for the lock must not be cancelled
        // at the default 5 s timeout before the test has seen them: on a loaded CI machine the
        // second request reached the lock more than 5 s after the first, whose poll was cancelled
        // and so counted as failing, which is another case than the one tested here.
        let server = try TestServer(.postgres, clock: clock) {
            $0.httpThreads = 8
            $0.databaseStatementTimeoutMillis = 120_000
        }
        defer { server.stop() }
        server.gatehouse.stopBackgroundWork()
        let (me, _) = try Self.accountChangedUnseen(server)

        // Another connection locks `users`: every read of it (the changed-accounts poll, an
        // account's reload) waits until it lets go.
        let locked = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let holder = Thread {
            _ = try? server.gatehouse.database.transaction { db in
                try db.execute("LOCK TABLE users IN ACCESS EXCLUSIVE MODE")
                locked.signal()
                release.wait()
            }
        }
        holder.start()
        locked.wait()
        var released = false
        defer { if !released { release.signal() } }

        let answers = Mutex<[Int: JSON?]>([:])
        // Each request from a thread of its own, so that none can hold up the test (which must let go of the lock).
        func inBackground(_ index: Int) -> DispatchSemaphore {
            let done = DispatchSemaphore(value: 0)
            Thread {
                let name = try? me().data?["first_name"]
                answers.withLock { $0[index] = name }
                done.signal()
            }.start()
            return done
        }
        // The deadlines below are far from what a passing run takes, for loaded machines: a
        // request held by the lock is held until the test lets go, so no wait can pass by chance.
        func answered(_ index: Int) -> JSON?? {
            inBackground(index).wait(timeout: .now() + 30) == .success ? answers.withLock { $0[index] } : nil
        }
        /// Waits until `count` statements of this database wait for a lock (at most 60 s).
        func waitingForTheLock(_ count: Int) throws -> Bool {
            let deadline = Date().addingTimeInterval(60)
            repeat {
                let waiting = try server.gatehouse.database.query(
                    "SELECT count(*) AS waiting FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
                ).first?.int64("waiting")
                if waiting == Int64(count) { return true }
                usleep(20_000)
            } while Date() < deadline
            return false
        }

        // 61 s on: one request runs the overdue poll and another reads the entry again; both wait.
        // The second is sent once the first waits: a worker in a handler takes no new connection,
        // but one that took both before either's request arrived would serve them one after the
        // other, and the second would wait behind the first instead of for the lock (as CI saw).
        clock.advance(seconds: 61)
        let first = inBackground(0)
        #expect(try waitingForTheLock(1))
        let waiting = [first, inBackground(1)]
        #expect(try waitingForTheLock(2))
        // The others answer at once from the entry: the poll is slow, not failing.
        #expect(answered(2) == .some(.null))
        clock.advance(seconds: 3)
        #expect(answered(3) == .some(.null), "64 s old, within 5 s of its reload")
        // Past 65 s a request no longer takes the entry: it reads the account itself, and waits too.
        clock.advance(seconds: 2)
        let late = inBackground(4)
        #expect(try waitingForTheLock(3), "66 s old: read from the database")

        release.signal()
        released = true
        for done in waiting + [late] { #expect(done.wait(timeout: .now() + 10) == .success) }
        #expect(answers.withLock { $0[4] } == .some("Grace"))
        #expect(try me().data?["first_name"] == "Grace")
    }
}
