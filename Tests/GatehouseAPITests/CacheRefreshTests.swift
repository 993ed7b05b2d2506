import Foundation
import GatehouseCore
import GatehouseTesting
import Testing

/// ADR 0022: the node's cache thread checks the apps in use before a request would have to.
@Suite struct CacheRefreshTests {
    @Test(arguments: TestDatabase.kinds)
    func theCacheThreadChecksTheAppsInUseAheadAndLeavesIdleOnesAlone(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock()
        let server = try TestServer(kind, clock: clock)
        defer { server.stop() }
        let other = try TestServer(anotherNodeOf: server, clock: clock)
        defer { other.stop() }
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
        let before = directory.cached(id: AppID(unchecked: idle.id))
        clock.advance(seconds: 4)
        let deadline = Date().addingTimeInterval(5)
        while directory.cached(id: AppID(unchecked: idle.id)) === before, Date() < deadline { usleep(20_000) }
        #expect(directory.cached(id: AppID(unchecked: idle.id)) !== before, "checked again, into a new entry")
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
        // Past 5 s a request checks it itself.
        clock.advance(seconds: 1)
        #expect(try server.request("GET", "/v1/app", appKey: idle.appKey).data?["name"] == "Idle 2")
    }
}
