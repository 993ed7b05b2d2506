import Synchronization

/// Where the domain writes what it cannot tell a caller: a delivery that failed, a mail it did not
/// send, a poll that failed. The composition root plugs in the server's log; tests and tools may
/// discard. Fields must never hold a token, password, code, secret or request body.
public protocol LogSink: Sendable {
    func log(_ level: LogLevel, _ message: String, _ fields: [String: JSON])
}

/// How severe a line is; `GATEHOUSE_LOG_LEVEL` drops the lines below a level.
public enum LogLevel: String, Sendable, Comparable, CaseIterable {
    case debug
    case info
    case warning = "warn"
    case error

    /// `debug`, `info`, `warn` (or `warning`) or `error`.
    public init?(name: String) {
        switch name.lowercased() {
        case "debug": self = .debug
        case "info": self = .info
        case "warn", "warning": self = .warning
        case "error": self = .error
        default: return nil
        }
    }

    private var rank: Int { Self.allCases.firstIndex(of: self)! }
    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rank < b.rank }
}

/// What every log line a request causes shares: the request id, and once known the app and the
/// error code it was answered with. The HTTP layer binds one around each request
/// (`RequestLogContext.$current.withValue`); the log adds `request_id` and `app_id` to any line
/// written while it is bound, so a service or a provider client logs with no request in hand.
/// Handlers run synchronously on the server's threads: outside any task, a task-local value is
/// kept per thread, so the binding holds for exactly the calls made within it.
public final class RequestLogContext: Sendable {
    @TaskLocal public static var current: RequestLogContext?

    public let requestID: String
    private let state = Mutex<(appID: String?, errorCode: String?)>((nil, nil))

    public init(requestID: String) { self.requestID = requestID }

    /// The app the request acts for, once resolved from its key, secret key or path.
    public var appID: String? {
        get { state.withLock { $0.appID } }
        set { state.withLock { $0.appID = newValue } }
    }

    /// The stable error code of the answer, when it was an error.
    public var errorCode: String? {
        get { state.withLock { $0.errorCode } }
        set { state.withLock { $0.errorCode = newValue } }
    }
}

extension LogSink {
    public func debug(_ message: String, _ fields: [String: JSON] = [:]) { log(.debug, message, fields) }
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
