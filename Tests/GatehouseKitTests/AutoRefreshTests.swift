import Foundation
import GatehouseKit
import Testing

/// The background refresh against the real server, on a fake clock and with sleeps the test
/// releases: it refreshes the refresh margin before the access token expires, pauses on the
/// app's background notification, resumes (at once when due) on the foreground one, and stops
/// on stopAutoRefresh, close and deinit.
@Suite("GatehouseKit background refresh")
struct AutoRefreshTests {
    /// The client's sleeps: each records its length, then waits until the test releases it.
    final class Sleeps: Sendable {
        let requested = Locked<[TimeInterval]>([])
        let released = Locked(0)
        let cancelled = Locked(0)

        func sleep(_ seconds: TimeInterval) async throws {
            let index = requested.mutate { $0.append(seconds); return $0.count - 1 }
            do {
                while released.value <= index { try await Task.sleep(for: .milliseconds(5)) }
            } catch {
                cancelled.update { $0 += 1 }
                throw error
            }
        }

        /// Releases every sleep asked for so far.
        func release() { released.set(requested.value.count) }

        /// Waits for the `count`th sleep to be asked for, and returns its length.
        func waitFor(_ count: Int) async throws -> TimeInterval? {
            for _ in 0..<1000 where requested.value.count < count { try await Task.sleep(for: .milliseconds(10)) }
            return requested.value.count >= count ? requested.value[count - 1] : nil
        }
    }

    static func client(_ world: KitWorld, clock: Locked<Date>, sleeps: Sleeps, center: NotificationCenter? = nil) -> GatehouseClient {
        world.client(now: { clock.value }) { configuration in
            configuration.sleep = { try await sleeps.sleep($0) }
            if let center {
                configuration.notificationCenter = center
                configuration.lifecycleNotifications = (Notification.Name("test.background"), Notification.Name("test.foreground"))
            }
        }
    }

    @Test
    func refreshesTheMarginBeforeExpiryThenWaitsForTheNextToken() async throws {
        let world = try KitWorld()
        defer { world.stop() }
        let clock = Locked(Date())
        let sleeps = Sleeps()
        let store = MemorySessionStore()
        let client = world.client(store: store, now: { clock.value }) { $0.sleep = { try await sleeps.sleep($0) } }
        let events = EventLog(client)
        _ = try await client.signUp(email: "timer@example.com", password: "correct horse battery")
        let stored = try #require(try store.load())
        let margin = min(60, stored.accessTokenLifetime / 4)
        let wait = try #require(try await sleeps.waitFor(1))
        #expect(abs(wait - (stored.accessTokenLifetime - margin)) < 0.001, "\(wait)")
        #expect(client.autoRefreshScheduled)

        clock.set(stored.accessTokenExpiresAt.addingTimeInterval(-margin))
        sleeps.release()
        #expect(await events.first(2) == [.signedIn(stored.user), .tokenRefreshed])
        let refreshed = try #require(try store.load())
        #expect(refreshed.refreshToken != stored.refreshToken, "the server rotated it")
        let next = try #require(try await sleeps.waitFor(2))
        #expect(abs(next - (refreshed.accessTokenLifetime - margin)) < 0.001, "the next, for the new token: \(next)")

        try await client.signOut()
        for _ in 0..<200 where client.autoRefreshScheduled { try await Task.sleep(for: .milliseconds(10)) }
        #expect(!client.autoRefreshScheduled, "signed out: nothing to refresh")
    }

    @Test
    func pausedInTheBackgroundAndOnTheForegroundRefreshedAtOnceWhenDue() async throws {
        let world = try KitWorld()
        defer { world.stop() }
        let clock = Locked(Date())
        let sleeps = Sleeps()
        let center = NotificationCenter()
        let client = Self.client(world, clock: clock, sleeps: sleeps, center: center)
        let events = EventLog(client)
        let created = try await client.signUp(email: "background@example.com", password: "correct horse battery")
        _ = try await sleeps.waitFor(1)
        center.post(name: Notification.Name("test.background"), object: nil)
        #expect(!client.autoRefreshScheduled)
        for _ in 0..<200 where sleeps.cancelled.value < 1 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(sleeps.cancelled.value == 1, "the pending sleep was cancelled")

        clock.set(clock.value.addingTimeInterval(3600))  // the token expired in the background
        center.post(name: Notification.Name("test.foreground"), object: nil)
        #expect(client.autoRefreshScheduled)
        #expect(try await sleeps.waitFor(2) == 0, "due: at once")
        sleeps.release()
        #expect(await events.first(2) == [.signedIn(created.user), .tokenRefreshed])
    }

    @Test
    func stopCloseAndDeinitEndIt() async throws {
        let world = try KitWorld()
        defer { world.stop() }
        let clock = Locked(Date())
        let sleeps = Sleeps()
        let client = Self.client(world, clock: clock, sleeps: sleeps)
        _ = try await client.signUp(email: "stop@example.com", password: "correct horse battery")
        _ = try await sleeps.waitFor(1)
        client.stopAutoRefresh()
        #expect(!client.autoRefreshScheduled)
        client.startAutoRefresh()
        #expect(client.autoRefreshScheduled)
        client.close()
        #expect(!client.autoRefreshScheduled)

        var manual: GatehouseClient? = world.client(configure: { configuration in
            configuration.autoRefresh = false
            configuration.sleep = { try await sleeps.sleep($0) }
        })
        _ = try await manual?.signUp(email: "manual@example.com", password: "correct horse battery")
        #expect(manual?.autoRefreshScheduled == false)
        manual?.startAutoRefresh()
        let asked = sleeps.requested.value.count
        #expect(try await sleeps.waitFor(asked + 1) != nil, "its sleep began")
        let cancelledBefore = sleeps.cancelled.value
        weak var gone = manual
        manual = nil
        #expect(gone == nil, "the background task does not keep the client")
        for _ in 0..<200 where sleeps.cancelled.value == cancelledBefore { try await Task.sleep(for: .milliseconds(10)) }
        #expect(sleeps.cancelled.value == cancelledBefore + 1, "deinit cancelled its sleep")
    }
}
