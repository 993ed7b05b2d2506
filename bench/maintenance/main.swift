// Bounded storage, shown (bench/README.md, "Maintenance"): 200,000 refresh-token rotations on
// 1,000 sessions through the store, with the other tables the job tidies seeded past their time,
// then two maintenance rounds; row counts before and after each, the SQLite file's size, and the
// plan of every statement of the job on the loaded database.
//
//   maintenance-bench sqlite PATH | postgres URL
import Foundation
import GatehouseApp
import GatehouseCore
import GatehouseSQL
import PostgresDriver
import SQLiteDriver
import Synchronization

let environment = ProcessInfo.processInfo.environment
let sessionCount = Int(environment["BENCH_MAINT_SESSIONS"] ?? "") ?? 1_000
let refreshCount = Int(environment["BENCH_MAINT_REFRESHES"] ?? "") ?? 200_000
let seeded = Int(environment["BENCH_MAINT_SEEDED"] ?? "") ?? 10_000  // rows past their time in each other table
let threads = 4
let minute: Int64 = 60_000, hour: Int64 = 3_600_000, day: Int64 = 86_400_000

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("maintenance-bench: \(message)\n".utf8))
    exit(1)
}

let arguments = CommandLine.arguments
guard arguments.count == 3 else { fail("usage: maintenance-bench sqlite PATH | postgres URL") }
let database: any SQLDatabase
let sqlitePath: String?
switch arguments[1] {
case "sqlite":
    database = try SQLiteDatabase(path: arguments[2], poolSize: threads + 2)
    sqlitePath = arguments[2]
case "postgres":
    database = try PostgresDatabase(url: arguments[2], poolSize: threads + 2)
    sqlitePath = nil
default: fail("unknown database \(arguments[1])")
}
_ = try Gatehouse.migrate(database)
let store = SQLStore(database: database)
let appID = AppID(unchecked: "app_maintenancebench000000000")
try database.execute("""
    INSERT INTO apps (id, app_key, settings, version, source, created_at, updated_at)
    VALUES (\(appID), 'key_maintenance_bench', '{}', 1, 'admin', 0, 0)
    """)
let app = store.app(appID)

// Simulated time: sessions start at t0, each refreshed every 15 minutes (the default access-token
// lifetime) for its share of the refreshes; half are signed out after their last refresh.
let t0: Int64 = 1_800_000_000_000
let perSession = refreshCount / sessionCount
let lastRefresh = t0 + Int64(perSession) * 15 * minute
let origin = RequestOrigin(ip: "10.0.0.1", userAgent: "maintenance-bench")

func timed<T>(_ body: () throws -> T) rethrows -> (T, Double) {
    let start = Date()
    let result = try body()
    return (result, Date().timeIntervalSince(start))
}

// Users and sessions.
let sessions: [(SessionID, UserID, String)] = try (0..<sessionCount).map { index in
    let user = User(id: .generate(), email: "user\(index)@example.com", emailVerified: true, firstName: nil, lastName: nil, createdAt: t0, updatedAt: t0, lastSignInAt: nil)
    try app.users.insertUser(user, passwordHash: nil, identity: nil, event: Event(type: .userSignedUp, userID: user.id, sessionID: nil, ip: nil, userAgent: nil, createdAt: t0))
    let session = Session(id: .generate(), userID: user.id, method: .password, authTime: t0, createdAt: t0, lastUsedAt: t0, expiresAt: t0 + 30 * day, ip: nil, userAgent: nil)
    let token = "s\(index)-0"
    try app.sessions.insertSession(session, refreshTokenHash: token, event: Event(type: .userSignedIn, userID: user.id, sessionID: session.id, ip: nil, userAgent: nil, createdAt: t0), passwordHash: nil)
    return (session.id, user.id, token)
}

// The refreshes, on `threads` threads, each over its own sessions.
let failures = Atomic<Int>(0)
let (_, refreshSeconds) = timed {
    DispatchQueue.concurrentPerform(iterations: threads) { thread in
        for index in stride(from: thread, to: sessionCount, by: threads) {
            var current = sessions[index].2
            for step in 1...perSession {
                let successor = "s\(index)-\(step)"
                do {
                    let outcome = try app.sessions.rotateRefreshToken(
                        presentedHash: current, successorHash: successor, graceMillis: 10_000, usedSince: 0, origin: origin,
                        now: t0 + Int64(step) * 15 * minute, reuseEvents: { _ in [] })
                    guard case .rotated = outcome else { failures.add(1, ordering: .relaxed); break }
                } catch {
                    failures.add(1, ordering: .relaxed)
                    break
                }
                current = successor
            }
        }
    }
}
guard failures.load(ordering: .relaxed) == 0 else { fail("\(failures.load(ordering: .relaxed)) refresh chains failed") }
for (id, user, _) in sessions.prefix(sessionCount / 2) {
    _ = try app.sessions.endSession(id, user: user, reason: .signedOut, now: lastRefresh)
}

// The other tables, each with `seeded` rows past their time at the first round and a tenth as many inside it.
let firstRound = lastRefresh + 5 * minute
try database.transaction { db in
    let user = sessions[0].1
    for index in 0..<(seeded + seeded / 10) {
        let past = index < seeded
        let expires = past ? firstRound - hour : firstRound + 5 * minute
        try db.execute("""
            INSERT INTO web_flows (id, app_id, binding_hash, nonce, redirect_uri, created_at, expires_at)
            VALUES (\("flow\(index)"), \(appID), 'b', 'n', 'https://app.example/cb', \(expires - 10 * minute), \(expires))
            """)
        try db.execute("""
            INSERT INTO login_codes (code_hash, app_id, user_id, method, is_new_user, created_at, expires_at)
            VALUES (\("code\(index)"), \(appID), \(user), 'password', 0, \(expires - minute), \(expires))
            """)
        try db.execute("INSERT INTO provider_nonces (nonce_key, expires_at) VALUES (\("nonce\(index)"), \(expires))")
        let sent = past ? firstRound - 2 * hour : firstRound - 10 * minute
        try db.execute("""
            INSERT INTO email_codes (app_id, purpose, subject, expires_at, last_sent_at, window_start, window_sends)
            VALUES (\(appID), 'verify_email', \("subject\(index)"), \(sent + 10 * minute), \(sent), \(sent), 1)
            """)
        try db.execute("""
            INSERT INTO rate_limits (app_id, bucket, window_start, hits)
            VALUES (\(appID), \("auth:10.\(index / 65536).\(index / 256 % 256).\(index % 256)"), \(past ? firstRound - hour : firstRound - minute), 1)
            """)
        let delivered = past ? firstRound - 8 * day : firstRound - 6 * day
        try db.execute("""
            INSERT INTO outbox (id, app_id, kind, idempotency_key, payload, next_attempt_at, created_at, delivered_at)
            VALUES (\("obx\(index)"), \(appID), 'mail', \("obx\(index)"), '', \(delivered), \(delivered), \(delivered))
            """)
        try db.execute("""
            INSERT INTO events (id, app_id, type, data, created_at)
            VALUES (\("evt_old\(index)"), \(appID), 'user.sign_in_failed', '{}', \(past ? firstRound - 401 * day : firstRound - 399 * day))
            """)
    }
}

let tables = ["refresh_tokens", "sessions", "users", "web_flows", "login_codes", "email_codes", "provider_nonces", "rate_limits", "outbox", "events"]
func counts() throws -> [String: Int] {
    var result: [String: Int] = [:]
    for table in tables { result[table] = try database.query("SELECT COUNT(*) AS n FROM \(unsafeSQL: table)").first?.int("n") ?? -1 }
    return result
}

func fileSizes() -> String {
    guard let path = sqlitePath else { return "" }
    func size(_ file: String) -> Int64 { ((try? FileManager.default.attributesOfItem(atPath: file))?[.size] as? NSNumber)?.int64Value ?? 0 }
    let pages = (try? database.query("PRAGMA page_count").first?.int64("page_count")) ?? -1
    let free = (try? database.query("PRAGMA freelist_count").first?.int64("freelist_count")) ?? -1
    return String(format: "file %.1f MiB, WAL %.1f MiB, %lld pages of which %lld free", Double(size(path)) / 1_048_576, Double(size(path + "-wal")) / 1_048_576, pages, free)
}

/// Each task's plan for its first window of the first round, as the job will run it.
func plans(_ policy: MaintenancePolicy) throws -> [String] {
    var lines: [String] = []
    var explained = Set<MaintenanceTask>()
    for (task, window) in policy.windows(now: firstRound) where explained.insert(task).inserted {
        let statement = SQLStore.maintenanceStatement(task, in: window, limit: policy.batchSize, dialect: database.dialect)
        let plan: [String] = try database.withConnection { db in
            switch db.dialect {
            case .sqlite: return try db.query("EXPLAIN QUERY PLAN " + statement).map { try $0.string("detail") }
            case .postgres: return try db.query("EXPLAIN " + statement).map { try $0.string("QUERY PLAN") }
            }
        }
        let shown = plan.filter { line in ["SEARCH", "SCAN", "Scan", "Index Cond", "TID Cond"].contains { line.contains($0) } }
        lines.append("- `\(task.rawValue)`: " + shown.map { $0.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "->  ", with: "") }.joined(separator: "; "))
    }
    return lines
}

let policy = MaintenancePolicy(intervalSeconds: 300, refreshGraceSeconds: 10, eventRetentionDays: 400)
switch database.dialect {
case .postgres: try database.execute("ANALYZE")
// The load's pages all in the file, so that its size says what the database holds.
case .sqlite: try database.withConnection { db in try db.executeScript("PRAGMA wal_checkpoint(TRUNCATE)") }
}
let before = try counts()
let sizeBefore = fileSizes()
let planLines = try plans(policy)

let job = Maintenance(store: store, policy: policy)
let (first, firstSeconds) = try timed { try job.run(now: firstRound) }
let afterFirst = try counts()
let sizeAfterFirst = fileSizes()
// Two months on: every session has expired more than 30 days ago.
let secondRound = t0 + 61 * day
let (second, secondSeconds) = try timed { try job.run(now: secondRound) }
let afterSecond = try counts()
let sizeAfterSecond = fileSizes()
guard let first, let second else { fail("a round did not run (the lock was held)") }

print("### \(arguments[1])\n")
print("\(refreshCount) refreshes on \(sessionCount) sessions (\(perSession) each, 15 simulated minutes apart) in \(String(format: "%.1f", refreshSeconds)) s on \(threads) threads; then \(sessionCount / 2) sessions signed out. Each other table seeded with \(seeded) rows past their time and \(seeded / 10) inside.\n")
print("Round 1 at the last refresh + 5 min: \(first.rows) rows in \(String(format: "%.2f", firstSeconds)) s (batches of \(policy.batchSize)), \(first.pagesFreed) pages freed. Round 2, 61 days after the sessions started: \(second.rows) rows in \(String(format: "%.2f", secondSeconds)) s, \(second.pagesFreed) pages freed.\n")
print("| table | before | after round 1 | after round 2 |")
print("|---|---:|---:|---:|")
for table in tables { print("| `\(table)` | \(before[table]!) | \(afterFirst[table]!) | \(afterSecond[table]!) |") }
if sqlitePath != nil {
    print("\nSQLite: before (after a full checkpoint), \(sizeBefore); after round 1, \(sizeAfterFirst); after round 2, \(sizeAfterSecond) (the job's own passive checkpoint; the WAL keeps its largest size, docs/operations.md).")
}
print("\nPlans of round 1's statements on the loaded database\(database.dialect == .postgres ? " (after ANALYZE, sequential scans allowed)" : ""):\n")
for line in planLines { print(line) }
print("")
database.close()
