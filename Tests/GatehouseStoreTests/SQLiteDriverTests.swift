import GatehouseSQL
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
                ].map { $0 ?? "missing" }
            }
            // WAL, synchronous NORMAL (1), foreign keys on, checkpoints every 10,000 pages: on the
            // first connection and on a second, opened while the first is in use.
            let expected = ["wal", "1", "1", "10000"]
            let (first, second) = try test.database.withConnection { first in
                (try settings(first), try test.database.transaction(settings))
            }
            #expect(first == expected)
            #expect(second == expected)
            #expect(test.database.poolStatistics.size == 2)
        }
    }
}
