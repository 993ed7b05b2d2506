import Foundation
import GatehouseCore
import GatehouseTesting
import Testing

/// API.md, "Tenants share one server safely": switching a tenant off. A disabled app's key,
/// secret keys, tokens, JWKS and metadata are refused on every node within the app cache's 5 s;
/// nothing is deleted, and enabling it restores all. On both databases.
@Suite("Switching a tenant off")
struct TenantSwitchTests {
    static let platform = TestServer.adminToken

    @Test(arguments: TestDatabase.kinds)
    func aDisabledAppIsRefusedEverywhereAndEnablingRestoresAll(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(["name": "Shop"])
        let neighbour = try server.createApp(["name": "Blog"])
        let session = try server.signUp(app)
        let access = try #require(session["access_token"]?.stringValue)
        let refresh = try #require(session["refresh_token"])
        func me() throws -> TestResponse { try server.request("GET", "/v1/me", appKey: app.appKey, bearer: access) }
        let uploaded = try server.request(
            "POST", "/v1/files", appKey: app.appKey, bearer: access, headers: [("Content-Type", "multipart/form-data; boundary=\(FilesAPITests.boundary)")],
            body: FilesAPITests.multipart(fields: [("visibility", "public")], files: [("file", "a.png", TinyImages.png())]))
        let fileURL = try #require(uploaded.data?["url"]?.stringValue, "\(uploaded.text)")
        let published = [
            "/v1/apps/\(app.id)/jwks.json", "/v1/apps/\(app.id)/.well-known/openid-configuration",
            "/.well-known/oauth-authorization-server/v1/apps/\(app.id)", String(fileURL.dropFirst(TestServer.publicURL.count)),
        ]
        for path in published { #expect(try server.request("GET", path).status == 200, "\(path)") }

        // Only the platform token switches an app, and only an app that exists.
        #expect(try server.request("POST", "/v1/admin/apps/\(app.id)/disable", bearer: app.secretKey).problemCode == "auth/invalid-token")
        #expect(try server.request("POST", "/v1/admin/apps/\(app.id)/disable").status == 401)
        for unknown in ["app_aaaaaaaaaaaaaaaaaaaaaaaa", "nonsense"] {
            let missing = try server.request("POST", "/v1/admin/apps/\(unknown)/disable", bearer: Self.platform)
            #expect(missing.status == 404 && missing.problemCode == "request/not-found", "\(unknown)")
        }
        #expect(try me().status == 200)

        let disabled = try server.request("POST", "/v1/admin/apps/\(app.id)/disable", bearer: Self.platform)
        #expect(disabled.status == 200, "\(disabled.text)")
        #expect(disabled.data?["id"]?.stringValue == app.id && disabled.data?["name"] == "Shop" && disabled.data?["disabled"] == true)
        #expect(disabled.data?["app_key"]?.stringValue == app.appKey)

        let key = try server.request("GET", "/v1/app", appKey: app.appKey)
        #expect(key.status == 401 && key.problemCode == "app/invalid-key")
        #expect(try server.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"]).problemCode == "app/invalid-key")
        #expect(try me().status == 401, "its tokens are refused")
        #expect(try server.request("POST", "/v1/auth/refresh", appKey: app.appKey, json: ["refresh_token": refresh]).status == 401)
        let admin = try server.request("GET", "/v1/admin/app", bearer: app.secretKey)
        #expect(admin.status == 401 && admin.problemCode == "auth/invalid-token")
        #expect(try server.request("GET", "/v1/admin/users", bearer: app.secretKey).status == 401)
        for path in published {
            let answer = try server.request("GET", path)
            #expect(answer.status == 404 && answer.problemCode == "request/not-found", "\(path)")
        }
        // The neighbour is untouched.
        #expect(try server.request("GET", "/v1/app", appKey: neighbour.appKey).status == 200)
        #expect(try server.request("GET", "/v1/apps/\(neighbour.id)/jwks.json").status == 200)
        // Disabling again changes nothing.
        #expect(try server.request("POST", "/v1/admin/apps/\(app.id)/disable", bearer: Self.platform).data?["disabled"] == true)

        let listed = try server.request("GET", "/v1/admin/apps", bearer: Self.platform)
        #expect(listed.status == 200)
        let rows = try #require(listed.json?["data"]?.arrayValue)
        #expect(rows.map { $0["id"]?.stringValue ?? "" } == [app.id, neighbour.id])
        #expect(rows.map { $0["disabled"] } == [true, false])
        #expect(listed.json?["next_cursor"] == .null)
        #expect(!listed.text.contains(app.secretKey))
        #expect(try server.request("GET", "/v1/admin/apps", bearer: app.secretKey).status == 401)

        // Nothing was deleted: enabling restores the key, the secret key, the very same tokens and the keys.
        let enabled = try server.request("POST", "/v1/admin/apps/\(app.id)/enable", bearer: Self.platform)
        #expect(enabled.status == 200 && enabled.data?["disabled"] == false && enabled.data?["id"]?.stringValue == app.id)
        #expect(try me().data?["email"] == "ada@example.com")
        #expect(try server.request("POST", "/v1/auth/refresh", appKey: app.appKey, json: ["refresh_token": refresh]).status == 200)
        for path in published { #expect(try server.request("GET", path).status == 200, "\(path)") }
        let events = try server.request("GET", "/v1/admin/events", bearer: app.secretKey).json?["data"]?.arrayValue ?? []
        #expect(events.filter { $0["type"] == "app.disabled" }.count == 1 && events.filter { $0["type"] == "app.enabled" }.count == 1)
        #expect(try server.request("GET", "/v1/admin/users", bearer: app.secretKey).json?["data"]?.arrayValue?.count == 1)
    }

    @Test(arguments: TestDatabase.kinds)
    func theListOfAppsIsPaged(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let apps = try (0..<3).map { try server.createApp(["name": .string("App \($0)")]) }
        #expect(try server.request("POST", "/v1/admin/apps/\(apps[1].id)/disable", bearer: Self.platform).status == 200)
        var seen: [String: JSON] = [:]
        var path = "/v1/admin/apps?limit=2"
        var pages = 0
        while pages < 5 {
            let page = try server.request("GET", path, bearer: Self.platform)
            #expect(page.status == 200)
            pages += 1
            for row in page.json?["data"]?.arrayValue ?? [] { seen[row["id"]?.stringValue ?? ""] = row["disabled"] }
            guard let cursor = page.json?["next_cursor"]?.stringValue else { break }
            path = "/v1/admin/apps?limit=2&cursor=\(cursor)"
        }
        #expect(pages == 2)
        #expect(seen == [apps[0].id: false, apps[1].id: true, apps[2].id: false])
        #expect(try server.request("GET", "/v1/admin/apps?limit=0", bearer: Self.platform).problemCode == "request/validation-failed")
    }

    /// Node B cached the app; a disable through node A reaches it within the cache's 5 s (its
    /// secret keys at once: they are looked up in the database on every request).
    @Test(arguments: TestDatabase.kinds)
    func aDisableOnOneNodeIsSeenByTheOtherWithinFiveSeconds(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock()
        let first = try TestServer(kind, clock: clock)
        defer { first.stop() }
        let second = try TestServer(anotherNodeOf: first, clock: clock)
        defer { second.stop() }
        let app = try first.createApp(["name": "Shop"])
        #expect(try second.request("GET", "/v1/app", appKey: app.appKey).status == 200)
        #expect(try second.request("GET", "/v1/apps/\(app.id)/jwks.json").status == 200)

        #expect(try first.request("POST", "/v1/admin/apps/\(app.id)/disable", bearer: Self.platform).status == 200)
        #expect(try second.request("GET", "/v1/admin/app", bearer: app.secretKey).status == 401, "at once")
        clock.advance(seconds: 5)
        #expect(try second.request("GET", "/v1/app", appKey: app.appKey).problemCode == "app/invalid-key")
        #expect(try second.request("GET", "/v1/apps/\(app.id)/jwks.json").status == 404)

        #expect(try first.request("POST", "/v1/admin/apps/\(app.id)/enable", bearer: Self.platform).status == 200)
        #expect(try second.request("GET", "/v1/admin/app", bearer: app.secretKey).status == 200)
        clock.advance(seconds: 5)
        #expect(try second.request("GET", "/v1/app", appKey: app.appKey).status == 200)
        #expect(try second.request("GET", "/v1/apps/\(app.id)/jwks.json").status == 200)
    }

    /// Disabled is not a setting: a Tenants file applied again, changed or not, at a start or by
    /// `apps apply`, leaves the app disabled.
    @Test(arguments: TestDatabase.kinds)
    func aTenantsFileAppliedAgainDoesNotEnableADisabledApp(_ kind: TestDatabaseKind) throws {
        let folder = NSTemporaryDirectory() + "gatehouse-tenant-switch-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        func write(name: String) throws {
            let json: JSON = ["app_key": "pk_tenant_switch_0123456789", "name": .string(name)]
            try Data(json.serialized()).write(to: URL(fileURLWithPath: folder + "/shop.json"))
        }
        try write(name: "Shop")
        let server = try TestServer(kind) { $0.tenantsDirectory = folder }
        defer { server.stop() }
        let id = try #require(try server.request("GET", "/v1/app", appKey: "pk_tenant_switch_0123456789").data?["id"]?.stringValue)
        #expect(try server.request("POST", "/v1/admin/apps/\(id)/disable", bearer: Self.platform).status == 200)

        #expect(try server.gatehouse.apps.applyTenants(folder: folder, environment: [:]) == ["shop.json: unchanged \(id)"])
        try write(name: "Shop 2")
        #expect(try server.gatehouse.apps.applyTenants(folder: folder, environment: [:]) == ["shop.json: updated \(id)"])
        // Another node starting applies the folder too.
        try write(name: "Shop 3")
        let restarted = try TestServer(anotherNodeOf: server) { $0.tenantsDirectory = folder }
        defer { restarted.stop() }
        for node in [server, restarted] {
            #expect(try node.request("GET", "/v1/app", appKey: "pk_tenant_switch_0123456789").problemCode == "app/invalid-key")
            let listed = try node.request("GET", "/v1/admin/apps", bearer: Self.platform).json?["data"]?.arrayValue?.first
            #expect(listed?["disabled"] == true)
        }
        #expect(try restarted.request("GET", "/v1/admin/apps", bearer: Self.platform).json?["data"]?.arrayValue?.first?["name"] == "Shop 3", "the file was applied")
        #expect(try server.request("POST", "/v1/admin/apps/\(id)/enable", bearer: Self.platform).status == 200)
        #expect(try server.request("GET", "/v1/app", appKey: "pk_tenant_switch_0123456789").data?["name"] == "Shop 3")
    }
}

extension TenantSwitchTests {
    /// A web flow begun before the app was switched off ends at its callback with
    /// `error=access_denied`: Apple is not asked to redeem the code, no login code is issued.
    @Test(arguments: TestDatabase.kinds)
    func aWebFlowUnderWayWhenTheAppIsDisabledEndsWithoutAskingApple(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind)
        defer { world.stop() }
        let flows = AppleWebFlowTests()
        let started = try #require(try flows.start(world).1)
        #expect(try world.server.request("POST", "/v1/admin/apps/\(world.app.id)/disable", bearer: Self.platform).status == 200)
        let code = world.apple.issueCode(
            for: FakeAppleUser(sub: "001.apple.user", email: "pat@example.com", nonce: started.nonce), clientID: ProviderWorld.servicesID,
            redirectURI: "\(TestServer.publicURL)/v1/auth/oauth/apple/callback")
        let back = try flows.callback(world, [("state", started.state), ("code", code)], cookie: started.cookie)
        let location = try #require(back.header("Location"))
        #expect(location.hasPrefix(ProviderWorld.redirect) && location.contains("error=access_denied") && !location.contains("login_code"), "\(location)")
        #expect(world.apple.tokenCalls.isEmpty)
    }
}
