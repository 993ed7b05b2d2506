import CSQLite
import Foundation
import GatehouseSQL

/// The embedded store: one SQLite file in WAL mode behind a pool of connections.
///
/// Every connection runs with `foreign_keys=ON`, `synchronous=NORMAL` and a busy timeout.
/// Transactions start with `BEGIN IMMEDIATE`, so a writer takes the write lock up front
/// instead of deadlocking on a lock upgrade; in-process writers also queue on a lock, so they
/// wait their turn instead of sleeping in SQLite's busy handler.
public final class SQLiteDatabase: SQLDatabase {
    /// Always ``SQLDialect/sqlite``.
    public let dialect = SQLDialect.sqlite
    /// The database file.
    public let path: String
    private let pool: ConnectionPool<SQLiteConnection>
    private let writer = NSLock()
    private let busyTimeout: TimeInterval

    /// Opens (creating the parent folder and the file when needed) the database at `path`
    /// and switches it to WAL.
    ///
    /// - Parameters:
    ///   - poolSize: the most connections open at once (opened lazily).
    ///   - busyTimeout: how long a statement waits for a lock held by another connection or
    ///     process before failing with ``SQLError/Kind/busy``.
    public init(path: String, poolSize: Int = 8, busyTimeout: TimeInterval = 5) throws(SQLError) {
        self.path = path
        self.busyTimeout = busyTimeout
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent()
        do {
            // Only its owner reads the accounts: the folder 0700, the file (and so SQLite's -wal and
            // -shm, which take its mode) 0600, whatever the umask.
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            if !FileManager.default.fileExists(atPath: path) {
                _ = FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
            }
        } catch {
            throw SQLError(kind: .connection, message: "cannot create folder \(folder.path): \(error)")
        }
        let milliseconds = Int32(clamping: Int((busyTimeout * 1000).rounded()))
        pool = ConnectionPool(capacity: poolSize, acquireTimeout: max(10, busyTimeout * 2)) { () throws(SQLError) in
            try SQLiteConnection(path: path, busyTimeoutMilliseconds: milliseconds)
        }
        let first = try SQLiteConnection(path: path, busyTimeoutMilliseconds: milliseconds)
        do throws(SQLError) {
            // Before the first table: a new file gives the pages the maintenance job frees back to
            // the file system (`PRAGMA incremental_vacuum`). On a file that has tables it changes
            // nothing until a VACUUM (ADR 0015).
            try first.executeScript("PRAGMA auto_vacuum = INCREMENTAL")
            let mode = try first.query("PRAGMA journal_mode = WAL").first?.string("journal_mode")
            guard mode?.lowercased() == "wal" else {
                throw SQLError(kind: .connection, message: "cannot switch \(path) to WAL (journal_mode is \(mode ?? "unknown"))")
            }
        } catch {
            first.close()
            throw error
        }
        pool.adopt(first)
    }

    /// Borrows a pooled connection (autocommit) for `body`.
    public func withConnection<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        try pool.withConnection { connection in try body(connection) }
    }

    /// `BEGIN IMMEDIATE` … `COMMIT`; `ROLLBACK` and rethrow when `body` throws.
    public func transaction<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        guard writer.lock(before: Date(timeIntervalSinceNow: busyTimeout)) else {
            throw SQLError(kind: .busy, message: "timed out waiting for the SQLite write lock")
        }
        defer { writer.unlock() }
        return try pool.withConnection { connection in
            try connection.executeScript("BEGIN IMMEDIATE")
            let result: T
            do {
                result = try body(connection)
                try connection.executeScript("COMMIT")
            } catch {
                rollback(connection)
                throw error
            }
            return result
        }
    }

    private func rollback(_ connection: SQLiteConnection) {
        // SQLite may already have rolled back (e.g. after SQLITE_FULL); ROLLBACK would then fail.
        guard connection.inTransaction else { return }
        do {
            try connection.executeScript("ROLLBACK")
        } catch {
            connection.poisoned = true
        }
    }

    /// `true` when `SELECT 1` succeeds, waiting at most a second for a connection.
    public func ping() -> Bool { pool.ping() }

    /// Closes the pool; later calls fail with ``SQLError/Kind/connection``.
    public func close() {
        pool.close()
    }

    /// Open, in-use and waiting counts of the pool.
    public var poolStatistics: PoolStatistics { pool.statistics }

    deinit {
        pool.close()
    }
}
