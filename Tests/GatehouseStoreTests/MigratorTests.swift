import Foundation
import GatehouseSQL
import GatehouseTesting
import Testing

/// A temporary folder of migration files.
private final class MigrationFolder {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-migrations-\(UUID().uuidString)")

    init(_ files: [String: String]) throws {
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        for (name, text) in files { try write(name, text) }
    }

    func write(_ name: String, _ text: String) throws {
        try text.write(to: url.appendingPathComponent(name), atomically: true, encoding: .utf8)
    }

    func load(_ dialect: SQLDialect) throws -> [Migration] {
        try Migrator.load(from: url, dialect: dialect, checksum: testChecksum)
    }

    deinit { try? FileManager.default.removeItem(at: url) }
}

private let threeMigrations = [
    "0001_create_accounts.sql": "CREATE TABLE accounts (id TEXT PRIMARY KEY, created_at BIGINT NOT NULL);",
    "0002_create_sessions.sql": """
        CREATE TABLE sessions (id TEXT PRIMARY KEY, account_id TEXT NOT NULL REFERENCES accounts (id));
        CREATE INDEX sessions_account ON sessions (account_id);
        """,
    "0003_seed.sql": "INSERT INTO accounts (id, created_at) VALUES ('root', 0);",
    "README.md": "ignored: not a .sql file",
]

@Suite struct MigratorTests {
    @Test(arguments: TestDatabase.kinds)
    func appliesPendingMigrationsInOrderAndRecordsThem(kind: TestDatabaseKind) throws {
        let folder = try MigrationFolder(threeMigrations)
        try withDatabase(kind) { test in
            let migrations = try folder.load(test.database.dialect)
            let migrator = Migrator(database: test.database, migrations: migrations)
            #expect(try migrator.pending().map(\.version) == [1, 2, 3])
            let applied = try migrator.migrate()
            #expect(applied.map(\.version) == [1, 2, 3])
            #expect(applied.map(\.name) == ["create_accounts", "create_sessions", "seed"])
            let records = try test.database.query(
                "SELECT version, name, checksum, applied_at FROM schema_migrations ORDER BY version")
            #expect(try records.map { try $0.int("version") } == [1, 2, 3])
            #expect(try records.map { try $0.string("checksum") } == migrations.map(\.checksum))
            #expect(try records.allSatisfy { try $0.int64("applied_at") > 1_600_000_000_000 })
            #expect(try test.database.query("SELECT id FROM accounts").first?.string("id") == "root")
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func aSecondRunAppliesNothing(kind: TestDatabaseKind) throws {
        let folder = try MigrationFolder(threeMigrations)
        try withDatabase(kind) { test in
            let migrator = Migrator(database: test.database, migrations: try folder.load(test.database.dialect))
            try migrator.migrate()
            #expect(try migrator.migrate().isEmpty)
            #expect(try migrator.pending().isEmpty)
            #expect(try test.database.query("SELECT COUNT(*) AS n FROM schema_migrations").first?.int("n") == 3)
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func newMigrationsApplyOnTopOfOldOnes(kind: TestDatabaseKind) throws {
        let folder = try MigrationFolder(["0001_create_accounts.sql": threeMigrations["0001_create_accounts.sql"]!])
        try withDatabase(kind) { test in
            try Migrator(database: test.database, migrations: try folder.load(test.database.dialect)).migrate()
            try folder.write("0002_create_sessions.sql", threeMigrations["0002_create_sessions.sql"]!)
            let migrator = Migrator(database: test.database, migrations: try folder.load(test.database.dialect))
            #expect(try migrator.pending().map(\.version) == [2])
            #expect(try migrator.migrate().map(\.version) == [2])
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func aChangedMigrationIsRefused(kind: TestDatabaseKind) throws {
        let folder = try MigrationFolder(threeMigrations)
        try withDatabase(kind) { test in
            try Migrator(database: test.database, migrations: try folder.load(test.database.dialect)).migrate()
            try folder.write("0002_create_sessions.sql", "CREATE TABLE sessions (id TEXT PRIMARY KEY);")
            try folder.write("0004_more.sql", "CREATE TABLE more (id TEXT PRIMARY KEY);")
            let migrator = Migrator(database: test.database, migrations: try folder.load(test.database.dialect))
            let error = sqlError { try migrator.migrate() }
            #expect(error?.kind == .migration)
            #expect(error?.message.contains("migration 2 (create_sessions) has changed") == true)
            #expect(sqlError { _ = try migrator.pending() }?.kind == .migration)
            // Nothing after the refusal was applied.
            #expect(try test.database.query("SELECT COUNT(*) AS n FROM schema_migrations").first?.int("n") == 3)
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func aDatabaseNewerThanTheBuildIsRefused(kind: TestDatabaseKind) throws {
        let folder = try MigrationFolder(threeMigrations)
        try withDatabase(kind) { test in
            let all = try folder.load(test.database.dialect)
            try Migrator(database: test.database, migrations: all).migrate()
            let older = Migrator(database: test.database, migrations: Array(all.prefix(2)))
            let error = sqlError { try older.migrate() }
            #expect(error?.kind == .migration)
            #expect(error?.message.contains("database is newer than this build") == true)
            #expect(sqlError { _ = try older.pending() }?.kind == .migration)
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func theDialectOverrideIsChosen(kind: TestDatabaseKind) throws {
        let folder = try MigrationFolder([
            "0001_flavour.sql": "CREATE TABLE flavour (name TEXT NOT NULL); INSERT INTO flavour VALUES ('plain');",
            "0001_flavour.sqlite.sql": "CREATE TABLE flavour (name TEXT NOT NULL); INSERT INTO flavour VALUES ('sqlite');",
            "0001_flavour.postgres.sql": "CREATE TABLE flavour (name TEXT NOT NULL); INSERT INTO flavour VALUES ('postgres');",
            "0002_plain_only.sql": "INSERT INTO flavour VALUES ('plain');",
        ])
        try withDatabase(kind) { test in
            let dialect = test.database.dialect
            let migrations = try folder.load(dialect)
            #expect(migrations.map(\.name) == ["flavour", "plain_only"])
            try Migrator(database: test.database, migrations: migrations).migrate()
            let names = try test.database.query("SELECT name FROM flavour ORDER BY name").map { try $0.string("name") }
            #expect(Set(names) == [dialect.rawValue, "plain"])
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func aFailingMigrationLeavesNoTrace(kind: TestDatabaseKind) throws {
        let folder = try MigrationFolder([
            "0001_ok.sql": "CREATE TABLE ok (id TEXT PRIMARY KEY);",
            "0002_broken.sql": "CREATE TABLE half (id TEXT PRIMARY KEY); INSERT INTO missing_table VALUES (1);",
        ])
        try withDatabase(kind) { test in
            let migrator = Migrator(database: test.database, migrations: try folder.load(test.database.dialect))
            let error = sqlError { try migrator.migrate() }
            #expect(error?.kind == .migration)
            #expect(error?.message.contains("migration 2 (broken) failed") == true)
            #expect(try migrator.pending().map(\.version) == [2])
            // DDL is transactional on both databases: the half-created table is gone.
            #expect(throws: SQLError.self) { try test.database.query("SELECT id FROM half") }
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func twoNodesStartingAtOnceApplyEachMigrationOnce(kind: TestDatabaseKind) throws {
        let folder = try MigrationFolder(threeMigrations)
        try withDatabase(kind) { test in
            let migrations = try folder.load(test.database.dialect)
            let nodes: [any SQLDatabase] = [test.database, try test.openAnother(), try test.openAnother()]
            defer { for node in nodes.dropFirst() { node.close() } }
            let applied = AppliedVersions()
            let failures = Failures()
            onThreads(nodes.count) { index in
                do {
                    let versions = try Migrator(database: nodes[index], migrations: migrations).migrate().map(\.version)
                    applied.add(versions)
                } catch {
                    failures.record("\(error)")
                }
            }
            #expect(failures.all == [])
            #expect(applied.all.sorted() == [1, 2, 3])
            #expect(try test.database.query("SELECT COUNT(*) AS n FROM accounts").first?.int("n") == 1)
        }
    }

    // MARK: - Loading files

    @Test func loadingRejectsDuplicateVersions() throws {
        let folder = try MigrationFolder(["0001_a.sql": "", "0001_b.sql": ""])
        let error = sqlError { _ = try folder.load(.sqlite) }
        #expect(error?.kind == .migration)
        #expect(error?.message.contains("duplicate migration version 1") == true)
    }

    @Test func loadingRejectsGaps() throws {
        let gap = try MigrationFolder(["0001_a.sql": "", "0003_c.sql": ""])
        #expect(sqlError { _ = try gap.load(.sqlite) }?.message.contains("without gaps") == true)
        let late = try MigrationFolder(["0002_b.sql": ""])
        #expect(sqlError { _ = try late.load(.postgres) }?.kind == .migration)
    }

    @Test func loadingRejectsMalformedNames() throws {
        for name in ["1.sql", "abc_name.sql", "0001_.sql", "0001_bad name.sql", "0001_x.mysql.sql"] {
            let folder = try MigrationFolder([name: ""])
            #expect(sqlError { _ = try folder.load(.sqlite) }?.kind == .migration, "\(name)")
        }
    }

    @Test func aVersionWithOnlyTheOtherDialectsFileIsRefused() throws {
        let folder = try MigrationFolder(["0001_a.postgres.sql": "SELECT 1;"])
        #expect(try folder.load(.postgres).map(\.version) == [1])
        #expect(sqlError { _ = try folder.load(.sqlite) }?.message.contains("no file for sqlite") == true)
    }

    @Test func checksumsAreTakenFromTheChosenFile() throws {
        let folder = try MigrationFolder(["0001_a.sql": "plain", "0001_a.sqlite.sql": "lite"])
        #expect(try folder.load(.sqlite).first?.checksum == testChecksum("lite"))
        #expect(try folder.load(.postgres).first?.checksum == testChecksum("plain"))
        #expect(try folder.load(.postgres).first?.sql == "plain")
    }

    @Test func aMissingFolderIsAMigrationError() {
        let missing = URL(fileURLWithPath: "/nonexistent/gatehouse-migrations")
        #expect(sqlError { _ = try Migrator.load(from: missing, dialect: .sqlite, checksum: testChecksum) }?.kind == .migration)
    }
}

private final class AppliedVersions: Sendable {
    private let versions = Failures()
    func add(_ applied: [Int]) { for version in applied { versions.record("\(version)") } }
    var all: [Int] { versions.all.compactMap(Int.init) }
}
