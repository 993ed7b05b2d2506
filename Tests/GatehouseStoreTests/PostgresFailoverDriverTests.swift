import Dispatch
import Foundation
import GatehouseCore
import GatehouseSQL
import GatehouseTesting
import PostgresDriver
import Synchronization
import Testing

/// What the driver says when PostgreSQL fails over (ADR 0036): a write that reached a read-only
/// server, a commit whose answer was lost, and a commit a synchronous standby did not confirm are
/// all "unavailable" (503 above), never a success; and no commit waits without bound.
@Suite struct PostgresFailoverDriverTests {
    @Test(.enabled(if: TestDatabase.kinds.contains(.postgres)))
    func aWriteRefusedAsReadOnlyIsUnavailableAndItsConnectionIsReplaced() throws {
        try withDatabase(.postgres, poolSize: 1) { test in
            let db = test.database
            try db.execute("CREATE TABLE t (id INT)")
            let pid = try db.query("SELECT pg_backend_pid() AS pid").first!.int64("pid")
            // What a connection that landed on a standby (no target_session_attrs=read-write) sees.
            try db.withConnection { try $0.executeScript("SET default_transaction_read_only = on") }
            let error = sqlError { try db.execute("INSERT INTO t VALUES (1)") }
            #expect(error?.state == "25006")
            #expect(error?.kind == .connection)
            #expect(error?.isUnavailable == true)
            // Not lent again: the next statement runs on a new connection, which can write.
            let fresh = try db.query("SELECT pg_backend_pid() AS pid").first!.int64("pid")
            #expect(fresh != pid)
            try db.execute("INSERT INTO t VALUES (2)")
            #expect(try db.query("SELECT count(*) AS n FROM t").first!.int64("n") == 1)
        }
    }

    @Test(.enabled(if: TestDatabase.kinds.contains(.postgres)))
    func aCommitWhoseAnswerIsLostIsAFailureNotASuccess() throws {
        try withDatabase(.postgres, poolSize: 1) { test in
            let db = test.database
            try db.execute("CREATE TABLE t (id INT)")
            let other = try test.openAnother()
            defer { other.close() }
            let error = sqlError {
                try db.transaction { connection in
                    try connection.execute("INSERT INTO t VALUES (1)")
                    let pid = try connection.query("SELECT pg_backend_pid() AS pid").first!.int64("pid")
                    // The server goes away before the COMMIT is answered.
                    _ = try other.query("SELECT pg_terminate_backend(\(pid)::int, 5000) AS done")
                }
            }
            #expect(error?.kind == .connection)
            #expect(try db.query("SELECT count(*) AS n FROM t").first!.int64("n") == 0)
        }
    }

    /// On a cluster of its own whose commits wait for a synchronous standby that never comes.
    @Test(.enabled(if: TestDatabase.kinds.contains(.postgres)))
    func aCommitNoSynchronousStandbyConfirmedIsNeverASuccess() throws {
        let postgres = try OwnPostgres()
        defer { postgres.destroy() }
        let admin = try PostgresDatabase(url: postgres.url, poolSize: 1)
        defer { admin.close() }
        try admin.execute("CREATE TABLE t (id INT)")
        // (scripts/postgres-test-server turns synchronous_commit off, which would not wait at all.)
        try admin.execute("ALTER SYSTEM SET synchronous_commit = on")
        try admin.execute("ALTER SYSTEM SET synchronous_standby_names = 'nobody'")
        _ = try admin.query("SELECT pg_reload_conf() AS ok")
        Thread.sleep(forTimeInterval: 0.5)

        // Bounded: a statement timeout of 300 ms lets a commit wait 2.3 s, then it fails.
        let bounded = try PostgresDatabase(url: postgres.url, poolSize: 2, statementTimeoutMillis: 300)
        defer { bounded.close() }
        for write in [
            { try bounded.transaction { _ = try $0.execute("INSERT INTO t VALUES (1)") } },
            { _ = try bounded.execute("INSERT INTO t VALUES (2)") },
        ] as [() throws -> Void] {
            let start = ContinuousClock.now
            let error = sqlError { try write() }
            let waited = ContinuousClock.now - start
            #expect(error?.kind == .connection && error?.isUnavailable == true, "\(String(describing: error))")
            #expect(waited >= .milliseconds(2_200) && waited < .seconds(5), "waited \(waited)")
        }
        // The server's sessions of the given-up commits were cancelled: none still waits for the
        // standby, holding its locks and a connection slot while the pool opens new ones.
        var waiting: Int64 = -1
        for _ in 0..<50 {
            waiting = try admin.query("SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event = 'SyncRep'").first!.int64("n")
            if waiting == 0 { break }
            Thread.sleep(forTimeInterval: 0.1)
        }
        #expect(waiting == 0, "\(waiting) sessions still wait for the standby")

        // Cancelled (by an operator here; the server then commits locally and only warns): the
        // commit happened on this server, but it is not reported as a success.
        let patient = try PostgresDatabase(url: postgres.url, poolSize: 1, statementTimeoutMillis: 60_000)
        defer { patient.close() }
        let outcome = Mutex<SQLError?>(nil)
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            let error = sqlError { try patient.transaction { _ = try $0.execute("INSERT INTO t VALUES (3)") } }
            outcome.withLock { $0 = error }
            done.signal()
        }
        var cancelled = false
        for _ in 0..<100 where !cancelled {
            Thread.sleep(forTimeInterval: 0.1)
            cancelled = try admin.query("""
                SELECT pg_cancel_backend(pid) AS done FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND query = 'COMMIT'
                """).first?.bool("done") ?? false
        }
        #expect(cancelled, "the COMMIT was seen waiting for the standby")
        #expect(done.wait(timeout: .now() + 10) == .success)
        let error = outcome.withLock { $0 }
        #expect(error?.kind == .commitUnconfirmed && error?.isUnavailable == true, "\(String(describing: error))")
        #expect(try admin.query("SELECT count(*) AS n FROM t WHERE id = 3").first!.int64("n") == 1, "committed on this server only")
    }

    /// A refresh retried within the grace window gets the same pair only once a synchronous standby
    /// has confirmed it (its first answer may have been a 503 for an unconfirmed rotation): on a
    /// primary whose standby never confirms, the retry waits as a rotation's commit does, and fails.
    @Test(.enabled(if: TestDatabase.kinds.contains(.postgres)))
    func aRefreshRetriedWithinGraceWaitsForTheStandbyLikeARotation() throws {
        let postgres = try OwnPostgres()
        defer { postgres.destroy() }
        let admin = try PostgresDatabase(url: postgres.url, poolSize: 1)
        defer { admin.close() }
        try admin.execute("ALTER SYSTEM SET synchronous_commit = on")
        _ = try admin.query("SELECT pg_reload_conf() AS ok")
        let database = try PostgresDatabase(url: postgres.url, poolSize: 2, statementTimeoutMillis: 300)
        defer { database.close() }
        let fixture = try MaintenanceTests.Fixture(database)
        let now = MaintenanceTests.now, minute = MaintenanceTests.minute
        let (_, tokens) = try fixture.session(createdAt: now, expiresAt: now + MaintenanceTests.day, refreshes: 1)
        // No standby to wait for yet: the retry is answered with the same pair.
        guard case .retried = try fixture.refresh(tokens[0], tokens[1], at: now + minute + 1_000) else {
            Issue.record("a retry within grace was not answered with the same pair")
            return
        }

        try admin.execute("ALTER SYSTEM SET synchronous_standby_names = 'nobody'")
        _ = try admin.query("SELECT pg_reload_conf() AS ok")
        Thread.sleep(forTimeInterval: 0.5)
        let start = ContinuousClock.now
        let error = sqlError { _ = try fixture.refresh(tokens[0], tokens[1], at: now + minute + 2_000) }
        let waited = ContinuousClock.now - start
        #expect(error?.isUnavailable == true, "\(String(describing: error))")
        #expect(waited >= .milliseconds(2_200) && waited < .seconds(5), "waited \(waited)")
    }
}
