import Foundation

/// Loads migration files and applies the pending ones, recording each in `schema_migrations`.
///
/// Forward-only: the migrator refuses to run when an applied migration's checksum changed or
/// when the database records a version this build does not know ("database is newer than
/// this build"). Several nodes may start at once: each migration runs in its own transaction
/// that first takes a lock (PostgreSQL `pg_advisory_xact_lock`, SQLite `BEGIN IMMEDIATE`) and
/// re-reads what has been applied, so every migration is applied exactly once.
public struct Migrator: Sendable {
    /// The `pg_advisory_xact_lock` key serialising migrators on one PostgreSQL database.
    public static let advisoryLockKey: Int64 = 0x4761_7465_686F_7573  // "Gatehous"

    /// The database being migrated.
    public let database: any SQLDatabase
    /// Every migration this build knows, in version order.
    public let migrations: [Migration]

    /// A migrator for `migrations` (sorted by version here).
    public init(database: any SQLDatabase, migrations: [Migration]) {
        self.database = database
        self.migrations = migrations.sorted { $0.version < $1.version }
    }

    /// Loads `NNNN_name.sql` files from `directory`. `NNNN_name.sqlite.sql` and
    /// `NNNN_name.postgres.sql` replace the plain file for that dialect only. Files not ending
    /// in `.sql` are ignored. Throws ``SQLError/Kind/migration`` on a malformed name, duplicate
    /// versions, variants of one version with different names, a version with no file for
    /// `dialect`, or versions that do not run 1, 2, 3, … without gaps.
    ///
    /// - Parameter checksum: digests a file's text; the composition root passes hex SHA-256.
    public static func load(
        from directory: URL, dialect: SQLDialect, checksum: (String) -> String
    ) throws(SQLError) -> [Migration] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw SQLError(kind: .migration, message: "cannot list migrations in \(directory.path): \(error)")
        }

        struct Variants { var name: String; var plain: String?; var sqlite: String?; var postgres: String? }
        var byVersion: [Int: Variants] = [:]
        for file in names.sorted() where file.hasSuffix(".sql") {
            let parsed = try parse(fileName: file)
            var variants = byVersion[parsed.version] ?? Variants(name: parsed.name)
            guard variants.name == parsed.name else {
                throw SQLError(
                    kind: .migration,
                    message: "duplicate migration version \(parsed.version): \(variants.name) and \(parsed.name)")
            }
            switch parsed.dialect {
            case nil: variants.plain = file
            case .sqlite?: variants.sqlite = file
            case .postgres?: variants.postgres = file
            }
            byVersion[parsed.version] = variants
        }

        var migrations: [Migration] = []
        for (index, version) in byVersion.keys.sorted().enumerated() {
            guard version == index + 1 else {
                throw SQLError(
                    kind: .migration,
                    message: "migration versions must run 1, 2, 3, … without gaps; expected \(index + 1), found \(version)")
            }
            let variants = byVersion[version]!
            let override = dialect == .sqlite ? variants.sqlite : variants.postgres
            guard let file = override ?? variants.plain else {
                throw SQLError(
                    kind: .migration,
                    message: "migration \(version) (\(variants.name)) has no file for \(dialect.rawValue)")
            }
            let text: String
            do {
                text = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            } catch {
                throw SQLError(kind: .migration, message: "cannot read migration \(file): \(error)")
            }
            migrations.append(Migration(version: version, name: variants.name, sql: text, checksum: checksum(text)))
        }
        return migrations
    }

    /// Splits `0007_sessions.postgres.sql` into (7, "sessions", .postgres).
    static func parse(fileName: String) throws(SQLError) -> (version: Int, name: String, dialect: SQLDialect?) {
        var stem = String(fileName.dropLast(".sql".count))
        var dialect: SQLDialect?
        for candidate in [SQLDialect.sqlite, .postgres] where stem.hasSuffix(".\(candidate.rawValue)") {
            dialect = candidate
            stem = String(stem.dropLast(candidate.rawValue.count + 1))
        }
        let parts = stem.split(separator: "_", maxSplits: 1, omittingEmptySubsequences: false)
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
        guard parts.count == 2,
              !parts[0].isEmpty, parts[0].allSatisfy(\.isASCII), parts[0].allSatisfy(\.isNumber),
              let version = Int(parts[0]), version > 0,
              !parts[1].isEmpty, parts[1].allSatisfy(allowed.contains)
        else {
            throw SQLError(
                kind: .migration,
                message: "migration file \"\(fileName)\" is not named NNNN_name.sql, NNNN_name.sqlite.sql or NNNN_name.postgres.sql")
        }
        return (version, String(parts[1]), dialect)
    }

    /// Applies every pending migration in order, each in its own transaction, and returns
    /// those this call applied (empty when the schema was current, or another node did it).
    @discardableResult
    public func migrate() throws -> [Migration] {
        try checkKnownMigrations()
        var applied: [Migration] = []
        while true {
            let next = try database.transaction { connection -> Migration? in
                if connection.dialect == .postgres {
                    // A migration may build an index on a large table: no statement timeout, for
                    // this transaction only (a waiting node waits for the lock as long as it takes).
                    try connection.execute("SET LOCAL statement_timeout = 0")
                    _ = try connection.query("SELECT pg_advisory_xact_lock(\(Self.advisoryLockKey))")
                }
                try connection.execute(Self.createTable)
                let recorded = try Self.recorded(on: connection)
                try verify(recorded)
                guard let migration = migrations.first(where: { recorded[$0.version] == nil }) else { return nil }
                do throws(SQLError) {
                    try connection.executeScript(migration.sql)
                } catch {
                    throw SQLError(
                        kind: .migration,
                        message: "migration \(migration.version) (\(migration.name)) failed: \(error.message)",
                        constraint: error.constraint)
                }
                let now = Int64((Date().timeIntervalSince1970 * 1000).rounded())
                try connection.execute("""
                    INSERT INTO schema_migrations (version, name, checksum, applied_at)
                    VALUES (\(migration.version), \(migration.name), \(migration.checksum), \(now))
                    """)
                return migration
            }
            guard let next else { return applied }
            applied.append(next)
        }
    }

    /// The migrations not yet applied, in order. Throws like ``migrate()`` when the database
    /// holds a changed or unknown migration.
    public func pending() throws -> [Migration] {
        try checkKnownMigrations()
        let recorded = try database.withConnection { connection in
            try Self.tableExists(on: connection) ? try Self.recorded(on: connection) : [:]
        }
        try verify(recorded)
        return migrations.filter { recorded[$0.version] == nil }
    }

    private struct Record { let name: String; let checksum: String }

    private static let createTable: SQL = """
        CREATE TABLE IF NOT EXISTS schema_migrations (
            version BIGINT PRIMARY KEY,
            name TEXT NOT NULL,
            checksum TEXT NOT NULL,
            applied_at BIGINT NOT NULL
        )
        """

    private static func tableExists(on connection: any SQLConnection) throws(SQLError) -> Bool {
        switch connection.dialect {
        case .sqlite:
            !(try connection.query(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").isEmpty)
        case .postgres:
            try connection.query("SELECT to_regclass('schema_migrations') IS NOT NULL AS present")
                .first?.bool("present") ?? false
        }
    }

    private static func recorded(on connection: any SQLConnection) throws(SQLError) -> [Int: Record] {
        var records: [Int: Record] = [:]
        for row in try connection.query("SELECT version, name, checksum FROM schema_migrations") {
            records[try row.int("version")] = Record(name: try row.string("name"), checksum: try row.string("checksum"))
        }
        return records
    }

    private func checkKnownMigrations() throws(SQLError) {
        for (index, migration) in migrations.enumerated() where migration.version != index + 1 {
            throw SQLError(
                kind: .migration,
                message: "migration versions must run 1, 2, 3, … without gaps or duplicates; found \(migration.version) at position \(index + 1)")
        }
    }

    private func verify(_ recorded: [Int: Record]) throws(SQLError) {
        let known = Dictionary(uniqueKeysWithValues: migrations.map { ($0.version, $0) })
        for (version, record) in recorded.sorted(by: { $0.key < $1.key }) {
            guard let migration = known[version] else {
                throw SQLError(
                    kind: .migration,
                    message: "database is newer than this build: it has migration \(version) (\(record.name)), this build knows up to \(migrations.last?.version ?? 0)")
            }
            guard migration.checksum == record.checksum else {
                throw SQLError(
                    kind: .migration,
                    message: "migration \(version) (\(migration.name)) has changed since it was applied (checksum \(record.checksum), now \(migration.checksum))")
            }
        }
    }
}
