/// Which events of an app to list: newest first, optionally of one user and one type, after a
/// position of an earlier page.
public struct EventQuery: Sendable, Equatable {
    public var userID: UserID?
    public var type: EventType?
    /// The last event of the previous page (`created_at`, `id`): the page holds older ones.
    public var after: EventPosition?
    public var limit: Int

    public init(userID: UserID? = nil, type: EventType? = nil, after: EventPosition? = nil, limit: Int = 50) {
        self.userID = userID
        self.type = type
        self.after = after
        self.limit = limit
    }
}

/// A place in a newest-first list ordered by creation time, ties by id: a keyset cursor's
/// content, stable while items are added (the audit log, the admin's users, a user's files).
public struct KeysetPosition<ID: Sendable & Equatable>: Sendable, Equatable {
    public var createdAt: Int64
    public var id: ID

    public init(createdAt: Int64, id: ID) {
        self.createdAt = createdAt
        self.id = id
    }
}

extension KeysetPosition {
    /// A page of `limit` from `found` (read with `limit + 1`, the extra one telling that more
    /// follow), and the position the next page starts after: the page's last item's.
    public static func page<Item>(_ found: [Item], limit: Int, position: (Item) -> KeysetPosition) -> ([Item], KeysetPosition?) {
        let page = Array(found.prefix(limit))
        return (page, found.count > limit ? page.last.map(position) : nil)
    }
}

/// A place in the audit log's order.
public typealias EventPosition = KeysetPosition<EventID>

/// The audit log of one app (`events`, written in the transaction of each change).
public protocol AuditLogStore: Sendable {
    /// Records an event; in a ``AppScopedStore/transaction(_:)``, it commits with the change it tells of.
    func record(_ event: Event) throws
    /// At most `query.limit` events in the query's order.
    func events(_ query: EventQuery) throws -> [Event]
}

/// `GET /v1/admin/events`: an app's audit log, a page at a time.
public struct AuditLog: Sendable {
    private let store: any Store

    public init(store: any Store) { self.store = store }

    /// A page, and the position to continue from when there may be more.
    public func page(app: AppContext, _ query: EventQuery) throws -> (events: [Event], next: EventPosition?) {
        var probe = query
        probe.limit = query.limit + 1
        let found = try store.app(app.id).auditLog.events(probe)
        return EventPosition.page(found, limit: query.limit) { EventPosition(createdAt: $0.createdAt, id: $0.id) }
    }
}
