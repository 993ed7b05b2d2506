import Foundation
import GatehouseSQL
import GatehouseTesting
import Testing

/// The same contract, run on every database engine.
@Suite struct StoreContractTests {
    @Test(arguments: TestDatabase.kinds)
    func everyBindTypeRoundTrips(kind: TestDatabaseKind) throws {
        try withDatabase(kind) { test in
            let db = test.database
            try createContractSchema(db)
            let allBytes = (0...255).map { UInt8($0) }
            let missingText: String? = nil
            let missingBytes: [UInt8]? = nil
            try db.execute("""
                INSERT INTO items (id, label, amount, flag, data) VALUES
                    (\("max"), \("a"), \(Int64.max), \(true), \(allBytes)),
                    (\("min"), \("b"), \(Int64.min), \(false), \([UInt8]())),
                    (\("zeros"), \(missingText), \(0), \(true), \([UInt8](repeating: 0, count: 3))),
                    (\("nulls"), \(SQLValue.null), \(Int?.none), \(Bool?.none), \(missingBytes)),
                    (\("int"), \("e"), \(42 as Int), \(Optional(false)), \(Optional([UInt8]([1, 2]))))
                """)
            let rows = try db.query("SELECT id, label, amount, flag, data FROM items ORDER BY id")
            let byID = Dictionary(uniqueKeysWithValues: try rows.map { (try $0.string("id"), $0) })

            let max = try #require(byID["max"])
            #expect(try max.string("label") == "a")
            #expect(try max.int64("amount") == Int64.max)
            #expect(try max.bool("flag") == true)
            #expect(try max.bytes("data") == allBytes)

            let min = try #require(byID["min"])
            #expect(try min.int64("amount") == Int64.min)
            #expect(try min.bool("flag") == false)
            #expect(try min.optionalBytes("data") == [])

            let zeros = try #require(byID["zeros"])
            #expect(try zeros.optionalString("label") == nil)
            #expect(try zeros.int("amount") == 0)
            #expect(try zeros.bytes("data") == [0, 0, 0])

            let nulls = try #require(byID["nulls"])
            #expect(try nulls.optionalString("label") == nil)
            #expect(try nulls.optionalInt64("amount") == nil)
            #expect(try nulls.optionalBytes("data") == nil)
            #expect(nulls["flag"] == .null)

            let int = try #require(byID["int"])
            #expect(try int.int("amount") == 42)
            #expect(try int.optionalInt64("amount") == 42)
            #expect(try int.bool("flag") == false)
            #expect(try int.bytes("data") == [1, 2])
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func unicodeTextRoundTrips(kind: TestDatabaseKind) throws {
        try withDatabase(kind) { test in
            let db = test.database
            try createContractSchema(db)
            let texts = ["Zoë", "👩🏽‍💻 emoji ZWJ", "日本語のテキスト", "עברית", "e\u{0301} combining", "", " spaced "]
            for (index, text) in texts.enumerated() {
                try db.execute("INSERT INTO items (id, label) VALUES (\("t\(index)"), \(text))")
            }
            for (index, text) in texts.enumerated() {
                let row = try #require(try db.query("SELECT id, label FROM items WHERE label = \(text)").first)
                #expect(try row.string("id") == "t\(index)")
                #expect(try row.string("label") == text)
                #expect(try row.string("label").utf8.elementsEqual(text.utf8))
            }
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func textWithANULIsRefusedAndNeverMatchesTheTextBeforeIt(kind: TestDatabaseKind) throws {
        try withDatabase(kind) { test in
            let db = test.database
            try createContractSchema(db)
            try db.execute("INSERT INTO items (id, label) VALUES (\("pk_real"), \("real"))")
            // libpq reads text parameters as C strings: this looked up `pk_real`.
            let lookup = #expect(throws: SQLError.self) {
                try db.query("SELECT id FROM items WHERE id = \("pk_real\u{0}junk")")
            }
            #expect(lookup?.kind == .invalidValue)
            let insert = #expect(throws: SQLError.self) {
                try db.execute("INSERT INTO items (id, label) VALUES (\("n\u{0}"), \("x"))")
            }
            #expect(insert?.kind == .invalidValue)
            #expect(try db.query("SELECT id FROM items").map { try $0.string("id") } == ["pk_real"])
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func injectionLookingTextIsStoredLiterally(kind: TestDatabaseKind) throws {
        try withDatabase(kind) { test in
            let db = test.database
            try createContractSchema(db)
            let hostile = [
                "'); DROP TABLE items; --",
                "' OR '1'='1",
                "$1 ?1 ? $2 :name @x",
                "back\\slash \"quoted\" 'single'",
                "semi; colon -- comment /* block */",
            ]
            for (index, text) in hostile.enumerated() {
                try db.execute("INSERT INTO items (id, label) VALUES (\(text), \("label \(index)"))")
            }
            #expect(try db.query("SELECT COUNT(*) AS n FROM items").first?.int("n") == hostile.count)
            for text in hostile {
                let rows = try db.query("SELECT id FROM items WHERE id = \(text)")
                #expect(try rows.map { try $0.string("id") } == [text])
            }
            #expect(try db.query("SELECT id FROM items WHERE id = \("' OR '1'='1' --")").isEmpty)
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func uniqueViolationIsReportedWithItsKind(kind: TestDatabaseKind) throws {
        try withDatabase(kind) { test in
            let db = test.database
            try createContractSchema(db)
            try db.execute("INSERT INTO items (id, label) VALUES (\("one"), \("first"))")

            let duplicateKey = sqlError { try db.execute("INSERT INTO items (id, label) VALUES (\("one"), \("other"))") }
            #expect(duplicateKey?.kind == .uniqueViolation)
            #expect(duplicateKey?.constraint?.contains("items") == true)

            let duplicateLabel = sqlError { try db.execute("INSERT INTO items (id, label) VALUES (\("two"), \("first"))") }
            #expect(duplicateLabel?.kind == .uniqueViolation)
            #expect(duplicateLabel?.constraint?.contains("label") == true)
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func foreignKeyAndCheckViolationsAreReportedWithTheirKinds(kind: TestDatabaseKind) throws {
        try withDatabase(kind) { test in
            let db = test.database
            try createContractSchema(db)
            let orphan = sqlError { try db.execute("INSERT INTO parts (id, item_id) VALUES (\("p"), \("nowhere"))") }
            #expect(orphan?.kind == .foreignKeyViolation)

            let negative = sqlError { try db.execute("INSERT INTO items (id, quantity) VALUES (\("x"), \(-1))") }
            #expect(negative?.kind == .checkViolation)
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func transactionRollsBackWhenTheBodyThrows(kind: TestDatabaseKind) throws {
        try withDatabase(kind) { test in
            let db = test.database
            try createContractSchema(db)
            var thrown: (any Error)?
            do {
                try db.transaction { connection -> Void in
                    try connection.execute("INSERT INTO items (id) VALUES (\("a"))")
                    try connection.execute("INSERT INTO counters (name, value) VALUES (\("c"), \(1))")
                    throw Marker()
                }
            } catch {
                thrown = error
            }
            #expect(thrown is Marker)
            let failed = sqlError {
                try db.transaction { connection -> Void in
                    try connection.execute("INSERT INTO items (id) VALUES (\("b"))")
                    try connection.execute("INSERT INTO items (id) VALUES (\("b"))")
                }
            }
            #expect(failed?.kind == .uniqueViolation)
            #expect(try db.query("SELECT COUNT(*) AS n FROM items").first?.int("n") == 0)
            #expect(try db.query("SELECT COUNT(*) AS n FROM counters").first?.int("n") == 0)
            // The connections went back to the pool in a usable state.
            #expect(db.poolStatistics.inUse == 0)
            try db.execute("INSERT INTO items (id) VALUES (\("after"))")
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func committedTransactionIsVisibleToOtherConnections(kind: TestDatabaseKind) throws {
        try withDatabase(kind) { test in
            let db = test.database
            try createContractSchema(db)
            let returned = try db.transaction { connection in
                try connection.execute("INSERT INTO items (id, amount) VALUES (\("a"), \(7))")
                return try connection.query("SELECT amount FROM items WHERE id = \("a")").first?.int("amount")
            }
            #expect(returned == 7)
            let other = try test.openAnother()
            defer { other.close() }
            #expect(try other.query("SELECT amount FROM items WHERE id = \("a")").first?.int("amount") == 7)
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func concurrentTransactionsFromEightThreadsAddUpExactly(kind: TestDatabaseKind) throws {
        try withDatabase(kind, poolSize: 4) { test in
            let db = test.database
            try createContractSchema(db)
            try db.execute("INSERT INTO counters (name, value) VALUES (\("hits"), \(0))")
            let perThread = 25
            let failures = Failures()
            onThreads(8) { _ in
                for _ in 0..<perThread {
                    do {
                        try db.transaction { connection in
                            let value = try connection.query(
                                "UPDATE counters SET value = value + 1 WHERE name = \("hits") RETURNING value"
                            ).first?.int64("value")
                            try connection.execute("INSERT INTO counter_log (value) VALUES (\(value))")
                        }
                    } catch {
                        failures.record("\(error)")
                    }
                }
            }
            #expect(failures.all == [])
            #expect(try db.query("SELECT value FROM counters").first?.int("value") == 8 * perThread)
            #expect(try db.query("SELECT COUNT(*) AS n FROM counter_log").first?.int("n") == 8 * perThread)
            let statistics = db.poolStatistics
            #expect(statistics.size <= 4)
            #expect(statistics.inUse == 0)
            #expect(statistics.waiting == 0)
        }
    }

    /// On SQLite these transactions share commits (group commit): each must still get its own
    /// result, and one that throws must lose its own writes and nobody else's.
    @Test(arguments: TestDatabase.kinds)
    func concurrentTransactionsThatFailLoseOnlyTheirOwnWrites(kind: TestDatabaseKind) throws {
        try withDatabase(kind, poolSize: 4) { test in
            let db = test.database
            try createContractSchema(db)
            try db.execute("INSERT INTO counters (name, value) VALUES (\("hits"), \(0))")
            let perThread = 30
            let failures = Failures()
            onThreads(8) { thread in
                for index in 0..<perThread {
                    let id = "t\(thread)-\(index)"
                    do {
                        let returned = try db.transaction { connection -> String in
                            try connection.execute("INSERT INTO items (id, amount) VALUES (\(id), \(index))")
                            try connection.execute("UPDATE counters SET value = value + 1 WHERE name = \("hits")")
                            switch index % 3 {
                            case 1: throw Marker()
                            case 2: try connection.execute("INSERT INTO items (id) VALUES (\(id))")  // its own id again: a unique violation
                            default: break
                            }
                            return try connection.query("SELECT id FROM items WHERE id = \(id)").first!.string("id")
                        }
                        if index % 3 != 0 { failures.record("\(id) committed") }
                        if returned != id { failures.record("\(id) got \(returned)") }
                    } catch is Marker {
                        if index % 3 != 1 { failures.record("\(id) threw Marker") }
                    } catch let error as SQLError where error.kind == .uniqueViolation {
                        if index % 3 != 2 { failures.record("\(id) threw \(error)") }
                    } catch {
                        failures.record("\(id): \(error)")
                    }
                }
            }
            #expect(failures.all == [])
            let committed = 8 * ((perThread + 2) / 3)
            #expect(try db.query("SELECT value FROM counters").first?.int("value") == committed)
            let ids = try db.query("SELECT id FROM items").map { try $0.string("id") }
            #expect(ids.count == committed)
            #expect(ids.allSatisfy { Int($0.split(separator: "-")[1])! % 3 == 0 })
            #expect(db.poolStatistics.inUse == 0)
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func returningGivesTheWrittenRow(kind: TestDatabaseKind) throws {
        try withDatabase(kind) { test in
            let db = test.database
            try createContractSchema(db)
            let inserted = try db.query(
                "INSERT INTO items (id, amount, data) VALUES (\("r"), \(5), \([UInt8]([9, 8]))) RETURNING id, amount, data")
            #expect(inserted.count == 1)
            #expect(try inserted.first?.string("id") == "r")
            #expect(try inserted.first?.int64("amount") == 5)
            #expect(try inserted.first?.bytes("data") == [9, 8])
            let updated = try db.query("UPDATE items SET amount = amount * 2 WHERE id = \("r") RETURNING amount")
            #expect(try updated.first?.int("amount") == 10)
            let deleted = try db.query("DELETE FROM items WHERE id = \("nobody") RETURNING id")
            #expect(deleted.isEmpty)
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func onConflictDoUpdateUpserts(kind: TestDatabaseKind) throws {
        try withDatabase(kind) { test in
            let db = test.database
            try createContractSchema(db)
            func bump(_ name: String, by amount: Int) throws -> Int {
                try db.query("""
                    INSERT INTO counters (name, value) VALUES (\(name), \(amount))
                    ON CONFLICT (name) DO UPDATE SET value = counters.value + excluded.value
                    RETURNING value
                    """).first!.int("value")
            }
            #expect(try bump("a", by: 1) == 1)
            #expect(try bump("a", by: 5) == 6)
            #expect(try bump("b", by: 2) == 2)
            let ignored = try db.execute(
                "INSERT INTO counters (name, value) VALUES (\("a"), \(100)) ON CONFLICT (name) DO NOTHING")
            #expect(ignored == 0)
            #expect(try db.query("SELECT value FROM counters WHERE name = \("a")").first?.int("value") == 6)
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func executeCountsAffectedRows(kind: TestDatabaseKind) throws {
        try withDatabase(kind) { test in
            let db = test.database
            try createContractSchema(db)
            #expect(try db.execute("INSERT INTO items (id, amount) VALUES (\("a"), \(1)), (\("b"), \(2)), (\("c"), \(3))") == 3)
            #expect(try db.execute("UPDATE items SET amount = 0 WHERE amount >= \(2)") == 2)
            #expect(try db.execute("DELETE FROM items WHERE id = \("missing")") == 0)
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func splicedFragmentsAndListsKeepTheirBinds(kind: TestDatabaseKind) throws {
        try withDatabase(kind) { test in
            let db = test.database
            try createContractSchema(db)
            for (id, amount) in [("a", 1), ("b", 2), ("c", 3), ("d", 4)] {
                try db.execute("INSERT INTO items (id, amount) VALUES (\(id), \(amount))")
            }
            let atLeast: SQL = "amount >= \(2)"
            let rows = try db.query(
                "SELECT id FROM items WHERE \(atLeast) AND id IN (\(list: ["a", "b", "d"])) ORDER BY \(unsafeSQL: "id")")
            #expect(try rows.map { try $0.string("id") } == ["b", "d"])
            let none = try db.query("SELECT id FROM items WHERE id IN (\(list: [String]()))")
            #expect(none.isEmpty)
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func decodingErrorsNameTheColumn(kind: TestDatabaseKind) throws {
        try withDatabase(kind) { test in
            let db = test.database
            try createContractSchema(db)
            try db.execute("INSERT INTO items (id, label, amount) VALUES (\("a"), \("text"), \(Int?.none))")
            let row = try #require(try db.query("SELECT id, label, amount FROM items").first)
            let missing = sqlError { _ = try row.string("no_such_column") }
            #expect(missing?.kind == .decoding)
            #expect(missing?.message.contains("no_such_column") == true)
            let wrongType = sqlError { _ = try row.bytes("label") }
            #expect(wrongType?.kind == .decoding)
            #expect(wrongType?.message.contains("label") == true)
            let null = sqlError { _ = try row.int64("amount") }
            #expect(null?.kind == .decoding)
            #expect(null?.message.contains("amount") == true)
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func oneStatementPerQuery(kind: TestDatabaseKind) throws {
        try withDatabase(kind) { test in
            let db = test.database
            try createContractSchema(db)
            let error = sqlError { try db.execute("DELETE FROM items; DELETE FROM counters") }
            #expect(error?.kind == .other)
            let syntax = sqlError { try db.execute("SELEKT 1") }
            #expect(syntax?.kind == .other)
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func poolReportsWaitingBorrowers(kind: TestDatabaseKind) throws {
        try withDatabase(kind, poolSize: 1) { test in
            let db = test.database
            let holding = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            let failures = Failures()
            let group = DispatchGroup()
            startThread(in: group) {
                do {
                    try db.withConnection { _ in
                        holding.signal()
                        release.wait()
                    }
                } catch { failures.record("holder: \(error)") }
            }
            holding.wait()
            #expect(db.poolStatistics.inUse == 1)
            startThread(in: group) {
                do { try db.execute("SELECT 1") } catch { failures.record("waiter: \(error)") }
            }
            let deadline = Date(timeIntervalSinceNow: 5)
            while db.poolStatistics.waiting == 0 && Date() < deadline { usleep(1_000) }
            #expect(db.poolStatistics == PoolStatistics(size: 1, inUse: 1, waiting: 1))
            release.signal()
            group.wait()
            #expect(failures.all == [])
            #expect(db.poolStatistics == PoolStatistics(size: 1, inUse: 0, waiting: 0))
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func pingAnswersUntilClosed(kind: TestDatabaseKind) throws {
        try withDatabase(kind) { test in
            let db = test.database
            #expect(db.ping())
            db.close()
            #expect(!db.ping())
            let closed = sqlError { try db.execute("SELECT 1") }
            #expect(closed?.kind == .connection)
        }
    }
}
