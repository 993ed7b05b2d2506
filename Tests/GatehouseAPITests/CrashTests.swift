import Dispatch
import Foundation
import GatehouseCore
import GatehouseTesting
import Synchronization
import Testing

/// The executable killed with SIGKILL in the middle of sign-ups, sign-ins and refreshes, then
/// started again on the same database: what was answered is there.
extension ExecutableTests {
    /// What one client was last told, in the order it was told.
    struct ClientState: Sendable {
        var email: String
        var password = "correct horse battery"
        /// The sign-up was answered 201.
        var signedUp = false
        /// The newest refresh token an answer gave it.
        var refreshToken: String?
        var refreshes = 0
    }

    static let crashAdminToken = "crash-test-admin-token-0123456789abcdef"

    struct NotReady: Error, CustomStringConvertible {
        let log: String
        var description: String { "the server did not become ready: \(log.suffix(2_000))" }
    }

    func startServe(_ databaseURL: String, port: UInt16, output: String) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["serve"]
        process.environment = [
            "GATEHOUSE_DATABASE_URL": databaseURL, "GATEHOUSE_LISTEN": "127.0.0.1:\(port)", "GATEHOUSE_ACCESS_LOG": "off",
            "GATEHOUSE_MASTER_KEY": String(repeating: "ab", count: 32), "GATEHOUSE_ADMIN_TOKEN": Self.crashAdminToken,
            "GATEHOUSE_ARGON2_MEMORY_KIB": "1024", "GATEHOUSE_ARGON2_ITERATIONS": "1",
            // Wide enough that a token rotated by a refresh the kill left unanswered is still
            // inside it when the client retries after the restart (API.md: the same new pair).
            "GATEHOUSE_REFRESH_GRACE_SECONDS": "60",
        ]
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        let log = FileHandle(forWritingAtPath: output)
        log?.seekToEndOfFile()
        process.standardOutput = log
        process.standardError = log
        try process.run()
        let base = "http://127.0.0.1:\(port)"
        for _ in 0..<200 {
            if (try? TestHTTPClient.send("GET", base + "/readyz", timeoutSeconds: 1))?.status == 200 { return process }
            usleep(50_000)
        }
        process.terminate()
        throw NotReady(log: (try? String(contentsOfFile: output, encoding: .utf8)) ?? "")
    }

    @Test(arguments: TestDatabase.kinds)
    func killedUnderLoadItKeepsEverythingItAnswered(kind: TestDatabaseKind) throws {
        let database = try TestDatabase.make(kind)
        defer { database.drop() }
        let url: String
        switch database.configuration {
        case .sqlite(let path): url = "sqlite://" + path
        case .postgres(let postgres): url = postgres
        }
        let port = freePort()
        let base = "http://127.0.0.1:\(port)"
        let output = NSTemporaryDirectory() + "gatehouse-crash-\(UUID().uuidString).log"
        defer { try? FileManager.default.removeItem(atPath: output) }
        var process = try startServe(url, port: port, output: output)
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

        let created = try TestHTTPClient.send(
            "POST", base + "/v1/admin/apps", headers: [("Authorization", "Bearer \(Self.crashAdminToken)"), ("Content-Type", "application/json")],
            body: JSON.object(["name": "Crash", "rate_limits": ["auth_per_minute_per_ip": 1_000]]).serialized())
        let appKey = try #require(created.data?["app_key"]?.stringValue, "\(created.text)")
        @Sendable func post(_ path: String, _ json: JSON) throws -> TestResponse {
            try TestHTTPClient.send(
                "POST", base + path, headers: [("X-App-Key", appKey), ("Content-Type", "application/json")], body: json.serialized(), timeoutSeconds: 10)
        }

        // Eight clients, each signing up a few users and refreshing each session in a loop,
        // until the server is gone. What each answer said is recorded as it arrives.
        let clients = Mutex<[ClientState]>([])
        let group = DispatchGroup()
        let running = Atomic<Bool>(true)
        for worker in 0..<8 {
            DispatchQueue.global().async(group: group) {
                var n = 0
                while running.load(ordering: .relaxed) {
                    n += 1
                    let index = clients.withLock { list in
                        list.append(ClientState(email: "c\(worker)-\(n)@example.com"))
                        return list.count - 1
                    }
                    let email = clients.withLock { $0[index].email }
                    guard let signUp = try? post("/v1/auth/signup", ["email": .string(email), "password": "correct horse battery"]) else { return }
                    guard signUp.status == 201, let first = signUp.data?["refresh_token"]?.stringValue else { continue }
                    clients.withLock { $0[index].signedUp = true; $0[index].refreshToken = first }
                    for _ in 0..<20 where running.load(ordering: .relaxed) {
                        let held = clients.withLock { $0[index].refreshToken! }
                        guard let refreshed = try? post("/v1/auth/refresh", ["refresh_token": .string(held)]) else { return }
                        guard refreshed.status == 200, let next = refreshed.data?["refresh_token"]?.stringValue else { break }
                        clients.withLock { $0[index].refreshToken = next; $0[index].refreshes += 1 }
                    }
                }
            }
        }
        // Killed once the load is well under way (on a busy machine that may take a while).
        let start = Date()
        while Date().timeIntervalSince(start) < 20,
            clients.withLock({ list in list.filter(\.signedUp).count < 16 || list.reduce(0) { $0 + $1.refreshes } < 100 })
        {
            usleep(50_000)
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        running.store(false, ordering: .relaxed)
        group.wait()
        #expect(process.terminationReason == .uncaughtSignal)

        let answered = clients.withLock { $0 }.filter(\.signedUp)
        #expect(answered.count >= 16, "the load got going: \(answered.count) sign-ups answered")
        #expect(answered.reduce(0) { $0 + $1.refreshes } >= 100)

        // Started again on the same database: migrations check out, and everything answered is there.
        process = try startServe(url, port: port, output: output)
        for client in answered {
            let refreshed = try post("/v1/auth/refresh", ["refresh_token": .string(try #require(client.refreshToken))])
            #expect(refreshed.status == 200, "\(client.email) after \(client.refreshes) refreshes: \(refreshed.status) \(refreshed.problemCode ?? "")")
            let signIn = try post("/v1/auth/signin", ["email": .string(client.email), "password": .string(client.password)])
            #expect(signIn.status == 200, "\(client.email): \(signIn.status)")
        }
        if case .sqlite(let path) = database.configuration {
            // Checked by SQLite itself, in another process (Python's module), not by our driver.
            let check = try ExternalProgram.run(
                ExternalProgram.python, ["-c", "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('PRAGMA integrity_check').fetchone()[0])", path])
            #expect(check.trimmingCharacters(in: .whitespacesAndNewlines) == "ok")
        }
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
    }
}
