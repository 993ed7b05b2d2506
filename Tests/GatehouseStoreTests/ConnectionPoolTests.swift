import Foundation
import GatehouseSQL
import Synchronization
import Testing

/// A fake connection that counts opens and closes.
private final class FakeConnection: PooledConnection {
    let number: Int
    var broken = false
    let closes: Counter
    init(number: Int, closes: Counter) {
        self.number = number
        self.closes = closes
    }
    var isReusable: Bool { !broken }
    func close() { closes.increment() }
}

private final class Counter: Sendable {
    private let value = Mutex(0)
    func increment() { value.withLock { $0 += 1 } }
    var current: Int { value.withLock { $0 } }
}

@Suite struct ConnectionPoolTests {
    private func makePool(capacity: Int, timeout: TimeInterval = 5) -> (ConnectionPool<FakeConnection>, opens: Counter, closes: Counter) {
        let opens = Counter()
        let closes = Counter()
        let pool = ConnectionPool<FakeConnection>(capacity: capacity, acquireTimeout: timeout) { () throws(SQLError) in
            opens.increment()
            return FakeConnection(number: opens.current, closes: closes)
        }
        return (pool, opens, closes)
    }

    @Test func connectionsOpenLazilyAndAreReused() throws {
        let (pool, opens, _) = makePool(capacity: 3)
        #expect(pool.statistics == PoolStatistics(size: 0, inUse: 0, waiting: 0))
        let first = try pool.withConnection { $0.number }
        let second = try pool.withConnection { $0.number }
        #expect(first == second)
        #expect(opens.current == 1)
        #expect(pool.statistics == PoolStatistics(size: 1, inUse: 0, waiting: 0))
    }

    @Test func brokenConnectionsAreDroppedAndReplaced() throws {
        let (pool, opens, closes) = makePool(capacity: 1)
        try pool.withConnection { $0.broken = true }
        #expect(closes.current == 1)
        #expect(pool.statistics.size == 0)
        let number = try pool.withConnection { $0.number }
        #expect(number == 2)
        #expect(opens.current == 2)
    }

    @Test func anExhaustedPoolTimesOutAsBusy() throws {
        let (pool, _, _) = makePool(capacity: 1, timeout: 0.2)
        let error = sqlError {
            try pool.withConnection { _ in
                try pool.withConnection { _ in }
            }
        }
        #expect(error?.kind == .busy)
        #expect(pool.statistics == PoolStatistics(size: 1, inUse: 0, waiting: 0))
    }

    @Test func aFailedOpenFreesItsSlot() throws {
        let attempts = Counter()
        let pool = ConnectionPool<FakeConnection>(capacity: 1, acquireTimeout: 1) { () throws(SQLError) in
            attempts.increment()
            if attempts.current == 1 { throw SQLError(kind: .connection, message: "refused") }
            return FakeConnection(number: attempts.current, closes: Counter())
        }
        #expect(sqlError { try pool.withConnection { _ in } }?.kind == .connection)
        #expect(try pool.withConnection { $0.number } == 2)
    }

    @Test func closingClosesIdleAndReturnedConnections() throws {
        let (pool, _, closes) = makePool(capacity: 2)
        try pool.withConnection { _ in
            try pool.withConnection { _ in }  // a second connection, idle after this
            pool.close()
            #expect(closes.current == 1)
        }
        #expect(closes.current == 2)
        #expect(sqlError { try pool.withConnection { _ in } }?.kind == .connection)
    }
}
