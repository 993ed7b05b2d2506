import GatehouseSQL
import GatehouseTesting
import PostgresDriver
import Testing

@Suite struct PostgresDriverTests {
    @Test func aFailedConnectionNeverShowsThePassword() {
        // Port 1 on loopback refuses at once; no server is needed.
        let error = sqlError {
            _ = try PostgresDatabase(url: "postgres://gatehouse:s3cr%40t-pw@127.0.0.1:1/gatehouse?connect_timeout=2")
        }
        #expect(error?.kind == .connection)
        #expect(error?.message.contains("s3cr") == false)
        #expect(error?.description.contains("s3cr") == false)
    }

    @Test func aMalformedURLIsAConnectionErrorWithoutThePassword() {
        let error = sqlError { _ = try PostgresDatabase(url: "postgres://user:hunter2@[bad/db?nonsense_option=1") }
        #expect(error?.kind == .connection)
        #expect(error?.message.contains("hunter2") == false)
    }

    @Test func aPasswordWithUnencodedSeparatorsIsNotQuotedPieceByPiece() {
        // libpq's parser splits these at `/` and `@`, and quotes the pieces as a port or a host.
        for url in ["postgres://user:PGpart/SECRETpass@127.0.0.1:1/db?connect_timeout=2", "postgres://user:SECRET@pass@127.0.0.1:1/db?connect_timeout=2"] {
            let error = sqlError { _ = try PostgresDatabase(url: url) }
            #expect(error?.kind == .connection)
            #expect(error?.description.contains("SECRET") == false, "\(error?.description ?? "")")
            #expect(error?.description.contains("PGpart") == false, "\(error?.description ?? "")")
        }
    }

    @Test(.enabled(if: TestDatabase.kinds.contains(.postgres)))
    func aConnectionKilledByTheServerIsReplaced() throws {
        try withDatabase(.postgres, poolSize: 1) { test in
            let db = test.database
            let pid = try db.query("SELECT pg_backend_pid() AS pid").first!.int64("pid")
            let other = try test.openAnother()
            defer { other.close() }
            _ = try other.query("SELECT pg_terminate_backend(\(pid)::int, 5000) AS done")
            // The server's FATAL left the idle connection readable: it is dropped before it is
            // lent, and the next call gets a fresh one without failing first.
            let fresh = try db.query("SELECT pg_backend_pid() AS pid").first!.int64("pid")
            #expect(fresh != pid)
            #expect(db.ping())
        }
    }

    @Test(.enabled(if: TestDatabase.kinds.contains(.postgres)))
    func postgresBooleansAndNumericsDecode() throws {
        try withDatabase(.postgres) { test in
            let row = try #require(try test.database.query(
                "SELECT TRUE AS yes, FALSE AS no, SUM(x) AS total, 2::int2 AS small FROM (VALUES (\(Int64.max)::bigint), (\(-1)::bigint)) AS v (x)"
            ).first)
            #expect(try row.bool("yes"))
            #expect(try !row.bool("no"))
            #expect(try row.int64("total") == Int64.max - 1)
            #expect(try row.int("small") == 2)
        }
    }

    /// Statements are prepared once per connection; a migration that changes a table under a
    /// prepared `SELECT *` (another node's, in a rolling deploy) must not break the next call.
    @Test(.enabled(if: TestDatabase.kinds.contains(.postgres)))
    func aPreparedStatementSurvivesAChangedTable() throws {
        try withDatabase(.postgres, poolSize: 1) { test in
            let db = test.database
            try db.execute("CREATE TABLE widgets (id BIGINT PRIMARY KEY)")
            try db.execute("INSERT INTO widgets (id) VALUES (\(1))")
            let select: SQL = "SELECT * FROM widgets WHERE id = \(1)"
            #expect(try db.query(select).first?.int64("id") == 1)
            #expect(try db.query(select).first?.int64("id") == 1)
            let other = try test.openAnother()
            defer { other.close() }
            try other.execute("ALTER TABLE widgets ADD COLUMN colour TEXT NOT NULL DEFAULT 'blue'")
            let row = try #require(try db.query(select).first)
            #expect(try row.string("colour") == "blue")
            #expect(try db.query(select).first?.string("colour") == "blue")
            // Inside a transaction the statement cannot be run again (the transaction is aborted):
            // that transaction fails, the next statement works.
            try other.execute("ALTER TABLE widgets ADD COLUMN size BIGINT NOT NULL DEFAULT 3")
            #expect(throws: SQLError.self) { try db.transaction { connection in try connection.query(select).count } }
            #expect(try db.query(select).first?.int64("size") == 3)
        }
    }
}
