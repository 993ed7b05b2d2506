import Foundation
import GatehouseAPI
import GatehouseApp
import GatehouseCore
import GatehouseTesting
import Synchronization
import Testing

/// `/metrics` beside the HTTP series: what the domain did (sign-ins, refresh reuse, 429s,
/// provider calls, the hashing queue) and the process itself. Each test reads values before and
/// after, and checks they moved by what it did.
@Suite("Domain and process metrics")
struct DomainMetricsTests {
    typealias Scrape = MetricsScrape

    @Test(arguments: TestDatabase.kinds)
    func signInsRefreshReuseAndRateLimitsAreCounted(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind) { $0.refreshGraceSeconds = 0 }
        defer { server.stop() }
        let app = try server.createApp(["name": "Counted", "rate_limits": ["auth_per_minute_per_ip": 1000]])
        let before = try Scrape(server)
        #expect(before.type(of: "gatehouse_sign_ins_total") == "counter")
        #expect(before.samples["gatehouse_sign_ins_total{method=\"password\",outcome=\"success\"}"] != nil, "every series is there from the start")

        let session = try server.signUp(app, email: "count@example.com", password: "counted password 1")
        let wrong = try server.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "count@example.com", "password": "not it at all"])
        #expect(wrong.status == 400)
        let right = try server.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "count@example.com", "password": "counted password 1"])
        #expect(right.status == 200)
        let first = try #require(session["refresh_token"]?.stringValue)
        #expect(try server.request("POST", "/v1/auth/refresh", appKey: app.appKey, json: ["refresh_token": .string(first)]).status == 200)
        usleep(5_000)
        let reused = try server.request("POST", "/v1/auth/refresh", appKey: app.appKey, json: ["refresh_token": .string(first)])
        #expect(reused.problemCode == "auth/refresh-token-reused")

        // An app allowing 2 sign-in attempts a minute from one address: the third is 429.
        let strict = try server.createApp(["name": "Strict", "rate_limits": ["auth_per_minute_per_ip": 2]])
        var statuses: [Int] = []
        for _ in 0..<3 {
            statuses.append(try server.request("POST", "/v1/auth/signin", appKey: strict.appKey, json: ["email": "no@example.com", "password": "whatever it is"]).status)
        }
        #expect(statuses == [400, 400, 429])

        let after = try Scrape(server)
        func delta(_ series: String) -> Double { after[series] - before[series] }
        #expect(delta("gatehouse_sign_ins_total{method=\"password\",outcome=\"success\"}") == 2, "the sign-up and the sign-in")
        #expect(delta("gatehouse_sign_ins_total{method=\"password\",outcome=\"failure\"}") == 4, "the wrong password, two unknown emails, the 429")
        #expect(delta("gatehouse_sign_ins_total{method=\"google\",outcome=\"success\"}") == 0)
        #expect(delta("gatehouse_refresh_reuse_total") == 1)
        #expect(delta("gatehouse_rate_limited_total{route=\"/v1/auth/signin\",code=\"auth/too-many-requests\"}") == 1)
        #expect(after.type(of: "gatehouse_rate_limited_total") == "counter")
    }

    @Test
    func providerCallsAreTimedByProviderOperationAndOutcome() throws {
        let world = try ProviderWorld(.sqlite)
        defer { world.stop() }
        let before = try Scrape(world.server)
        let keys = "provider=\"google\",operation=\"keys\",outcome=\"ok\""
        #expect(before["gatehouse_provider_request_duration_seconds_count{\(keys)}"] == 0)

        let token = world.google.mintIDToken(sub: "g-metrics", aud: ProviderWorld.googleClient, email: nil)
        let signIn = try world.server.request("POST", "/v1/auth/oauth/google", appKey: world.app.appKey, json: ["id_token": .string(token)])
        #expect(signIn.status == 201)
        // A token for another audience: refused with the cached keys, no second call.
        let other = world.google.mintIDToken(sub: "g-metrics", aud: "someone-else.apps.googleusercontent.com", email: nil)
        #expect(try world.server.request("POST", "/v1/auth/oauth/google", appKey: world.app.appKey, json: ["id_token": .string(other)]).status == 401)
        let apple = try world.appleSignIn(["identity_token": .string(world.appleToken(nonce: "n-1")), "nonce": "n-1"])
        #expect(apple.status == 201)

        let after = try Scrape(world.server)
        #expect(after.type(of: "gatehouse_provider_request_duration_seconds") == "histogram")
        #expect(after["gatehouse_provider_request_duration_seconds_count{\(keys)}"] == 1)
        #expect(after["gatehouse_provider_request_duration_seconds_bucket{\(keys),le=\"+Inf\"}"] == 1)
        #expect(after["gatehouse_provider_request_duration_seconds_sum{\(keys)}"] > 0)
        #expect(after["gatehouse_provider_request_duration_seconds_count{provider=\"apple\",operation=\"keys\",outcome=\"ok\"}"] == 1)
        #expect(after["gatehouse_sign_ins_total{method=\"google\",outcome=\"success\"}"] - before["gatehouse_sign_ins_total{method=\"google\",outcome=\"success\"}"] == 1)
        #expect(after["gatehouse_sign_ins_total{method=\"google\",outcome=\"failure\"}"] - before["gatehouse_sign_ins_total{method=\"google\",outcome=\"failure\"}"] == 1)
        #expect(after["gatehouse_sign_ins_total{method=\"apple\",outcome=\"success\"}"] - before["gatehouse_sign_ins_total{method=\"apple\",outcome=\"success\"}"] == 1)
    }

    @Test
    func anUnreachableProviderIsCountedAsSuch() throws {
        let google = try FakeGoogle()
        defer { google.stop() }
        let server = try TestServer(.sqlite) { $0.googleJWKSURL = "http://127.0.0.1:9/certs" }
        defer { server.stop() }
        let app = try server.createApp(["name": "Down", "google": ["client_ids": [.string(ProviderWorld.googleClient)]]])
        let token = google.mintIDToken(sub: "g-down", aud: ProviderWorld.googleClient, email: nil)
        #expect(try server.request("POST", "/v1/auth/oauth/google", appKey: app.appKey, json: ["id_token": .string(token)]).problemCode == "provider/unavailable")
        let after = try Scrape(server)
        #expect(after["gatehouse_provider_request_duration_seconds_count{provider=\"google\",operation=\"keys\",outcome=\"unreachable\"}"] == 1)
        #expect(after["gatehouse_sign_ins_total{method=\"google\",outcome=\"failure\"}"] == 1)
    }

    /// With one hash thread and slow hashes, concurrent sign-ups queue: the gauge shows them
    /// waiting, then goes back to 0.
    @Test
    func theHashingQueueDepthShowsSignInsWaiting() throws {
        let server = try TestServer(.sqlite) {
            $0.hashConcurrency = 1
            $0.argon2MemoryKiB = 65_536
            $0.argon2Iterations = 3
        }
        defer { server.stop() }
        let app = try server.createApp(["name": "Slow", "rate_limits": ["auth_per_minute_per_ip": 1000]])
        #expect(try Scrape(server)["gatehouse_password_hash_queue_depth"] == 0)
        let done = DispatchGroup()
        for i in 0..<4 {
            done.enter()
            Thread {
                _ = try? server.request("POST", "/v1/auth/signup", appKey: app.appKey, json: ["email": .string("slow-\(i)@example.com"), "password": "slow password 1"])
                done.leave()
            }.start()
        }
        var deepest = 0.0
        while done.wait(timeout: .now() + .milliseconds(5)) == .timedOut {
            deepest = max(deepest, (try? Scrape(server)["gatehouse_password_hash_queue_depth"]) ?? 0)
        }
        #expect(deepest >= 1, "a sign-up waited for the one hash thread")
        #expect(try Scrape(server)["gatehouse_password_hash_queue_depth"] == 0)
    }

    @Test
    func processMetricsAndBuildInfoAreExported() throws {
        let server = try TestServer(.sqlite)
        defer { server.stop() }
        let before = try Scrape(server)
        #expect(before["gatehouse_build_info{version=\"\(Gatehouse.version)\"}"] == 1)
        #expect(before.type(of: "gatehouse_build_info") == "gauge")
        #expect(before["process_resident_memory_bytes"] > 4_000_000)
        #expect(before["process_max_fds"] >= 64)
        let now = Date().timeIntervalSince1970
        #expect(before["process_start_time_seconds"] > now - 86_400 && before["process_start_time_seconds"] <= now + 1)
        #expect(before.type(of: "process_cpu_seconds_total") == "counter")

        // 300 more descriptors, and some CPU time.
        let handles = (0..<300).compactMap { _ in FileHandle(forReadingAtPath: "/dev/null") }
        defer { for handle in handles { try? handle.close() } }
        // Spins until this process (the server runs in it) has used 0.25 s more CPU, however
        // long that takes on a loaded machine: a wall-clock spin may get too little of a core.
        func processCPUSeconds() -> Double {
            var time = timespec()
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
            return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
        }
        var spin: UInt64 = 0
        let until = processCPUSeconds() + 0.25
        while processCPUSeconds() < until { spin &+= 1 }
        let after = try Scrape(server)
        #expect(after["process_open_fds"] - before["process_open_fds"] >= 250, "\(before["process_open_fds"]) → \(after["process_open_fds"])")
        #expect(after["process_cpu_seconds_total"] - before["process_cpu_seconds_total"] >= 0.2 || spin == 0)
        #expect(after["process_start_time_seconds"] == before["process_start_time_seconds"])
    }
}
