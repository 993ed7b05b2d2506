import Dispatch
import Foundation
import GatehouseCore
import GatehouseTesting
import PostgresDriver
import Synchronization
import Testing

/// PostgreSQL going away and coming back, on a cluster of the test's own (``OwnPostgres``):
/// requests that need the database answer 503 `server/unavailable` with `Retry-After` at once,
/// `/readyz` says not ready, nothing crashes or leaks, and service comes back by itself.
@Suite(.serialized)
struct DatabaseOutageTests {
    struct Outcome: Sendable {
        let status: Int
        let seconds: Double
        let retryAfter: String?
        let code: String?
    }

    static func timed(_ body: () throws -> TestResponse) -> Outcome {
        let start = Date()
        guard let response = try? body() else { return Outcome(status: 0, seconds: Date().timeIntervalSince(start), retryAfter: nil, code: nil) }
        return Outcome(status: response.status, seconds: Date().timeIntervalSince(start), retryAfter: response.header("Retry-After"), code: response.problemCode)
    }

    static func openDescriptors() -> Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1 }

    static func threads() -> Int {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        return status.split(separator: "\n").first { $0.hasPrefix("Threads:") }.flatMap { Int($0.dropFirst(8).trimmingCharacters(in: .whitespaces)) } ?? -1
    }

    @Test func aStoppedDatabaseIsAQuick503AndServiceReturnsByItself() throws {
        guard TestDatabase.kinds.contains(.postgres) else { return }
        let postgres = try OwnPostgres()
        defer { postgres.destroy() }
        let server = try TestServer(database: try TestDatabase.make(.postgres, postgresBase: postgres.url))
        defer { server.stop() }
        let app = try server.createApp(["name": "Outage", "rate_limits": ["auth_per_minute_per_ip": 1_000]])
        _ = try server.signUp(app)
        let listUsers: @Sendable () throws -> TestResponse = { try server.request("GET", "/v1/admin/users?limit=1", bearer: app.secretKey) }
        #expect(try listUsers().status == 200)
        let descriptorsBefore = Self.openDescriptors()
        let threadsBefore = Self.threads()

        // Load from four clients all through the outage: reads, and sign-ups that write.
        let running = Atomic<Bool>(true)
        let outcomes = Mutex<[(phase: Int, Outcome)]>([])
        let phase = Atomic<Int>(0)  // 0 before, 10 stopping, 1 down, 20 starting, 2 back up
        let clients = DispatchGroup()
        for client in 0..<4 {
            DispatchQueue.global().async(group: clients) {
                var n = 0
                while running.load(ordering: .relaxed) {
                    n += 1
                    let before = phase.load(ordering: .relaxed)
                    let outcome = n % 2 == 0 ? Self.timed(listUsers) : Self.timed {
                        try server.request(
                            "POST", "/v1/auth/signup", appKey: app.appKey,
                            json: ["email": .string("load-\(client)-\(n)@example.com"), "password": "correct horse battery"])
                    }
                    // A request that straddled a change of phase belongs to neither.
                    let seen = phase.load(ordering: .relaxed) == before ? before : -1
                    outcomes.withLock { $0.append((seen, outcome)) }
                }
            }
        }
        usleep(300_000)
        phase.store(10, ordering: .relaxed)
        try postgres.stop()
        phase.store(1, ordering: .relaxed)
        usleep(1_500_000)
        let ready = Self.timed { try server.request("GET", "/readyz") }
        #expect(ready.status == 503 && ready.retryAfter != nil && ready.seconds < 2)
        #expect(try server.request("GET", "/healthz").status == 200, "the process itself is alive")
        let read = Self.timed(listUsers)
        #expect(read.status == 503 && read.code == "server/unavailable" && read.retryAfter == "1")
        #expect(read.seconds < 1, "answered at once, not after a timeout: \(read.seconds) s")

        phase.store(20, ordering: .relaxed)
        try postgres.start()
        phase.store(2, ordering: .relaxed)
        let back = Date()
        var recovered: Double?
        while Date().timeIntervalSince(back) < 15 {
            if try server.request("GET", "/readyz").status == 200, try listUsers().status == 200 {
                recovered = Date().timeIntervalSince(back)
                break
            }
            usleep(100_000)
        }
        #expect(recovered != nil && recovered! < 5, "service back \(recovered ?? -1) s after the database")
        usleep(500_000)
        running.store(false, ordering: .relaxed)
        clients.wait()

        let all = outcomes.withLock { $0 }
        let down = all.filter { $0.phase == 1 }.map(\.1)
        #expect(down.count > 20, "the clients kept asking through the outage (\(down.count))")
        #expect(down.allSatisfy { $0.status == 503 && $0.code == "server/unavailable" && $0.retryAfter == "1" }, "\(Set(down.map { "\($0.status) \($0.code ?? "")" }))")
        #expect(down.map(\.seconds).max() ?? 99 < 2, "the slowest answer while down took \(down.map(\.seconds).max() ?? -1) s")
        #expect(all.allSatisfy { $0.1.status != 500 && $0.1.status != 0 }, "no 500, no dropped connection")
        #expect(all.filter { $0.phase == 0 }.allSatisfy { $0.1.status == 200 || $0.1.status == 201 }, "\(Set(all.filter { $0.phase == 0 }.map { "\($0.1.status) \($0.1.code ?? "")" }))")
        #expect(try listUsers().status == 200)
        // Nothing piled up or leaked: pooled connections reopened, threads back. The counts are
        // the whole test process's, and other suites run beside this one: a leak stays, their
        // servers' threads and sockets go, so wait (10 s at most) for the counts to settle.
        let settled = Date().addingTimeInterval(10)
        while Self.openDescriptors() > descriptorsBefore + 8 || Self.threads() > threadsBefore + 4, Date() < settled { usleep(200_000) }
        #expect(Self.openDescriptors() <= descriptorsBefore + 8, "descriptors \(descriptorsBefore) → \(Self.openDescriptors())")
        #expect(Self.threads() <= threadsBefore + 4, "threads \(threadsBefore) → \(Self.threads())")
    }

    /// A restart between two requests costs neither of them: the pooled connections the old
    /// server closed are dropped before they are lent, not failed on.
    @Test func aRestartBetweenRequestsCostsNoRequest() throws {
        guard TestDatabase.kinds.contains(.postgres) else { return }
        let postgres = try OwnPostgres()
        defer { postgres.destroy() }
        let server = try TestServer(database: try TestDatabase.make(.postgres, postgresBase: postgres.url))
        defer { server.stop() }
        let app = try server.createApp()
        // Several connections in the pool, all idle.
        let group = DispatchGroup()
        for _ in 0..<4 {
            DispatchQueue.global().async(group: group) { _ = try? server.request("GET", "/v1/admin/users", bearer: app.secretKey) }
        }
        group.wait()
        try postgres.stop()
        try postgres.start()
        for n in 0..<8 {
            let response = try server.request("POST", "/v1/auth/signup", appKey: app.appKey, json: ["email": .string("after-\(n)@example.com"), "password": "correct horse battery"])
            #expect(response.status == 201, "request \(n) after the restart: \(response.status) \(response.text)")
        }
    }

    /// A statement that waits past `GATEHOUSE_DB_STATEMENT_TIMEOUT_MS` (here, on a row another
    /// transaction holds) is cancelled by the server and answered 503, not left hanging.
    @Test func aStatementPastItsTimeoutIsA503() throws {
        guard TestDatabase.kinds.contains(.postgres) else { return }
        let server = try TestServer(.postgres) { $0.databaseStatementTimeoutMillis = 300 }
        defer { server.stop() }
        let app = try server.createApp()
        let session = try server.signUp(app)
        let user = try #require(session["user"]?["id"]?.stringValue)
        guard case .postgres(let url) = server.database.configuration else { return }
        let holder = try PostgresDatabase(url: url, poolSize: 1)
        defer { holder.close() }
        let held = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            _ = try? holder.transaction { db in
                _ = try db.query("SELECT id FROM users WHERE id = \(user) FOR UPDATE")
                held.signal()
                _ = release.wait(timeout: .now() + 10)
            }
        }
        held.wait()
        let patched = Self.timed {
            try server.request("PATCH", "/v1/me", appKey: app.appKey, bearer: session["access_token"]?.stringValue, json: ["photo_file_id": nil])
        }
        release.signal()
        #expect(patched.status == 503 && patched.code == "server/unavailable" && patched.retryAfter == "1")
        #expect(patched.seconds < 2, "cancelled after about 0.3 s, not held: \(patched.seconds) s")
        #expect(try server.request("PATCH", "/v1/me", appKey: app.appKey, bearer: session["access_token"]?.stringValue, json: ["first_name": "Ada"]).status == 200)
    }
}
