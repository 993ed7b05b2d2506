import Foundation
import GatehouseCore
import GatehouseHTTP
import GatehouseTesting
import Synchronization
import Testing

/// A provider that is down or hangs costs the server one fetch per key URL per 30 s, and never
/// the threads that answer everything else.
@Suite("Provider outages")
struct ProviderOutageAPITests {
    /// After one failed key fetch, requests answer 503 at once for 30 s without asking again.
    @Test(arguments: TestDatabase.kinds)
    func aFailedKeyFetchIsNotRepeatedByEveryRequest(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind)
        defer { world.stop() }
        for provider in KeyServer.allCases {
            let fake = world.keyServer(provider)
            fake.failNext(500)
            let first = try world.signIn(provider, nonce: "first")
            #expect(first.problemCode == "provider/unavailable", "\(provider)")
            #expect(fake.fetches() == 1, "\(provider)")
            for i in 0..<10 {
                #expect(try world.signIn(provider, nonce: "again-\(i)").problemCode == "provider/unavailable", "\(provider)")
            }
            world.clock.advance(seconds: 29)
            #expect(try world.signIn(provider, nonce: "later").problemCode == "provider/unavailable", "\(provider)")
            #expect(fake.fetches() == 1, "\(provider): no second fetch within 30 s")
            world.clock.advance(seconds: 1)
            #expect(try world.signIn(provider, nonce: "recovered").status == 201, "\(provider)")
            #expect(fake.fetches() == 2, "\(provider)")
            #expect(fake.errors().isEmpty, "\(provider)")
        }
    }

    /// Sign-ins waiting on a key server that hangs hold no HTTP worker: health checks and app
    /// reads keep answering at once, and the waiting sign-ins share one fetch.
    @Test(arguments: TestDatabase.kinds)
    func signInsWaitingOnAHangingKeyServerDoNotBlockOtherRequests(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock()
        let google = try FakeGoogle(clock: clock)  // mints the tokens; its server is not used
        defer { google.stop() }
        let release = DispatchSemaphore(value: 0)
        let released = Atomic(false)
        let hanging = try FakeHTTPServer { request, _ in
            guard request.path == "/certs" else { return nil }
            _ = release.wait(timeout: .now() + 15)  // a bound, should the test fail before releasing
            return google.keys.jwksResponse()
        }
        defer { hanging.stop() }
        func letGo() { if !released.exchange(true, ordering: .relaxed) { release.signal() } }
        defer { letGo() }
        let server = try TestServer(kind, clock: clock) { $0.googleJWKSURL = hanging.baseURL + "/certs" }
        defer { server.stop() }
        let app = try server.createApp([
            "name": "Hang", "rate_limits": ["auth_per_minute_per_ip": 1000], "google": ["client_ids": [.string(ProviderWorld.googleClient)]],
        ])

        let signIns = 12  // three times the test server's 4 HTTP workers
        let statuses = Mutex<[Int]>([])
        let done = DispatchGroup()
        for i in 0..<signIns {
            let token = google.mintIDToken(sub: "g-hang-\(i)", aud: ProviderWorld.googleClient, email: nil)
            done.enter()
            // A thread each (GCD would run only as many at once as there are cores).
            Thread {
                let response = try? server.request("POST", "/v1/auth/oauth/google", appKey: app.appKey, json: ["id_token": .string(token)])
                statuses.withLock { $0.append(response?.status ?? -1) }
                done.leave()
            }.start()
        }
        let deadline = Date().addingTimeInterval(5)
        while hanging.requests.isEmpty && Date() < deadline { usleep(2_000) }
        #expect(hanging.requests.count == 1, "the key fetch is under way")
        usleep(300_000)  // the other sign-ins reach the server and wait for that fetch

        for (path, appKey) in [("/healthz", nil), ("/v1/app", app.appKey), ("/healthz", nil), ("/v1/app", app.appKey)] {
            let started = Date()
            let response = try TestHTTPClient.send("GET", server.baseURL + path, headers: appKey.map { [("X-App-Key", $0)] } ?? [], timeoutSeconds: 15)
            #expect(response.status == 200, "\(path)")
            // Seconds before the fix (7.7 s); a bound with room for a loaded CI machine.
            #expect(Date().timeIntervalSince(started) < 3, "\(path) answered while the sign-ins wait")
        }
        #expect(statuses.withLock { $0.isEmpty }, "the sign-ins are still waiting for the keys")

        letGo()
        #expect(done.wait(timeout: .now() + 20) == .success)
        #expect(statuses.withLock { $0.sorted() } == Array(repeating: 201, count: signIns))
        #expect(hanging.requests == ["GET /certs"], "one fetch served every waiting sign-in")
        #expect(hanging.errors.isEmpty)
    }
}
