/// Runs the domain's units of work and owns what follows from them: every event recorded in one
/// is fanned out to the app's webhooks in the same transaction (``TransactionLedger``), and once
/// it has committed, the sessions it ended reach this node's revocation list and, when it queued
/// outbox items, this node's outbox worker is woken. A unit that rolls back revokes and wakes
/// nothing. Services run every write that has such effects through here, never by hand.
public struct UnitOfWork: Sendable {
    private let fanOut: (any EventFanOut)?
    private let revocations: RevocationList?
    private let wakeOutbox: @Sendable () -> Void

    /// - Parameter fanOut: the outbox items each recorded event queues (the app's webhooks); nil records events alone.
    /// - Parameter revocations: told of the sessions a committed unit ended.
    /// - Parameter wakeOutbox: called after a committed unit queued outbox items.
    public init(fanOut: (any EventFanOut)?, revocations: RevocationList?, wakeOutbox: @escaping @Sendable () -> Void = {}) {
        self.fanOut = fanOut
        self.revocations = revocations
        self.wakeOutbox = wakeOutbox
    }

    /// Runs `body` as one unit of work of `data` (see ``AppScopedStore/unit(_:reporting:_:)``):
    /// everything it does through the store it is given commits together, or nothing does when it
    /// throws. Given a store already bound to a unit of work, `body` joins that unit, whose
    /// effects follow its own commit.
    public func run<T>(_ data: any AppScopedStore, _ body: (any AppScopedStore) throws -> T) throws -> T {
        let ledger = TransactionLedger(fanOut: fanOut)
        let result = try data.unit(.transaction, reporting: ledger, body)
        committed(ledger)
        return result
    }

    /// Runs `body` on `data` outside a transaction, for a store method that is atomic on its own
    /// and should stay as cheap as it is (a refresh: one statement on PostgreSQL): each
    /// transaction it opens reports to a ledger, its events fanned out before it commits, and
    /// once `body` has returned, what it did follows. When `body` throws, nothing follows (a
    /// method that throws has committed nothing).
    public func autocommit<T>(_ data: any AppScopedStore, _ body: (any AppScopedStore) throws -> T) throws -> T {
        let ledger = TransactionLedger(fanOut: fanOut)
        let result = try data.unit(.statements, reporting: ledger, body)
        committed(ledger)
        return result
    }

    /// After the commit: what it did may now be seen. (A unit that joined another reported to the
    /// other's ledger: its own is empty, and the other's commit acts.)
    private func committed(_ ledger: TransactionLedger) {
        let ended = ledger.endedSessions
        if !ended.isEmpty { revocations?.add(ended) }
        if ledger.enqueuedItems > 0 { wakeOutbox() }
    }

    /// Records `event` on its own: alone when no webhook of the app subscribes to it (one
    /// statement), else in a unit of work of its own, so that its deliveries commit with it. In a
    /// unit of work already, it joins it.
    public func record(_ event: Event, in data: any AppScopedStore) throws {
        if let fanOut, fanOut.wants(event.type, app: data.appID) {
            try run(data) { tx in try tx.auditLog.record(event) }
        } else {
            try data.auditLog.record(event)
        }
    }
}

/// How a unit of work's writes commit (``AppScopedStore/unit(_:reporting:_:)``).
public enum UnitScope: Sendable {
    /// Together, in one transaction.
    case transaction
    /// Each store method on its own, as it is atomic by itself.
    case statements
}
