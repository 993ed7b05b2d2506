import CPostgres
import Foundation
import GatehouseSQL

/// The production store: a pool of libpq connections to one PostgreSQL database.
///
/// Connections open lazily up to `poolSize`; a borrower that finds none free waits up to
/// `acquireTimeout` and then fails with ``SQLError/Kind/busy``. A connection that broke (bad
/// `PQstatus`) or was left inside a transaction is dropped and replaced on demand. Error
/// messages never contain the URL's password.
public final class PostgresDatabase: SQLDatabase {
    /// Always ``SQLDialect/postgres``.
    public let dialect = SQLDialect.postgres
    private let pool: ConnectionPool<PostgresConnection>

    /// Connects once to check `url` (a `postgres://user:password@host:port/db?…` URL or a
    /// libpq `key=value` string), then pools up to `poolSize` connections. A connection attempt
    /// gives up after `connectTimeoutSeconds`; every statement is cancelled after
    /// `statementTimeoutMillis` (0: never), and fails as ``SQLError/Kind/busy``.
    /// `transactionPooling`: `url` names a pooler that lends a server connection per transaction
    /// (PgBouncer's `pool_mode = transaction`); see ``PostgresConnection`` for what changes.
    public init(
        url: String, poolSize: Int = 16, acquireTimeout: TimeInterval = 10, connectTimeoutSeconds: Int = 5, statementTimeoutMillis: Int = 0,
        transactionPooling: Bool = false
    ) throws(SQLError) {
        let secret = Secret(url: url)
        pool = ConnectionPool(capacity: poolSize, acquireTimeout: acquireTimeout) { () throws(SQLError) in
            try PostgresConnection(
                url: url, secret: secret, connectTimeoutSeconds: connectTimeoutSeconds, statementTimeoutMillis: statementTimeoutMillis,
                transactionPooling: transactionPooling)
        }
        pool.adopt(
            try PostgresConnection(
                url: url, secret: secret, connectTimeoutSeconds: connectTimeoutSeconds, statementTimeoutMillis: statementTimeoutMillis,
                transactionPooling: transactionPooling))
    }

    /// Borrows a pooled connection (autocommit) for `body`.
    public func withConnection<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        try pool.withConnection { connection in try body(connection) }
    }

    /// `BEGIN` … `COMMIT` (read committed); `ROLLBACK` and rethrow when `body` throws.
    /// Throws when a statement inside failed and `body` swallowed the error, because
    /// PostgreSQL would silently turn that `COMMIT` into a rollback. Throws, never returns, when
    /// the `COMMIT`'s answer was lost (``SQLError/Kind/connection``: it may or may not have taken
    /// effect) or when it committed without the synchronous standby's confirmation
    /// (``SQLError/Kind/commitUnconfirmed``); so does a statement run on its own (``withConnection``).
    public func transaction<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        try pool.withConnection { connection in
            try connection.executeScript(connection.begin)
            let result: T
            do {
                result = try body(connection)
                if connection.transactionStatus == PQTRANS_INERROR {
                    throw SQLError(kind: .other, message: "the transaction was aborted by an earlier error; rolled back")
                }
                try connection.executeScript("COMMIT")
            } catch {
                if connection.transactionStatus != PQTRANS_IDLE {
                    // On failure the connection stays in a transaction and the pool drops it.
                    try? connection.executeScript("ROLLBACK")
                }
                throw error
            }
            return result
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
