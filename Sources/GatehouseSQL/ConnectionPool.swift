import Foundation

/// A connection a ``ConnectionPool`` can hold: drivers implement this.
public protocol PooledConnection: AnyObject {
    /// `false` when the connection is broken or left in an unknown state (e.g. an open
    /// transaction) and must be closed instead of reused.
    var isReusable: Bool { get }
    /// Releases the underlying handle. Called once, by the pool, on one thread.
    func close()
}

/// A blocking, thread-safe pool of driver connections, shared by the SQLite and PostgreSQL
/// drivers. Connections are opened lazily up to `capacity`; a thread that finds none free
/// waits up to `acquireTimeout` and then gets ``SQLError/Kind/busy``. Connections that report
/// `isReusable == false` are dropped and replaced by fresh ones on demand.
///
/// `@unchecked Sendable`: every mutable stored property (`idle`, the counters, `closed`) is
/// read and written only while holding `condition`; a connection object is touched by exactly
/// one thread at a time — the borrower between `acquire` and `release`, or the pool while it
/// sits in `idle` (under the lock) or is being closed after removal from `idle`.
public final class ConnectionPool<Connection: PooledConnection>: @unchecked Sendable {
    /// The most connections open at once.
    public let capacity: Int
    /// How long a borrower waits for a free connection before failing with `.busy`.
    public let acquireTimeout: TimeInterval

    private let factory: @Sendable () throws(SQLError) -> Connection
    private let condition = NSCondition()
    private var idle: [Connection] = []
    private var openCount = 0
    private var inUseCount = 0
    private var waitingCount = 0
    private var closed = false

    /// A pool that opens connections with `open` when it needs one.
    public init(
        capacity: Int, acquireTimeout: TimeInterval = 10,
        open: @escaping @Sendable () throws(SQLError) -> Connection
    ) {
        precondition(capacity > 0, "a pool needs at least one connection")
        self.capacity = capacity
        self.acquireTimeout = acquireTimeout
        self.factory = open
    }

    /// Adds an already open connection to the idle set (used to open one eagerly at start-up).
    public func adopt(_ connection: Connection) {
        condition.lock()
        defer { condition.unlock() }
        openCount += 1
        idle.append(connection)
        condition.signal()
    }

    /// Borrows a connection for the duration of `body`; it goes back to the pool afterwards
    /// (or is closed when it reports itself not reusable).
    public func withConnection<T>(timeout: TimeInterval? = nil, _ body: (Connection) throws -> T) throws -> T {
        let connection = try acquire(timeout: timeout ?? acquireTimeout)
        defer { release(connection) }
        return try body(connection)
    }

    /// The current gauges.
    public var statistics: PoolStatistics {
        condition.lock()
        defer { condition.unlock() }
        return PoolStatistics(size: openCount, inUse: inUseCount, waiting: waitingCount)
    }

    /// Closes idle connections now and lent ones when they are returned; wakes every waiter,
    /// which then fails with `.connection`.
    public func close() {
        condition.lock()
        closed = true
        let toClose = idle
        idle.removeAll()
        openCount -= toClose.count
        condition.broadcast()
        condition.unlock()
        for connection in toClose { connection.close() }
    }

    private func acquire(timeout: TimeInterval) throws(SQLError) -> Connection {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        while true {
            if closed {
                condition.unlock()
                throw SQLError(kind: .connection, message: "the database has been closed")
            }
            if let connection = idle.popLast() {
                if connection.isReusable {
                    inUseCount += 1
                    condition.unlock()
                    return connection
                }
                openCount -= 1
                condition.unlock()
                connection.close()
                condition.lock()
                continue
            }
            if openCount < capacity {
                openCount += 1
                inUseCount += 1
                condition.unlock()
                do {
                    return try factory()
                } catch {
                    condition.lock()
                    openCount -= 1
                    inUseCount -= 1
                    condition.signal()
                    condition.unlock()
                    throw error
                }
            }
            waitingCount += 1
            let signalled = condition.wait(until: deadline)
            waitingCount -= 1
            if !signalled && Date() >= deadline {
                condition.unlock()
                throw SQLError(
                    kind: .busy,
                    message: "no database connection free after \(timeout) s (pool of \(capacity))")
            }
        }
    }

    private func release(_ connection: Connection) {
        let keep = connection.isReusable
        condition.lock()
        inUseCount -= 1
        let reuse = keep && !closed
        if reuse {
            idle.append(connection)
        } else {
            openCount -= 1
        }
        condition.signal()
        condition.unlock()
        if !reuse { connection.close() }
    }
}

extension ConnectionPool where Connection: SQLConnection {
    /// `true` when `SELECT 1` succeeds, waiting at most a second for a connection: the drivers'
    /// liveness probe for `/readyz`.
    public func ping() -> Bool {
        do {
            return try withConnection(timeout: 1) { connection in
                try connection.query("SELECT 1 AS ok").first?.int64("ok") == 1
            }
        } catch {
            return false
        }
    }
}
