import Synchronization

/// What one unit of work's transaction did that matters beyond its rows, as its store reports it
/// while it writes: the events it recorded, the sessions it ended, the outbox items it queued.
/// Made by ``UnitOfWork`` for each unit and handed to the store with the transaction; the store
/// only reports facts here, and ``UnitOfWork`` acts on them (ADR 0009).
///
/// An event is fanned out as soon as it is reported: its webhook deliveries are queued in the same
/// transaction, read as the transaction sees the account at that moment (a `user.deleted` is
/// recorded before the erase, so its deliveries still carry the user).
public final class TransactionLedger: Sendable {
    private let fanOut: (any EventFanOut)?
    private let facts = Mutex(Facts())

    private struct Facts {
        var endedSessions: [SessionID] = []
        var enqueuedItems = 0
    }

    init(fanOut: (any EventFanOut)?) { self.fanOut = fanOut }

    /// The store has written `event` in this transaction. Its webhook deliveries are queued through
    /// `store`, which is bound to the same transaction (its reads see the change the event
    /// records). A throw rolls the unit back.
    public func recorded(_ event: Event, in store: any AppScopedStore) throws {
        guard let fanOut, fanOut.wants(event.type, app: store.appID) else { return }
        for item in try fanOut.items(for: event, app: store.appID, store: store) {
            _ = try store.outbox.enqueue(item, now: event.createdAt)
        }
    }

    /// The store has ended these sessions in this transaction.
    public func ended(_ sessions: [SessionID]) {
        guard !sessions.isEmpty else { return }
        facts.withLock { $0.endedSessions += sessions }
    }

    /// The store has queued an outbox item in this transaction.
    public func enqueued() {
        facts.withLock { $0.enqueuedItems += 1 }
    }

    /// The sessions ended, for the revocation list once the transaction has committed.
    public var endedSessions: [SessionID] { facts.withLock { $0.endedSessions } }
    /// How many outbox items were queued.
    public var enqueuedItems: Int { facts.withLock { $0.enqueuedItems } }
}
