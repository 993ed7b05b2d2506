/// One open database connection. Not thread-safe: a connection is used by one thread at a time,
/// handed out by ``SQLDatabase/withConnection(_:)`` or ``SQLDatabase/transaction(_:)``.
public protocol SQLConnection {
    /// The dialect this connection speaks.
    var dialect: SQLDialect { get }
    /// Runs one statement and returns its rows (including `RETURNING` rows).
    func query(_ sql: SQL) throws(SQLError) -> [SQLRow]
    /// Runs one statement and returns the number of rows it inserted, updated or deleted.
    @discardableResult func execute(_ sql: SQL) throws(SQLError) -> Int
    /// Runs several `;`-separated statements without binds (migrations).
    func executeScript(_ script: String) throws(SQLError)
}

/// A pool of connections to one database, safe to share between threads.
public protocol SQLDatabase: Sendable {
    /// The dialect the database speaks.
    var dialect: SQLDialect { get }
    /// Borrows a connection for the duration of `body` (autocommit: each statement commits).
    /// Blocks while the pool is exhausted; throws ``SQLError/Kind/busy`` after a timeout.
    func withConnection<T>(_ body: (any SQLConnection) throws -> T) throws -> T
    /// Runs `body` in a transaction and returns once it has committed: `BEGIN` … `COMMIT`, or
    /// `ROLLBACK` when `body` throws, then rethrows its error. On SQLite, transactions that
    /// arrive together share one `BEGIN IMMEDIATE` … `COMMIT`, each in a savepoint that a throw
    /// rolls back (ADR 0019). `body` must not end the transaction itself nor open another.
    func transaction<T>(_ body: (any SQLConnection) throws -> T) throws -> T
    /// Cheap liveness probe for `/readyz`: `true` when `SELECT 1` succeeds.
    func ping() -> Bool
    /// Closes idle connections now and busy ones when they come back; later calls fail
    /// with ``SQLError/Kind/connection``.
    func close()
    /// Pool gauges for `/metrics`.
    var poolStatistics: PoolStatistics { get }
}

extension SQLDatabase {
    /// Runs one statement on a pooled connection and returns its rows.
    public func query(_ sql: SQL) throws -> [SQLRow] {
        try withConnection { connection in try connection.query(sql) }
    }

    /// Runs one statement on a pooled connection and returns the number of rows affected.
    @discardableResult
    public func execute(_ sql: SQL) throws -> Int {
        try withConnection { connection in try connection.execute(sql) }
    }
}

/// A snapshot of a connection pool, for `/metrics` gauges.
public struct PoolStatistics: Sendable, Hashable {
    /// Connections currently open (idle + in use).
    public var size: Int
    /// Connections currently lent out.
    public var inUse: Int
    /// Threads currently blocked waiting for a connection.
    public var waiting: Int

    /// Creates a snapshot.
    public init(size: Int, inUse: Int, waiting: Int) {
        self.size = size
        self.inUse = inUse
        self.waiting = waiting
    }
}
