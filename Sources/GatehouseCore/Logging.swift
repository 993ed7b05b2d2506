import Synchronization

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

/// A failure that repeats (a poll that fails every second while the database is away), logged at
/// most once a minute.
public final class RepeatedFailureLog: Sendable {
    private let log: any LogSink
    private let message: String
    private let lastLogged = Atomic<Int64>(Int64.min / 2)

    public init(_ log: any LogSink, _ message: String) {
        self.log = log
        self.message = message
    }

    /// `error` is a store's error: its text names no user value.
    public func failed(_ error: any Error, now: Int64) {
        let last = lastLogged.load(ordering: .relaxed)
        guard now - last >= 60_000, lastLogged.compareExchange(expected: last, desired: now, ordering: .relaxed).exchanged else { return }
        log.warning(message, ["error": .string(String(describing: error))])
    }
}
