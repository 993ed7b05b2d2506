import Foundation
import GatehouseCore
import GatehouseKit
import GatehouseSQL
import GatehouseTesting
import Testing

/// The session's life: refreshed once however many calls race, ended when the server says so,
/// kept in a file between launches.
@Suite("GatehouseKit sessions")
struct SessionTests {
    /// 50 calls at once with an expired access token: exactly one `POST /v1/auth/refresh` reaches
    /// the server, as the server counts it (its per-route request metric; the session's
    /// refresh-token rows agree: one rotation, no reuse, the session alive).
    /// `clientSeesExpiry`: the client's clock knows the token expired, so the 50 calls join one
    /// refresh before calling (without the single flight, 50 refreshes go out); or it does not,
    /// so every call is answered `auth/token-expired` first (the server counts the 401s) and each
    /// then refreshes only if no refresh has replaced its token yet (without that check, several
    /// refreshes go out).
    @Test(arguments: TestDatabase.kinds, [true, false])
    func fiftyConcurrentCallsWithAnExpiredAccessTokenSendOneRefresh(_ kind: TestDatabaseKind, clientSeesExpiry: Bool) async throws {
        let world = try KitWorld(kind)
        defer { world.stop() }
        let offset = Locked<TimeInterval>(0)
        let store = MemorySessionStore()
        // 50 connections, so that the 50 calls really are in flight together.
        let client = world.client(store: store, connections: 50, now: { Date().addingTimeInterval(offset.value) })
        let created = try await client.signUp(email: "race@example.com", password: "correct horse battery")
        let sessionID = try #require(try await client.getSessions().first(where: \.current)?.id)
        let oldAccess = try #require(try store.load()?.accessToken)
        let oldRefresh = try #require(try store.load()?.refreshToken)

        world.clock.advance(seconds: 901)  // the app's access tokens live 900 s
        if clientSeesExpiry { offset.set(901) }
        #expect(try world.server.request("GET", "/v1/me", appKey: world.app.appKey, bearer: oldAccess).problemCode == "auth/token-expired")
        let refreshesBefore = try world.refreshRequestsServed()
        let rejectedBefore = try world.metrics()["gatehouse_http_requests_total{method=\"GET\",route=\"/v1/me\",status=\"401\"}"] ?? 0
        let reuseBefore = try world.metrics()["gatehouse_refresh_reuse_total"] ?? 0

        let ids = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<50 { group.addTask { try await client.getUser().id } }
            var ids: [String] = []
            for try await id in group { ids.append(id) }
            return ids
        }
        #expect(ids.count == 50 && Set(ids) == [created.user.id])

        #expect(try world.refreshRequestsServed() - refreshesBefore == 1, "one refresh reached the server")
        let rejected = (try world.metrics()["gatehouse_http_requests_total{method=\"GET\",route=\"/v1/me\",status=\"401\"}"] ?? 0) - rejectedBefore
        if clientSeesExpiry {
            #expect(rejected == 0, "the client refreshed before calling")
        } else {
            #expect(rejected >= 10, "many calls were refused together and awaited the same refresh (\(rejected))")
        }
        #expect((try world.metrics()["gatehouse_refresh_reuse_total"] ?? 0) == reuseBefore)
        let rows = try world.server.gatehouse.database.query("SELECT rotated_at FROM refresh_tokens WHERE session_id = \(sessionID)")
        #expect(rows.count == 2, "the first token and the one it was rotated to")
        #expect(try rows.filter { try $0.optionalInt64("rotated_at") == nil }.count == 1)
        let ended = try world.server.gatehouse.database.query("SELECT ended_at FROM sessions WHERE id = \(sessionID)")
        #expect(try ended.first?.optionalInt64("ended_at") == nil, "the session is alive")
        let stored = try #require(try store.load())
        #expect(stored.accessToken != oldAccess && stored.refreshToken != oldRefresh)
        #expect(try world.server.request("GET", "/v1/me", appKey: world.app.appKey, bearer: stored.accessToken).status == 200)
    }

    /// Before expiry, by the refresh margin, the client refreshes first; well before it, not.
    @Test
    func theAccessTokenIsRefreshedShortlyBeforeItExpires() async throws {
        let world = try KitWorld()
        defer { world.stop() }
        let offset = Locked<TimeInterval>(0)
        let store = MemorySessionStore()
        let client = world.client(store: store, now: { Date().addingTimeInterval(offset.value) })
        _ = try await client.signUp(email: "soon@example.com", password: "correct horse battery")
        let first = try #require(try store.load())
        let before = try world.refreshRequestsServed()
        offset.set(600)
        world.clock.advance(seconds: 600)
        #expect(try await client.accessToken() == first.accessToken)
        #expect(try world.refreshRequestsServed() == before)
        offset.set(900 - 30)  // inside the 60 s margin
        world.clock.advance(seconds: 270)
        let second = try await client.accessToken()
        #expect(second != first.accessToken)
        #expect(try store.load()?.refreshToken != first.refreshToken)
        #expect(try world.refreshRequestsServed() - before == 1)
        #expect(try await client.getUser().email == "soon@example.com")
    }

    /// A refresh the server refuses because the session ended signs the client out and says
    /// which code ended it: reuse (a rotated token presented outside the grace window) and an
    /// ended session's token.
    @Test
    func aRefusedRefreshSignsTheClientOutAndReportsWhy() async throws {
        let world = try KitWorld { $0.refreshGraceSeconds = 0 }
        defer { world.stop() }
        let store = MemorySessionStore()
        let client = world.client(store: store)
        let events = EventLog(client)
        _ = try await client.signUp(email: "reuse@example.com", password: "correct horse battery")
        // Someone else (a stolen copy) rotates the refresh token first.
        let stolen = try #require(try store.load()?.refreshToken)
        #expect(try world.server.request("POST", "/v1/auth/refresh", appKey: world.app.appKey, json: ["refresh_token": .string(stolen)]).status == 200)
        world.clock.advance(seconds: 1)  // past the grace window of 0 s
        let reused = await kitError { try await client.refresh() }
        #expect(reused?.code == .refreshTokenReused)
        #expect(try client.currentUser == nil && store.load() == nil)
        #expect(await events.first(2).last == .signedOut(.sessionEnded(.refreshTokenReused)))
        #expect(await kitError { try await client.getUser() } == .notSignedIn)

        // An admin signs the user out everywhere: the next refresh's token is of an ended session.
        let created = try await client.signIn(email: "reuse@example.com", password: "correct horse battery")
        #expect(try world.server.request("DELETE", "/v1/admin/users/\(created.user.id)/sessions", bearer: world.app.secretKey).status == 204)
        let ended = await kitError { try await client.refresh() }
        #expect(ended?.code == .invalidRefreshToken)
        #expect(client.currentUser == nil)
        #expect(await events.first(4).last == .signedOut(.sessionEnded(.invalidRefreshToken)))
    }

    /// A server that is down keeps the session: the refresh fails as a transport error and the
    /// next one, once the server is back, works.
    @Test
    func anUnreachableServerKeepsTheSession() async throws {
        let world = try KitWorld()
        defer { world.stop() }
        let store = MemorySessionStore()
        let client = world.client(store: store)
        _ = try await client.signUp(email: "offline@example.com", password: "correct horse battery")
        var configuration = GatehouseClient.Configuration(baseURL: URL(string: "http://127.0.0.1:9")!, appKey: world.app.appKey, sessionStore: store)
        configuration.refreshGraceWindow = 2
        let offline = GatehouseClient(configuration: configuration)
        guard case .transport? = await kitError({ try await offline.refresh() }) else {
            Issue.record("expected a transport error")
            return
        }
        #expect(try offline.currentUser != nil && store.load() != nil)
        try await client.refresh()
        #expect(try await client.getUser().email == "offline@example.com")
    }

    /// Two clients on one store (an app and its extension on a shared Keychain group): after one
    /// has refreshed, the other takes the rotated tokens from the store instead of presenting its
    /// old refresh token, which the server (grace window 0 here) would take for reuse.
    @Test
    func clientsSharingAStoreTakeEachOthersRotatedTokens() async throws {
        let world = try KitWorld { $0.refreshGraceSeconds = 0 }
        defer { world.stop() }
        let store = MemorySessionStore()
        let offset = Locked<TimeInterval>(0)
        let app = world.client(store: store, now: { Date().addingTimeInterval(offset.value) })
        let appExtension = world.client(store: store, now: { Date().addingTimeInterval(offset.value) })
        let created = try await app.signUp(email: "shared@example.com", password: "correct horse battery")
        #expect(try await appExtension.getUser().id == created.user.id)

        world.clock.advance(seconds: 901)
        offset.set(901)
        #expect(try await app.getUser().id == created.user.id)  // refreshed: the store has the rotated pair
        world.clock.advance(seconds: 1)  // past the grace window
        let refreshesBefore = try world.refreshRequestsServed()
        let reuseBefore = try world.metrics()["gatehouse_refresh_reuse_total"] ?? 0
        #expect(try await appExtension.getUser().id == created.user.id)
        #expect(try world.refreshRequestsServed() == refreshesBefore, "the stored access token was still good")
        #expect((try world.metrics()["gatehouse_refresh_reuse_total"] ?? 0) == reuseBefore)
        #expect(try await appExtension.getSessions().count == 1)
    }

    /// One client refreshes; the other, its access token still good, changes the user. Writing
    /// back its own copy of the session would put the rotated refresh token back in the store,
    /// and the first client would present it (grace window 0: reuse, the session ended). It
    /// changes the stored session instead.
    @Test
    func aClientChangingTheUserKeepsTheOthersRotatedTokenInTheStore() async throws {
        let world = try KitWorld { $0.refreshGraceSeconds = 0 }
        defer { world.stop() }
        let store = MemorySessionStore()
        let offset = Locked<TimeInterval>(0)
        let app = world.client(store: store, now: { Date().addingTimeInterval(offset.value) })
        let appExtension = world.client(store: store, now: { Date().addingTimeInterval(offset.value) })
        let created = try await app.signUp(email: "sharing@example.com", password: "correct horse battery")
        #expect(try await appExtension.getUser().id == created.user.id)

        try await app.refresh()  // the store has the rotated pair; the extension's copy is older
        world.clock.advance(seconds: 1)  // past the grace window
        #expect(try await appExtension.updateUser(firstName: .set("Ada")).firstName == "Ada")

        world.clock.advance(seconds: 901)
        offset.set(901)
        let reuseBefore = try world.metrics()["gatehouse_refresh_reuse_total"] ?? 0
        #expect(try await app.getUser().firstName == "Ada")  // refreshed with the token the store kept
        #expect((try world.metrics()["gatehouse_refresh_reuse_total"] ?? 0) == reuseBefore)
        #expect(try await appExtension.getSessions().count == 1)
    }

    /// The network loses the refresh's answer after the server rotated the token: the client sends
    /// the same token again within the grace window and gets the same new pair, so the session is
    /// not taken for a stolen one. The server saw both requests, rotated once, and counted no reuse.
    @Test
    func aRefreshWhoseAnswerIsLostIsSentAgainWithinTheGraceWindow() async throws {
        let world = try KitWorld()
        defer { world.stop() }
        let proxy = try DroppingProxy(targetPort: world.server.server.port, dropping: "POST /v1/auth/refresh ")
        defer { proxy.stop() }
        let store = MemorySessionStore()
        let client = GatehouseClient(
            configuration: .init(baseURL: URL(string: "http://127.0.0.1:\(proxy.port)")!, appKey: world.app.appKey, sessionStore: store))
        let created = try await client.signUp(email: "lossy@example.com", password: "correct horse battery")
        let sessionID = try #require(try await client.getSessions().first(where: \.current)?.id)
        let old = try #require(try store.load())
        let before = try world.refreshRequestsServed()
        let reuseBefore = try world.metrics()["gatehouse_refresh_reuse_total"] ?? 0
        world.clock.advance(seconds: 1)  // so that the new access token differs from the old one

        try await client.refresh()
        #expect(proxy.dropped == 1)
        #expect(try world.refreshRequestsServed() - before == 2, "the answer lost and the retry")
        #expect((try world.metrics()["gatehouse_refresh_reuse_total"] ?? 0) == reuseBefore)
        let refreshed = try #require(try store.load())
        #expect(refreshed.refreshToken != old.refreshToken && refreshed.accessToken != old.accessToken)
        let rows = try world.server.gatehouse.database.query("SELECT rotated_at FROM refresh_tokens WHERE session_id = \(sessionID)")
        #expect(rows.count == 2, "rotated once: the retry was answered the same pair")
        #expect(try await client.getUser().id == created.user.id)

        // Told that the server has no grace window, the client does not send it again: the error
        // is thrown and the session kept.
        let strictProxy = try DroppingProxy(targetPort: world.server.server.port, dropping: "POST /v1/auth/refresh ")
        defer { strictProxy.stop() }
        var strict = GatehouseClient.Configuration(baseURL: URL(string: "http://127.0.0.1:\(strictProxy.port)")!, appKey: world.app.appKey, sessionStore: store)
        strict.refreshGraceWindow = 0
        let beforeStrict = try world.refreshRequestsServed()
        guard case .transport? = await kitError({ try await GatehouseClient(configuration: strict).refresh() }) else {
            Issue.record("expected a transport error")
            return
        }
        #expect(try world.refreshRequestsServed() - beforeStrict == 1)
        #expect(try store.load() != nil)
    }

    @Test
    func theFileStoreKeepsTheSessionBetweenLaunchesReadableByItsOwnerOnly() async throws {
        let world = try KitWorld()
        defer { world.stop() }
        let folder = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("gatehousekit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("nested/session.json")
        let first = world.client(store: FileSessionStore(url: file))
        let created = try await first.signUp(email: "file@example.com", password: "correct horse battery")
        let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let folderAttributes = try FileManager.default.attributesOfItem(atPath: file.deletingLastPathComponent().path)
        #expect((folderAttributes[.posixPermissions] as? NSNumber)?.intValue == 0o700)
        // After a refresh the file still has its mode and no temporary file is left beside it.
        try await first.refresh()
        #expect((try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        #expect(try FileManager.default.contentsOfDirectory(atPath: file.deletingLastPathComponent().path) == ["session.json"])

        // "Relaunch": a new client on the same file is signed in as the same user.
        let second = world.client(store: FileSessionStore(url: file))
        #expect(second.currentUser?.id == created.user.id)
        #expect(try await second.getUser().id == created.user.id)
        try await second.signOut()
        #expect(!FileManager.default.fileExists(atPath: file.path))
        #expect(try FileSessionStore(url: file).load() == nil)
    }
}
