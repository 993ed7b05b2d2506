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
    /// True when bound to an open transaction (a unit of work's).
    var inTransaction: Bool { database is TransactionBoundDatabase }

    func unit<T>(_ scope: UnitScope, reporting ledger: TransactionLedger, _ body: (any AppScopedStore) throws -> T) throws -> T {
        // Already in a unit of work: joins it, reporting to its ledger (its effects follow its commit).
        if inTransaction { return try body(self) }
        switch scope {
        case .statements:
            return try body(SQLAppScopedStore(database: database, appID: appID, userChanges: userChanges, ledger: ledger))
        case .transaction:
            let deferred = DeferredUserChanges()
            let result = try database.transaction { connection in
                try body(SQLAppScopedStore(database: TransactionBoundDatabase(connection), appID: appID, userChanges: deferred, ledger: ledger))
            }
            deferred.flush(app: appID, to: userChanges)
            return result
        }
    }

    func enqueue(_ item: NewOutboxItem, now: Int64) throws -> Bool {
        // Scoped by construction: an app's scope queues only its own items.
        guard item.appID == appID else { throw InternalError("an outbox item of app \(item.appID?.rawValue ?? "-") queued through app \(appID.rawValue)'s scope") }
        let queued = try database.withConnection { db in try insertOutboxItem(db, item, now: now) }
        if queued { ledger?.enqueued() }
        return queued
    }

    /// Runs `write`, a statement on the user's row that sets `changed_at` with the `stamp` it is
    /// given (`changed_at = <the database's clock>`: every node's ``AccountCache`` polls it), then
    /// tells this node's cache (after the commit, in a unit of work). The one way a writer marks
    /// an account changed.
    func touchUser<T>(_ id: UserID, _ write: (_ stamp: SQL) throws -> T) rethrows -> T {
        defer { userChanges?.userChanged(app: appID, user: id) }
        return try write("changed_at = \(database.dialect.nowMillis)")
    }

    func withdraw(idempotencyKey: String) throws -> Bool {
        try database.withConnection { db in try withdrawOutboxItem(db, app: appID, idempotencyKey: idempotencyKey) }
    }

    func item(_ id: String) throws -> OutboxItemRecord? {
        try database.query("SELECT \(outboxRecordColumns) FROM outbox WHERE app_id = \(appID) AND id = \(id)").first.map(outboxItemRecord)
    }

    func deadItems(after: DeadLetterPosition?, limit: Int) throws -> [OutboxItemRecord] {
        try database.withConnection { db in try selectDeadOutboxItems(db, app: appID, after: after, limit: limit) }
    }

    func itemID(idempotencyKey: String) throws -> String? {
        try database.withConnection { db in try outboxItemID(db, app: appID, idempotencyKey: idempotencyKey) }
    }

    func webhookDeliveries(state: WebhookDeliveryState?, eventType: String?, after: DeadLetterPosition?, limit: Int) throws -> [OutboxItemRecord] {
        try database.withConnection { db in
            try selectWebhookDeliveries(db, app: appID, state: state, eventType: eventType, after: after, limit: limit)
        }
    }

    func requeueDead(_ id: String, now: Int64) throws -> Bool {
        let queued = try database.withConnection { db in try requeueDeadOutboxItem(db, app: appID, id: id, now: now) }
        // The worker is woken after the commit, as for an item queued.
        if queued { ledger?.enqueued() }
        return queued
    }
}

extension SQLAppScopedStore: OutboxQueue {
    var outbox: any OutboxQueue { self }
}
