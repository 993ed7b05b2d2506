import Foundation
import GatehouseApp
import GatehouseCore
import GatehouseSQL
import GatehouseTesting
import PostgresDriver
import Synchronization
import Testing

/// Two nodes on one PostgreSQL database through PgBouncer in transaction pooling mode (Debian's
/// `pgbouncer` 1.18, started by scripts/pgbouncer-test-server from deploy/pgbouncer/pgbouncer.ini
/// with a pool of 2 server connections), with `GATEHOUSE_DATABASE_POOLER=transaction`: the API
/// and the maintenance round work, although every transaction may land on another server
/// connection than the one before (ADR 0034).
struct PgBouncerUnavailable: Error, CustomStringConvertible {
    let description: String
}

@Suite("Through PgBouncer in transaction pooling mode", .serialized)
struct PgBouncerTests {
    /// The base URL of the test PgBouncer: `GATEHOUSE_TEST_PGBOUNCER_URL` (scripts/test sets it),
    /// else the one scripts/pgbouncer-test-server starts now (idempotent).
    /// `scram`: the second PgBouncer, which keeps the file's SCRAM authentication (its URL carries
    /// the test role's password), always started by the script.
    static func pgbouncerURL(scram: Bool = false) throws -> String {
        if !scram, let url = ProcessInfo.processInfo.environment["GATEHOUSE_TEST_PGBOUNCER_URL"], !url.isEmpty { return url }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let process = Process()
        process.executableURL = root.appendingPathComponent("scripts/pgbouncer-test-server")
        process.currentDirectoryURL = root
        if scram {
            process.environment = ProcessInfo.processInfo.environment.merging(["GATEHOUSE_PGBOUNCER_AUTH": "scram"]) { $1 }
        }
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let url = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard process.terminationStatus == 0, url.hasPrefix("postgres://") else {
            throw PgBouncerUnavailable(description: "scripts/pgbouncer-test-server failed (\(process.terminationStatus)): \(url)")
        }
        return url
    }

    /// The server connections PgBouncer may open to one database (scripts/pgbouncer-test-server).
    static let serverConnections = 2

    /// Two nodes whose database URL is PgBouncer's, each with more pooled clients than PgBouncer
    /// has server connections; the test database is created (and dropped) directly.
    struct Pair {
        let a: TestServer
        let b: TestServer
        let databaseName: String
        var nodes: [TestServer] { [a, b] }

        /// `databaseTimeout`: the database's own `statement_timeout`, set before any node connects.
        init(statementTimeouts: (Int, Int) = (5_000, 5_000), databaseTimeout: String? = nil) throws {
            let bouncer = try PgBouncerTests.pgbouncerURL()
            let database = try TestDatabase.make(.postgres)
            guard case .postgres(let direct) = database.configuration, var url = URLComponents(string: bouncer) else {
                database.drop()
                throw PgBouncerUnavailable(description: "not a PostgreSQL test database")
            }
            databaseName = String(URLComponents(string: direct)!.path.dropFirst())
            if let databaseTimeout, let base = TestDatabase.postgresBaseURL {
                let admin = try PostgresDatabase(url: base, poolSize: 1)
                defer { admin.close() }
                try admin.execute(SQL(unsafeSQL: "ALTER DATABASE \(databaseName) SET statement_timeout = '\(databaseTimeout)'"))
            }
            url.path = "/" + databaseName
            let pooled = url.string!
            func configure(_ timeout: Int) -> (inout Configuration) -> Void {
                { configuration in
                    configuration.database = .postgres(url: pooled)
                    configuration.databasePooler = .transaction
                    configuration.databasePoolSize = 6
                    configuration.databaseStatementTimeoutMillis = timeout
                }
            }
            a = try TestServer(database: database, configure: configure(statementTimeouts.0))
            do {
                b = try TestServer(anotherNodeOf: a, configure: configure(statementTimeouts.1))
            } catch {
                a.stop()
                throw error
            }
        }

        func stop() {
            b.stop()
            a.stop()
        }
    }

    static let roomy: JSON = ["name": "Pooled", "rate_limits": ["auth_per_minute_per_ip": 1000]]

    @Test func theAPIWorksThroughTheTransactionPooler() throws {
        guard TestDatabase.kinds.contains(.postgres) else { return }
        let pair = try Pair()
        defer { pair.stop() }
        let (a, b) = (pair.a, pair.b)

        // An admin call with the platform token, then the app's own admin calls with its secret key.
        let app = try a.createApp(Self.roomy)
        #expect(try b.request("GET", "/v1/admin/app", bearer: app.secretKey).status == 200)

        // Sign-up on A, sign-in on B, /me and refresh on both.
        let signedUp = try a.signUp(app)
        let userID = try #require(signedUp["user"]?["id"]?.stringValue)
        let signIn = try b.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"])
        #expect(signIn.status == 200, "\(signIn.text)")
        var refreshToken = try #require(signIn.data?["refresh_token"]?.stringValue)
        for node in pair.nodes + pair.nodes {
            let refreshed = try node.request("POST", "/v1/auth/refresh", appKey: app.appKey, json: ["refresh_token": .string(refreshToken)])
            #expect(refreshed.status == 200, "\(refreshed.text)")
            refreshToken = try #require(refreshed.data?["refresh_token"]?.stringValue)
            let access = try #require(refreshed.data?["access_token"]?.stringValue)
            let me = try node.request("GET", "/v1/me", appKey: app.appKey, bearer: access)
            #expect(me.status == 200 && me.data?["id"]?.stringValue == userID, "\(me.text)")
        }
        // The rotated-out token is refused as reused, on either node: the rotation is shared state.
        let reused = try a.request("POST", "/v1/auth/refresh", appKey: app.appKey, json: ["refresh_token": .string(try #require(signIn.data?["refresh_token"]?.stringValue))])
        #expect(reused.status == 401, "\(reused.text)")
        let user = try a.request("GET", "/v1/admin/users/\(userID)", bearer: app.secretKey)
        #expect(user.status == 200 && user.data?["email"]?.stringValue == "ada@example.com", "\(user.text)")

        // Many at once on both nodes (12 pooled clients, 2 server connections): sign-ups, sign-ins,
        // refreshes and /me calls, each its own session, all answered.
        let nodes = pair.nodes
        let results = concurrently(24) { i -> [Int] in
            let node = nodes[i % 2]
            let email = "user\(i)@example.com"
            let up = try node.request("POST", "/v1/auth/signup", appKey: app.appKey, json: ["email": .string(email), "password": "correct horse battery"])
            let other = nodes[(i + 1) % 2]
            let inAgain = try other.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": .string(email), "password": "correct horse battery"])
            var statuses = [up.status, inAgain.status]
            var token = inAgain.data?["refresh_token"]?.stringValue ?? ""
            for round in 0..<3 {
                let refreshed = try nodes[(i + round) % 2].request("POST", "/v1/auth/refresh", appKey: app.appKey, json: ["refresh_token": .string(token)])
                statuses.append(refreshed.status)
                token = refreshed.data?["refresh_token"]?.stringValue ?? ""
                let access = refreshed.data?["access_token"]?.stringValue ?? ""
                statuses.append(try other.request("GET", "/v1/me", appKey: app.appKey, bearer: access).status)
            }
            return statuses
        }
        let statuses = results.map { result in (try? result.get()) ?? [] }
        #expect(statuses.allSatisfy { $0 == [201, 200, 200, 200, 200, 200, 200, 200] }, "\(statuses)")
        let listed = try b.request("GET", "/v1/admin/users?query=example.com", bearer: app.secretKey)
        #expect(listed.status == 200, "\(listed.text)")

        // The clients really shared the server connections: PostgreSQL saw at most PgBouncer's pool.
        let open = pair.nodes.map { $0.gatehouse.database.poolStatistics.size }.reduce(0, +)
        #expect(open > Self.serverConnections, "the nodes hold \(open) pooled clients")
        let direct = try PostgresDatabase(url: try #require(TestDatabase.postgresBaseURL), poolSize: 1)
        defer { direct.close() }
        let sessions = try direct.query("SELECT count(*) AS n FROM pg_stat_activity WHERE datname = \(pair.databaseName)").first?.int64("n")
        #expect(sessions.map { $0 <= Int64(Self.serverConnections) } == true, "PostgreSQL sessions on the database: \(String(describing: sessions))")
    }

    /// SCRAM between a node and PgBouncer, installed as operations.md says (`auth_type =
    /// scram-sha-256`, the role's secret from `pg_authid` in the auth file): a node works through it;
    /// a node with a wrong password does not start, and its error does not carry the password.
    @Test func aNodeAuthenticatesToPgBouncerWithSCRAM() throws {
        guard TestDatabase.kinds.contains(.postgres) else { return }
        let bouncer = try #require(URLComponents(string: try Self.pgbouncerURL(scram: true)))
        let database = try TestDatabase.make(.postgres)
        guard case .postgres(let direct) = database.configuration else {
            database.drop()
            Issue.record("not a PostgreSQL test database")
            return
        }
        var url = bouncer
        url.path = try #require(URLComponents(string: direct)).path
        let pooled = try #require(url.string)
        let node = try TestServer(database: database) { configuration in
            configuration.database = .postgres(url: pooled)
            configuration.databasePooler = .transaction
        }
        defer { node.stop() }
        let app = try node.createApp(Self.roomy)
        let signedUp = try node.signUp(app)
        let refreshToken = try #require(signedUp["refresh_token"]?.stringValue)
        let refreshed = try node.request("POST", "/v1/auth/refresh", appKey: app.appKey, json: ["refresh_token": .string(refreshToken)])
        #expect(refreshed.status == 200, "\(refreshed.text)")
        let sessionUser = try node.gatehouse.database.transaction { db in
            try db.query("SELECT current_user AS name").first?.string("name")
        }
        #expect(sessionUser == bouncer.user, "the node's statements run as \(String(describing: sessionUser))")

        var wrong = url
        wrong.password = "not-the-password-7f3a"
        var configuration = node.gatehouse.configuration
        configuration.database = .postgres(url: try #require(wrong.string))
        do {
            try Gatehouse.open(configuration: configuration, log: Log(enabled: false)).close()
            Issue.record("a node with a wrong password started")
        } catch {
            let text = String(describing: error)
            #expect(text.contains("SASL authentication failed"), "\(text)")
            #expect(!text.contains("not-the-password-7f3a") && !text.contains(bouncer.password ?? "-"), "\(text)")
        }
    }

    /// Each node's statement timeout holds in each of its transactions, whichever server
    /// connection runs it, and no node's setting reaches another's transactions.
    @Test func eachNodesStatementTimeoutHoldsInItsTransactions() throws {
        guard TestDatabase.kinds.contains(.postgres) else { return }
        let pair = try Pair(statementTimeouts: (4_000, 7_000))
        defer { pair.stop() }
        var seen: [String] = []
        for _ in 0..<10 {
            for node in pair.nodes {
                let setting = try node.gatehouse.database.transaction { db in
                    try db.query("SELECT current_setting('statement_timeout') AS timeout").first?.string("timeout")
                }
                seen.append(setting ?? "nil")
            }
        }
        #expect(seen == Array(repeating: ["4s", "7s"], count: 10).flatMap { $0 }, "\(seen)")
    }

    /// Statements outside a transaction run under the role's (here the database's) own
    /// `statement_timeout`: a node warns at start when that bounds nothing, and not once the
    /// database sets one within the node's.
    @Test func aNodeWarnsWhenStatementsOutsideTransactionsAreUnbounded() throws {
        guard TestDatabase.kinds.contains(.postgres) else { return }
        // A third node's start on the pair's database, its log kept.
        func startLog(_ pair: Pair) throws -> String {
            let lines = Mutex<[UInt8]>([])
            let log = Log(enabled: true, level: .info, output: { bytes in lines.withLock { $0 += bytes } })
            try Gatehouse.open(configuration: pair.a.gatehouse.configuration, log: log).close()
            return String(decoding: lines.withLock { $0 }, as: UTF8.self)
        }
        let warning = "statements outside transactions are not bounded"
        let unbounded = try Pair()
        defer { unbounded.stop() }
        #expect(try startLog(unbounded).contains(warning))
        let bounded = try Pair(databaseTimeout: "3s")
        defer { bounded.stop() }
        #expect(try !startLog(bounded).contains(warning))
    }

    /// Two nodes try at once: exactly one runs the round; the other's try returns at once; once the
    /// round is over the next try runs. And a real round deletes through PgBouncer.
    @Test func exactlyOneNodeRunsAMaintenanceRound() throws {
        guard TestDatabase.kinds.contains(.postgres) else { return }
        let pair = try Pair()
        defer { pair.stop() }
        let (a, b) = (pair.a, pair.b)
        let app = try a.createApp(Self.roomy)
        _ = try a.signUp(app)

        var othersTry: Bool?? = .none
        let ran = try a.gatehouse.store.exclusively { round -> Bool in
            // While A's round holds the turn (between its statements, as between batches), B tries
            // several times, each on whatever server connection PgBouncer lends.
            for _ in 0..<4 {
                let tried = try b.gatehouse.store.exclusively { _ in true }
                if tried != nil { othersTry = .some(tried) }
                if othersTry == nil { othersTry = .some(nil) }
                _ = try round.delete(.events, in: MaintenanceWindow(to: 0), limit: 10)
            }
            return true
        }
        #expect(ran == true, "A ran its round")
        #expect(othersTry == .some(nil), "B's tries while A's round was under way: \(String(describing: othersTry))")
        // Over: B's turn now (the lease was given back, not left to expire).
        #expect(try b.gatehouse.store.exclusively { _ in true } == true)
        #expect(try a.gatehouse.store.exclusively { _ in true } == true)

        // A whole round through PgBouncer: the sign-up's events, a retention later, go.
        let later = Int64(Date().timeIntervalSince1970 * 1000) + a.gatehouse.maintenance.policy.eventRetentionMillis + 86_400_000
        let report = try #require(try b.gatehouse.maintenance.run(now: later))
        #expect((report.deleted[.events] ?? 0) > 0, "\(report)")
    }
}
