import Foundation
import GatehouseSQL
import GatehouseTesting
import PostgresDriver
import SQLiteDriver
import Synchronization
import Testing

extension TestDatabaseKind {
    /// A fresh, empty database of this kind (on PostgreSQL a schema of its own in
    /// `GATEHOUSE_TEST_POSTGRES_URL`'s database). Which kinds run is ``TestDatabase/kinds``'s to say.
    func open(_ poolSize: Int) throws -> OpenedDatabase {
        switch self {
        case .sqlite:
            let folder = FileManager.default.temporaryDirectory
                .appendingPathComponent("gatehouse-store-tests-\(UUID().uuidString)")
            // A folder that does not exist yet: SQLiteDatabase must create it.
            let path = folder.appendingPathComponent("nested/gatehouse.db").path
            let database = try SQLiteDatabase(path: path, poolSize: poolSize)
            return OpenedDatabase(
                database: database,
                openAnother: { try SQLiteDatabase(path: path, poolSize: poolSize) },
                cleanup: { try? FileManager.default.removeItem(at: folder) })
        case .postgres:
            let environment = ProcessInfo.processInfo.environment
            guard let base = environment["GATEHOUSE_TEST_POSTGRES_URL"], !base.isEmpty else {
                throw SetupError(
                    "GATEHOUSE_TEST_POSTGRES_URL is not set. Start a server with "
                        + "`export GATEHOUSE_TEST_POSTGRES_URL=$(scripts/postgres-test-server)`, "
                        + "or set GATEHOUSE_TEST_SKIP_POSTGRES=1 to disable the PostgreSQL tests.")
            }
            let schema = "gh_test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
            let admin = try PostgresDatabase(url: base, poolSize: 1)
            try admin.execute("CREATE SCHEMA \(unsafeSQL: schema)")
            let url = base + (base.contains("?") ? "&" : "?") + "options=-csearch_path%3D\(schema)"
            let database = try PostgresDatabase(url: url, poolSize: poolSize)
            return OpenedDatabase(
                database: database,
                openAnother: { try PostgresDatabase(url: url, poolSize: poolSize) },
                cleanup: {
                    _ = try? admin.execute("DROP SCHEMA \(unsafeSQL: schema) CASCADE")
                    admin.close()
                })
        }
    }

    var dialect: SQLDialect { self == .postgres ? .postgres : .sqlite }
}

/// A fresh database for one test, removed by ``withDatabase(_:poolSize:_:)``.
struct OpenedDatabase {
    let database: any SQLDatabase
    /// Opens a second pool on the same database (for tests of two nodes starting at once).
    let openAnother: () throws -> any SQLDatabase
    let cleanup: () -> Void
}

struct SetupError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Runs `body` with a fresh database of `kind`, then closes and removes it.
func withDatabase<T>(
    _ kind: TestDatabaseKind, poolSize: Int = 4, _ body: (OpenedDatabase) throws -> T
) throws -> T {
    let test = try kind.open(poolSize)
    defer {
        test.database.close()
        test.cleanup()
    }
    return try body(test)
}

/// Creates the tables the contract tests use (the only dialect difference: the blob type).
func createContractSchema(_ database: any SQLDatabase) throws {
    let blob = database.dialect == .sqlite ? "BLOB" : "BYTEA"
    try database.withConnection { connection in
        try connection.executeScript("""
            CREATE TABLE items (
                id TEXT PRIMARY KEY,
                label TEXT UNIQUE,
                amount BIGINT,
                flag BOOLEAN,
                data \(blob),
                quantity BIGINT CHECK (quantity >= 0)
            );
            CREATE TABLE parts (
                id TEXT PRIMARY KEY,
                item_id TEXT NOT NULL REFERENCES items (id)
            );
            CREATE TABLE counters (name TEXT PRIMARY KEY, value BIGINT NOT NULL);
            CREATE TABLE counter_log (value BIGINT PRIMARY KEY);
            """)
    }
}

/// Records failures from background threads.
final class Failures: Sendable {
    private let list = Mutex<[String]>([])
    func record(_ failure: String) { list.withLock { $0.append(failure) } }
    var all: [String] { list.withLock { $0 } }
}

/// Runs `body(index)` on `count` threads at once and waits for all of them.
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let group = DispatchGroup()
    for index in 0..<count {
        startThread(in: group) { body(index) }
    }
    group.wait()
}

/// Starts `body` on a thread of its own that `group` waits for.
func startThread(in group: DispatchGroup, _ body: @escaping @Sendable () -> Void) {
    group.enter()
    Thread {
        body()
        group.leave()
    }.start()
}

/// A deterministic stand-in for the SHA-256 the composition root passes: length + FNV-1a 64.
@Sendable func testChecksum(_ text: String) -> String {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in text.utf8 {
        hash ^= UInt64(byte)
        hash &*= 0x100_0000_01b3
    }
    return "\(text.utf8.count)-" + String(hash, radix: 16)
}

struct Marker: Error {}

/// The SQLError thrown by `body`, or a test failure when it threw something else or nothing.
func sqlError(_ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> SQLError? {
    do {
        try body()
        Issue.record("expected an SQLError, nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as SQLError {
        return error
    } catch {
        Issue.record("expected an SQLError, got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}
