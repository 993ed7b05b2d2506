import GatehouseCore
import Synchronization

/// One connection inside an open transaction, seen as a database: every statement a store method
/// runs on it, and every transaction it opens, joins the transaction already open. This is how a
/// store method written for autocommit becomes part of a unit of work without being written twice.
///
/// Used only on the thread that runs the transaction's body, and never after it returns.
final class TransactionBoundDatabase: SQLDatabase, @unchecked Sendable {
    private let connection: any SQLConnection

    init(_ connection: any SQLConnection) { self.connection = connection }

    var dialect: SQLDialect { connection.dialect }
    func withConnection<T>(_ body: (any SQLConnection) throws -> T) throws -> T { try body(connection) }
    /// Joins the open transaction: a throw from `body` rolls back the whole unit of work.
    func transaction<T>(_ body: (any SQLConnection) throws -> T) throws -> T { try body(connection) }
    func ping() -> Bool { true }
    func close() {}
    var poolStatistics: PoolStatistics { PoolStatistics(size: 1, inUse: 1, waiting: 0) }
}

/// The store's ``EventFanOut``, set once after the store is built (the fan-out needs the app
/// directory, which is built on the store) and read by every event recorded after.
final class EventFanOutSlot: Sendable {
    private let value = Mutex<(any EventFanOut)?>(nil)

    func bind(_ fanOut: any EventFanOut) {
        value.withLock { current in
            precondition(current == nil, "the event fan-out is bound once")
            current = fanOut
        }
    }

    var current: (any EventFanOut)? { value.withLock { $0 } }
}

/// The user changes a unit of work made, told to the real observer only once it has committed
/// (a cache must not drop an entry for a change that may still roll back, and then reload the old row).
final class DeferredUserChanges: UserChangeObserver {
    private let changes = Mutex<[UserID]>([])

    func userChanged(app: AppID, user: UserID) { changes.withLock { $0.append(user) } }

    func flush(app: AppID, to observer: (any UserChangeObserver)?) {
        guard let observer else { return }
        for user in changes.withLock({ Set($0) }) { observer.userChanged(app: app, user: user) }
    }
}

extension SQLAppScopedStore {
    func transaction<T>(_ body: (any AppScopedStore) throws -> T) throws -> T {
        let deferred = DeferredUserChanges()
        let result = try database.transaction { connection in
            try body(SQLAppScopedStore(database: TransactionBoundDatabase(connection), appID: appID, userChanges: deferred, fanOut: fanOut))
        }
        deferred.flush(app: appID, to: userChanges)
        return result
    }

    func enqueue(_ item: NewOutboxItem, now: Int64) throws -> Bool {
        try database.withConnection { db in try insertOutboxItem(db, item, now: now) }
    }

    func withdraw(idempotencyKey: String) throws -> Bool {
        try database.withConnection { db in try withdrawOutboxItem(db, app: appID, idempotencyKey: idempotencyKey) }
    }
}

extension SQLAppScopedStore: OutboxQueue {
    var outbox: any OutboxQueue { self }
}
