/// Where the domain writes what it cannot tell a caller: a delivery that failed, a mail it did not
/// send, a poll that failed. The composition root plugs in the server's log; tests and tools may
/// discard. Fields must never hold a token, password, code, secret or request body.
public protocol LogSink: Sendable {
    func log(_ level: LogLevel, _ message: String, _ fields: [String: JSON])
}

public enum LogLevel: String, Sendable {
    case info
    case warning = "warn"
    case error
}

extension LogSink {
    public func info(_ message: String, _ fields: [String: JSON] = [:]) { log(.info, message, fields) }
    public func warning(_ message: String, _ fields: [String: JSON] = [:]) { log(.warning, message, fields) }
    public func error(_ message: String, _ fields: [String: JSON] = [:]) { log(.error, message, fields) }
}

/// Writes nothing.
public struct DiscardingLog: LogSink {
    public init() {}
    public func log(_ level: LogLevel, _ message: String, _ fields: [String: JSON]) {}
}
