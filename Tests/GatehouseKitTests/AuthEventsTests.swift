import Foundation
import GatehouseCore
import GatehouseKit
import GatehouseTesting
import Testing

/// `authEvents()` starts with the current state and names each change; a read never sends one;
/// `currentUser` is synchronous and right from the client's first moment; `GatehouseSession`
/// follows the events.
@Suite("Auth events and the synchronous currentUser")
struct AuthEventsTests {
    @Test
    func aStreamStartsWithTheCurrentStateThenNamesEachChangeButNoRead() async throws {
        let world = try KitWorld()
        defer { world.stop() }
        let store = MemorySessionStore()
        let client = world.client(store: store)
        #expect(client.currentUser == nil && !client.isSignedIn)
        let events = EventLog(client)
        #expect(await events.initial() == .initialSession(nil))

        let created = try await client.signUp(email: "events@example.com", password: "correct horse battery")
        #expect(client.currentUser == created.user && client.isSignedIn)
        try await client.refresh()
        let renamed = try await client.updateUser(firstName: .set("Grace"))
        #expect(client.currentUser == renamed)
        _ = try await client.updateUser(firstName: .set("Grace"))  // the same user: nothing to tell
        _ = try await client.getUser()  // a read: nothing to tell

        // A client made later on the same store has the user at once, and its streams start with it.
        let relaunched = world.client(store: store)
        #expect(relaunched.currentUser == renamed)
        #expect(await EventLog(relaunched).initial() == .initialSession(renamed))

        try await client.signOut()
        #expect(client.currentUser == nil)
        #expect(await events.first(4) == [.signedIn(created.user), .tokenRefreshed, .userUpdated(renamed), .signedOut(.signedOut)])
    }

    @Test
    func aClientMadeBeforeAnotherSignsInOnTheSharedStoreFindsTheSession() async throws {
        let world = try KitWorld()
        defer { world.stop() }
        let store = MemorySessionStore()
        let appExtension = world.client(store: store)
        #expect(appExtension.currentUser == nil)
        let app = world.client(store: store)
        let created = try await app.signUp(email: "shared-late@example.com", password: "correct horse battery")
        #expect(try await appExtension.getUser().id == created.user.id)
        #expect(appExtension.currentUser == created.user, "currentUser follows what the store had")
    }

    /// An admin's change read by `getUser()` becomes `currentUser` without an event: an app that
    /// reloads the profile on every event does not loop.
    @Test
    func reloadingTheProfileOnEveryEventDoesNotLoop() async throws {
        let world = try KitWorld()
        defer { world.stop() }
        let client = world.client()
        let created = try await client.signUp(email: "loop@example.com", password: "correct horse battery")
        let heard = Locked(0)
        let follower = Task {
            for await _ in client.authEvents() {
                heard.update { $0 += 1 }
                _ = try? await client.getUser()
            }
        }
        defer { follower.cancel() }
        #expect(try world.server.request(
            "PATCH", "/v1/admin/users/\(created.user.id)", bearer: world.app.secretKey, json: ["app_metadata": ["plan": "pro"]]).status == 200)
        #expect(try await client.getUser().appMetadata == ["plan": "pro"])
        #expect(client.currentUser?.appMetadata == ["plan": "pro"], "the read user is kept")
        try await Task.sleep(for: .milliseconds(300))
        #expect(heard.value == 1, "only the initial state: the reads told nobody")
    }

    #if canImport(Observation)
    @Test @MainActor
    func gatehouseSessionFollowsTheClient() async throws {
        guard #available(iOS 17, macOS 14, tvOS 17, watchOS 10, *) else { return }
        let world = try KitWorld()
        defer { world.stop() }
        let client = world.client()
        let session = GatehouseSession(client: client)
        #expect(session.user == nil && !session.isSignedIn)
        let created = try await client.signUp(email: "observed@example.com", password: "correct horse battery")
        for _ in 0..<500 where session.user == nil { try await Task.sleep(for: .milliseconds(10)) }
        #expect(session.user == created.user && session.isSignedIn)
        let renamed = try await client.updateUser(firstName: .set("Observed"))
        for _ in 0..<500 where session.user != renamed { try await Task.sleep(for: .milliseconds(10)) }
        #expect(session.user == renamed && session.lastEvent == .userUpdated(renamed))
        try await client.signOut()
        for _ in 0..<500 where session.user != nil { try await Task.sleep(for: .milliseconds(10)) }
        #expect(session.user == nil && !session.isSignedIn && session.lastEvent == .signedOut(.signedOut))
    }
    #endif
}
