import Foundation
import GatehouseTesting
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
}
