import CSQLite
import Foundation
import GatehouseCore
import GatehouseSQL

/// The embedded store: one SQLite file in WAL mode behind a pool of connections.
///
/// Every connection runs with `foreign_keys=ON`, `synchronous=FULL` (a commit is on disk before
/// it returns, ADR 0023) and a busy timeout.
/// Transactions start with `BEGIN IMMEDIATE`, so a writer takes the write lock up front
/// instead of deadlocking on a lock upgrade.
///
/// In-process transactions commit in groups (ADR 0019): SQLite has one writer at a time, so
/// instead of taking turns at a lock, a thread that finds a write in progress queues its body and
/// sleeps; the thread that leads the next group runs every queued body, each in a savepoint of
/// its own, in one `BEGIN IMMEDIATE` … `COMMIT`, and wakes their threads with the outcome. A body
/// that throws rolls back to its savepoint and no further: the others' work commits. Each thread
/// gets its own result only after the group's `COMMIT`, as before, so nothing is answered that
/// is not durable; what a group saves is a lock hand-off, a `BEGIN`, a `COMMIT` with its WAL sync,
/// and the WAL frames of the pages every body of the group touched.
public final class SQLiteDatabase: SQLDatabase {
    /// Always ``SQLDialect/sqlite``.
    public let dialect = SQLDialect.sqlite
    /// The database file.
    public let path: String
    /// WAL pages after which a commit asks for a checkpoint (SQLite's default is 1000, about 4 MiB).
    ///
    /// A checkpoint copies each page once however often it changed, so fewer, larger checkpoints
    /// cost less in all: under the refresh benchmark, 10,000 pages (a WAL of up to about 40 MiB)
    /// rotated 7 % more tokens a second than 1000. The ``Checkpointer`` runs them beside the
    /// writers; a connection without one (the checkpointer's own) checkpoints itself at this size.
    public static let checkpointPages = 10_000
    private let pool: ConnectionPool<SQLiteConnection>
    private let writes: GroupCommit
    private let checkpointer: Checkpointer
    private let busyTimeout: TimeInterval

    /// Opens (creating the parent folder and the file when needed) the database at `path`
    /// and switches it to WAL.
    ///
    /// - Parameters:
    ///   - poolSize: the most connections open at once (opened lazily).
    ///   - busyTimeout: how long a statement waits for a lock held by another connection or
    ///     process before failing with ``SQLError/Kind/busy``.
    ///   - checkpointPages: the WAL size, in pages, at which a background checkpoint starts (ADR 0021).
    public init(path: String, poolSize: Int = 8, busyTimeout: TimeInterval = 5, checkpointPages: Int = SQLiteDatabase.checkpointPages) throws(SQLError) {
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
        let checkpointer = Checkpointer(pages: checkpointPages) { () throws(SQLError) in
            try SQLiteConnection(path: path, busyTimeoutMilliseconds: milliseconds)
        }
        self.checkpointer = checkpointer
        pool = ConnectionPool(capacity: poolSize, acquireTimeout: max(10, busyTimeout * 2)) { () throws(SQLError) in
            try SQLiteConnection(path: path, busyTimeoutMilliseconds: milliseconds, checkpointer: checkpointer)
        }
        writes = GroupCommit(pool: pool)
        let first = try SQLiteConnection(path: path, busyTimeoutMilliseconds: milliseconds, checkpointer: checkpointer)
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

    /// Runs `body` in a savepoint of the next group's `BEGIN IMMEDIATE` … `COMMIT` (see the type's
    /// documentation) and returns once that group has committed. A throw from `body` rolls back
    /// what it did and is rethrown; a failed `BEGIN` or `COMMIT` is thrown to every body of its
    /// group. A body not started within the busy timeout fails with ``SQLError/Kind/busy``.
    /// `body` must not end the transaction itself (`COMMIT`, `ROLLBACK`, `END`) nor open another.
    public func transaction<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        try withoutActuallyEscaping(body) { body in
            var outcome: Result<T, any Error>?
            // A body may run on another thread: it keeps its request's log context there.
            let context = RequestLogContext.current
            let write = QueuedWrite { connection in
                outcome = RequestLogContext.$current.withValue(context) { Self.inSavepoint(connection, body) }
            }
            do {
                try writes.run(write, timeout: busyTimeout)
            } catch {
                // A group that failed fails every body of it, even one that failed on its own: that
                // error may rest on another body's writes, which never committed. Only the body
                // whose own failure lost the group says why.
                if write.endedGroup, case .failure(let own)? = outcome { throw own }
                throw error
            }
            guard let outcome else { throw SQLError(kind: .other, message: "a queued transaction ended without running") }
            return try outcome.get()
        }
    }

    /// `body` between `SAVEPOINT` and `RELEASE`; rolled back to the savepoint when it throws.
    private static func inSavepoint<T>(_ connection: SQLiteConnection, _ body: (any SQLConnection) throws -> T) -> Result<T, any Error> {
        do {
            try connection.execute("SAVEPOINT grouped")
        } catch {
            return .failure(error)
        }
        do {
            let result = try body(connection)
            try connection.execute("RELEASE grouped")
            return .success(result)
        } catch {
            // Some failures (SQLITE_FULL, an I/O error) end the whole transaction: the group sees
            // that (`inTransaction` false) and fails every body of it.
            if connection.inTransaction {
                do {
                    try connection.execute("ROLLBACK TO grouped")
                    try connection.execute("RELEASE grouped")
                } catch {
                    connection.poisoned = true
                }
            }
            return .failure(error)
        }
    }

    /// `true` when `SELECT 1` succeeds, waiting at most a second for a connection.
    public func ping() -> Bool { pool.ping() }

    /// Closes the pool; later calls fail with ``SQLError/Kind/connection``.
    public func close() {
        checkpointer.stop()
        pool.close()
    }

    /// How many transactions shared each commit so far, and how many wait for the next.
    public var groupCommitStatistics: GroupCommitStatistics { writes.statistics }

    /// How often the WAL was copied back, and by whom (ADR 0021).
    public var checkpointStatistics: CheckpointStatistics { checkpointer.statistics }

    /// Open, in-use and waiting counts of the pool.
    public var poolStatistics: PoolStatistics { pool.statistics }

    deinit {
        checkpointer.stop()
        pool.close()
    }
}
