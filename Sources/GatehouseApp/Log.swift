import Foundation
import GatehouseCore

/// Structured logging: one JSON object per line on standard output. Callers pass only what is
/// safe to log — never a token, password, secret or request body.
public struct Log: LogSink {
    public let enabled: Bool
    /// Lines below this level are dropped (errors never are); access-log lines have their own switch.
    public let level: LogLevel
    let clock: any Clock
    private let output: @Sendable ([UInt8]) -> Void

    /// `output` receives each line with its newline (tests capture them); standard output by default.
    public init(enabled: Bool = true, level: LogLevel = .info, clock: any Clock = SystemClock(), output: (@Sendable ([UInt8]) -> Void)? = nil) {
        self.enabled = enabled
        self.level = level
        self.clock = clock
        self.output = output ?? { line in
            // One write(2) per line: lines from many threads never interleave (below PIPE_BUF they are atomic on pipes too).
            line.withUnsafeBytes { _ = Foundation.write(1, $0.baseAddress, $0.count) }
        }
    }

    public func info(_ message: String, _ fields: [String: JSON] = [:]) { log(.info, message, fields) }
    public func warning(_ message: String, _ fields: [String: JSON] = [:]) { log(.warning, message, fields) }
    public func error(_ message: String, _ fields: [String: JSON] = [:]) { log(.error, message, fields) }

    public func log(_ level: LogLevel, _ message: String, _ fields: [String: JSON]) {
        guard level == .error || (enabled && level >= self.level) else { return }
        write(level.rawValue, message, fields)
    }

    /// An access-log line: written whatever the level (`GATEHOUSE_ACCESS_LOG` decides).
    func access(_ fields: [String: JSON]) {
        guard enabled else { return }
        write(LogLevel.info.rawValue, "request", fields)
    }

    private func write(_ level: String, _ message: String, _ fields: [String: JSON]) {
        var object = fields
        if let context = RequestLogContext.current {
            if object["request_id"] == nil { object["request_id"] = .string(context.requestID) }
            if object["app_id"] == nil, let app = context.appID { object["app_id"] = .string(app) }
        }
        object["ts"] = .string(isoMillis(clock.nowMillis()))
        object["level"] = .string(level)
        object["msg"] = .string(message)
        var line = JSON.object(object).serialized()
        line.append(0x0A)
        output(line)
    }

    private func isoMillis(_ millis: Int64) -> String {
        let base = rfc3339(millis: millis)
        return String(base.dropLast()) + String(format: ".%03dZ", Int(millis % 1000))
    }
}
