import Foundation
import GatehouseSQL
import SQLiteDriver
import Synchronization
import Testing

@Suite struct SQLiteDriverTests {
    @Test func everyConnectionRunsWithTheDocumentedSettings() throws {
        try withDatabase(.sqlite, poolSize: 2) { test in
            func settings(_ connection: any SQLConnection) throws -> [String] {
                try [
                    connection.query("PRAGMA journal_mode").first?.string("journal_mode"),
                    try connection.query("PRAGMA synchronous").first.map { String(try $0.int64("synchronous")) },
                    try connection.query("PRAGMA foreign_keys").first.map { String(try $0.int64("foreign_keys")) },
                    try connection.query("PRAGMA wal_autocheckpoint").first.map { String(try $0.int64("wal_autocheckpoint")) },
                    try connection.query("PRAGMA cache_size").first.map { String(try $0.int64("cache_size")) },
                ].map { $0 ?? "missing" }
            }
            // WAL, synchronous FULL (2: each commit syncs the WAL, ADR 0023), foreign keys on, no
            // automatic checkpoint (0: the WAL hook asks the checkpoint thread instead, ADR 0021), a
            // 512 KiB page cache: on the first connection and on a second, opened while the first
            // is in use.
            let expected = ["wal", "2", "1", "0", "-512"]
            let (first, second) = try test.database.withConnection { first in
                (try settings(first), try test.database.transaction(settings))
            }
            #expect(first == expected)
            #expect(second == expected)
            #expect(test.database.poolStatistics.size == 2)
        }
    }

    /// Transactions that arrive while one runs wait, and then commit together in one group.
    @Test func transactionsQueuedBehindAWriteCommitAsOneGroup() throws {
        try withDatabase(.sqlite, poolSize: 4) { test in
            let db = try #require(test.database as? SQLiteDatabase)
            try createContractSchema(db)
            let before = db.groupCommitStatistics
            let leaderStarted = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            let failures = Failures()
            let done = DispatchGroup()
            startThread(in: done) {
                do {
                    try db.transaction { connection in
                        try connection.execute("INSERT INTO items (id) VALUES (\("leader"))")
                        leaderStarted.signal()
                        release.wait()
                    }
                } catch {
                    failures.record("leader: \(error)")
                }
            }
            leaderStarted.wait()
            for index in 1...5 {
                startThread(in: done) {
                    do {
                        try db.transaction { connection in
                            try connection.execute("INSERT INTO items (id) VALUES (\("follower-\(index)"))")
                            if index == 3 { throw Marker() }
                        }
                        if index == 3 { failures.record("follower 3 committed") }
                    } catch {
                        if index != 3 || !(error is Marker) { failures.record("follower \(index): \(error)") }
                    }
                }
            }
            // All five wait for the group the leader is running.
            let deadline = Date().addingTimeInterval(10)
            while db.groupCommitStatistics.queued < 5, Date() < deadline { usleep(1_000) }
            #expect(db.groupCommitStatistics.queued == 5)
            release.signal()
            done.wait()
            #expect(failures.all == [])
            let after = db.groupCommitStatistics
            #expect(after.groups - before.groups == 2)
            #expect(after.transactions - before.transactions == 6)
            #expect(after.queued == 0)
            let ids = try db.query("SELECT id FROM items ORDER BY id").map { try $0.string("id") }
            #expect(ids == ["follower-1", "follower-2", "follower-4", "follower-5", "leader"])
        }
    }

    /// Writes that never pause leave the WAL bounded: the checkpoint thread copies it back beside
    /// them, and the next commit copies the rest so that the WAL starts over (ADR 0021).
    @Test func theWALIsCopiedBackBesideTheWritersAndStartsOver() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-checkpoint-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("gatehouse.db").path
        let pages = 64
        let db = try SQLiteDatabase(path: path, poolSize: 4, checkpointPages: pages)
        defer { db.close() }
        try createContractSchema(db)
        let failures = Failures()
        let payload = [UInt8](repeating: 7, count: 3000)  // a page of its own for every row
        // The writers go on until the WAL has started over twice (at least 500 rows each, at
        // most 5,000): how many rows that takes depends on how long a background pass's fsyncs
        // take, alone or beside other suites' (a fixed 2,000 rows once ended before the first
        // pass had, and the WAL still held them all).
        let written = Atomic<Int>(0)
        onThreads(4) { thread in
            for index in 0..<5_000 {
                if index >= 500, db.checkpointStatistics.restarts >= 2 { break }
                do {
                    try db.transaction { connection in
                        _ = try connection.execute("INSERT INTO items (id, data) VALUES (\("\(thread)-\(index)"), \(payload))")
                    }
                    written.add(1, ordering: .relaxed)
                } catch {
                    failures.record("\(thread)-\(index): \(error)")
                }
            }
        }
        #expect(failures.all == [])
        let rows = written.load(ordering: .relaxed)
        let statistics = db.checkpointStatistics
        // Each background pass was followed by a committing writer's short pass, and the WAL
        // started over (the last background pass may end after the last commit).
        #expect(statistics.restarts >= 2)
        #expect(statistics.afterBackground >= statistics.background - 1)
        #expect(statistics.restarts >= statistics.background - 1)
        // Every row went through the WAL (a frame of a 4 KiB page and a 24-byte header each, at
        // least); starting over, it never held them all.
        let walBytes = try #require(try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int)
        #expect(walBytes < rows * (4096 + 24))
        #expect(try db.query("SELECT count(*) AS n FROM items").first?.int64("n") == Int64(rows))
        #expect(try db.query("PRAGMA integrity_check").first?.string("integrity_check") == "ok")
    }
}
