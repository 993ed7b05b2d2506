public struct EventID: PrefixedID {
    public static let prefix = "evt_"
    public let rawValue: String
    public init(unchecked rawValue: String) { self.rawValue = rawValue }
}

/// An audit event.
public struct Event: Sendable, Equatable {
    public var id: EventID
    public var type: EventType
    public var userID: UserID?
    public var sessionID: SessionID?
    public var ip: String?
    public var userAgent: String?
    public var data: JSON
    public var createdAt: Int64

    public init(
        type: EventType, userID: UserID?, sessionID: SessionID?, ip: String?, userAgent: String?, data: JSON = [:], createdAt: Int64,
        id: EventID = .generate()
    ) {
        self.id = id
        self.type = type
        self.userID = userID
        self.sessionID = sessionID
        self.ip = ip
        self.userAgent = userAgent
        self.data = data
        self.createdAt = createdAt
    }
}
