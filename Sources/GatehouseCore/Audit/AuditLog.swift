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

/// A place in the audit log's order (newest first; ties by id): stable while events are added.
public struct EventPosition: Sendable, Equatable {
    public var createdAt: Int64
    public var id: EventID

    public init(createdAt: Int64, id: EventID) {
        self.createdAt = createdAt
        self.id = id
    }
}

/// The audit log of one app (`events`, written in the transaction of each change).
public protocol AuditLogStore: Sendable {
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
        let page = Array(found.prefix(query.limit))
        let next = found.count > query.limit ? page.last.map { EventPosition(createdAt: $0.createdAt, id: $0.id) } : nil
        return (page, next)
    }
}
