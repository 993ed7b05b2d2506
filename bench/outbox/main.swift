// The outbox's own throughput (bench/README.md, "Outbox"): items delivered per second by the
// real OutboxWorker on the real store, with a handler that delivers at once, so that what is
// measured is the worker and its database work (a cheap read, a claim transaction and an outcome
// transaction per item). Against the ceiling measured in the same run: the database's rate of
// single-row UPDATE transactions through the same SQL layer.
//
//   outbox-bench sqlite PATH | postgres URL
//
// BENCH_OUTBOX_ITEMS (20,000), BENCH_OUTBOX_APPS (100), BENCH_OUTBOX_CEILING_SECONDS (3 per thread count).
import Foundation
import GatehouseApp
import GatehouseCore
import GatehouseSQL
import PostgresDriver
import SQLiteDriver
import Synchronization

let environment = ProcessInfo.processInfo.environment
let itemCount = Int(environment["BENCH_OUTBOX_ITEMS"] ?? "") ?? 20_000
let appCount = Int(environment["BENCH_OUTBOX_APPS"] ?? "") ?? 100
let ceilingSeconds = Double(environment["BENCH_OUTBOX_CEILING_SECONDS"] ?? "") ?? 3
let lanes = Int(environment["BENCH_OUTBOX_LANES"] ?? "") ?? 4  // the default (GATEHOUSE_OUTBOX_CONCURRENCY)
let perAppInFlight = Int(environment["BENCH_OUTBOX_PER_APP"] ?? "") ?? 2  // the default (GATEHOUSE_OUTBOX_PER_APP_IN_FLIGHT)
let kind = OutboxKind(rawValue: "bench")
let destination = "sink.bench.example:25"

/// One line per figure, written at once (also through `tee`, where `print` would buffer).
func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("outbox-bench: \(message)\n".utf8))
    exit(1)
}

let arguments = CommandLine.arguments
guard arguments.count == 3 else { fail("usage: outbox-bench sqlite PATH | postgres URL") }
let database: any SQLDatabase
// Two nodes of four lanes each, the ceiling's eight threads, and the bench's own look at the table.
let poolSize = 2 * lanes + 2
switch arguments[1] {
case "sqlite": database = try SQLiteDatabase(path: arguments[2], poolSize: poolSize)
case "postgres": database = try PostgresDatabase(url: arguments[2], poolSize: poolSize)
default: fail("unknown database \(arguments[1])")
}
_ = try Gatehouse.migrate(database)
let store = SQLStore(database: database)
let apps: [AppID] = (0..<appCount).map { AppID(unchecked: String(format: "app_outboxbench%014d", $0)) }
try database.transaction { db in
    for app in apps {
        try db.execute("""
            INSERT INTO apps (id, app_key, settings, version, source, created_at, updated_at)
            VALUES (\(app), \("key_" + app.rawValue), '{}', 1, 'admin', 0, 0)
            """)
    }
}

/// Delivers every item at once: the worker and the store are all that is measured.
struct NoOpHandler: OutboxHandler {
    var kind: OutboxKind { OutboxKind(rawValue: "bench") }
    func deliver(_ item: OutboxItem) -> OutboxDelivery { .delivered }
}

func rate(_ count: Int, _ seconds: Double) -> Double { Double(count) / seconds }
func vacuum() throws {
    if database.dialect == .postgres { try database.execute("VACUUM ANALYZE outbox") }
}

// The ceiling: `UPDATE outbox SET attempts = attempts + 1 WHERE id = ?`, one transaction each, on
// 1, 4 and 8 threads (on SQLite, transactions that arrive together share a commit, ADR 0019; on
// PostgreSQL, concurrent commits share an fsync), over rows the workers never see (delivered).
let ceilingRows = 1_000
try database.transaction { db in
    for index in 0..<ceilingRows {
        try db.execute("""
            INSERT INTO outbox (id, app_id, kind, idempotency_key, payload, sealed, attempts, next_attempt_at, created_at, delivered_at)
            VALUES (\("obx_ceiling\(index)"), \(apps[0]), 'bench_ceiling', \("ceiling\(index)"), '', 0, 0, 0, 0, 0)
            """)
    }
}
try vacuum()
var ceilings: [(threads: Int, rate: Double)] = []
for threads in [1, 4, 8] {
    let transactions = Atomic<Int>(0)
    let failures = Atomic<Int>(0)
    let start = Date()
    DispatchQueue.concurrentPerform(iterations: threads) { thread in
        var index = thread
        while Date().timeIntervalSince(start) < ceilingSeconds {
            do {
                try database.transaction { db in
                    _ = try db.execute("UPDATE outbox SET attempts = attempts + 1 WHERE id = \("obx_ceiling\(index % ceilingRows)")")
                }
                transactions.add(1, ordering: .relaxed)
            } catch {
                failures.add(1, ordering: .relaxed)
            }
            index += threads
        }
    }
    let seconds = Date().timeIntervalSince(start)
    guard failures.load(ordering: .relaxed) == 0 else { fail("ceiling: \(failures.load(ordering: .relaxed)) transactions failed") }
    ceilings.append((threads, rate(transactions.load(ordering: .relaxed), seconds)))
}
let ceiling = ceilings.map(\.rate).max() ?? 1
func f0(_ value: Double) -> String { String(format: "%.0f", value) }
func f1(_ value: Double) -> String { String(format: "%.1f", value) }
for (threads, value) in ceilings {
    say("\(arguments[1]) ceiling: single-row UPDATE transactions/s, \(threads) thread\(threads == 1 ? "" : "s"): \(f0(value))")
}
say("\(arguments[1]) ceiling for the ratios (the best of those): \(f0(ceiling)) tx/s; an item costs two write transactions (claim, outcome): 50 % is the bound")

/// Queues `itemCount` items over `appsUsed` apps (round robin), all due, in one transaction.
func fill(appsUsed: Int) throws {
    try database.execute("DELETE FROM outbox WHERE kind = \(kind.rawValue)")
    try database.execute("DELETE FROM outbox_destinations")
    let now = SystemClock().nowMillis()
    try database.transaction { db in
        for index in 0..<itemCount {
            try db.execute("""
                INSERT INTO outbox (id, app_id, kind, idempotency_key, payload, sealed, attempts, next_attempt_at, created_at, destination)
                VALUES (\("obx_bench\(index)"), \(apps[index % appsUsed]), \(kind.rawValue), \("bench\(index)"), '{}', 0, 0,
                        \(now - 60_000 + Int64(index / appsUsed)), \(now - 60_000), \(destination))
                """)
        }
    }
    try vacuum()
}

func run(appsUsed: Int, nodes: Int) throws {
    try fill(appsUsed: appsUsed)
    let workers = (0..<nodes).map { node in
        OutboxWorker(
            outbox: store.outbox, handlers: [NoOpHandler()], policy: OutboxRetryPolicy(maxBackoffSeconds: 3600), clock: SystemClock(),
            lanes: lanes, perAppInFlight: perAppInFlight, node: "node_bench\(node)")
    }
    func delivered() -> Int { workers.reduce(0) { $0 + $1.delivered.load(ordering: .relaxed) } }
    let start = Date()
    for worker in workers { worker.start() }
    for worker in workers { worker.wake() }
    var last = 0
    var lastChange = Date()
    while delivered() < itemCount {
        Thread.sleep(forTimeInterval: 0.005)
        let now = delivered()
        if now != last {
            last = now
            lastChange = Date()
        } else if Date().timeIntervalSince(lastChange) > 30 {
            fail("stalled at \(now) of \(itemCount) delivered")
        }
    }
    let seconds = Date().timeIntervalSince(start)
    for worker in workers { worker.stop() }
    let other = workers.reduce(0) { $0 + $1.retried.load(ordering: .relaxed) + $1.deadLettered.load(ordering: .relaxed) + $1.postponed.load(ordering: .relaxed) }
    let row = try database.query("""
        SELECT count(*) AS n, COALESCE(SUM(CASE WHEN delivered_at IS NOT NULL AND attempts = 1 THEN 1 ELSE 0 END), 0) AS once
        FROM outbox WHERE kind = \(kind.rawValue)
        """)[0]
    let (total, once) = (try row.int64("n"), try row.int64("once"))
    guard total == Int64(itemCount), once == Int64(itemCount), other == 0 else {
        fail("not every item was delivered exactly once on its first attempt (\(once) of \(total); retried, dead or postponed: \(other))")
    }
    let items = rate(itemCount, seconds)
    let split = nodes > 1 ? " (per node: " + workers.map { String($0.delivered.load(ordering: .relaxed)) }.joined(separator: " / ") + ")" : ""
    say(
        "\(arguments[1]), \(nodes) node\(nodes == 1 ? "" : "s"), \(appsUsed == 1 ? "1 app" : "\(appsUsed) apps"): \(f0(items)) items/s"
            + " (\(f1(seconds)) s for \(itemCount)) = \(f1(100 * items / ceiling)) % of the ceiling\(split)")
}

for nodes in [1, 2] {
    for appsUsed in [1, appCount] { try run(appsUsed: appsUsed, nodes: nodes) }
}
database.close()
