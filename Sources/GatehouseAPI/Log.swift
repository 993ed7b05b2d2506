import Foundation
import GatehouseCore

/// Structured logging: one JSON object per line on standard output. Callers pass only what is
/// safe to log — never a token, password, secret or request body.
public struct Log: LogSink {
    public let enabled: Bool
    let clock: any Clock

    public init(enabled: Bool = true, clock: any Clock = SystemClock()) {
        self.enabled = enabled
        self.clock = clock
    }

    public func info(_ message: String, _ fields: [String: JSON] = [:]) { write("info", message, fields) }
    public func warning(_ message: String, _ fields: [String: JSON] = [:]) { write("warn", message, fields) }
    public func error(_ message: String, _ fields: [String: JSON] = [:]) { write("error", message, fields, force: true) }

    public func log(_ level: LogLevel, _ message: String, _ fields: [String: JSON]) {
        write(level.rawValue, message, fields, force: level == .error)
    }

    func write(_ level: String, _ message: String, _ fields: [String: JSON], force: Bool = false) {
        guard enabled || force else { return }
        var object = fields
        object["ts"] = .string(isoMillis(clock.nowMillis()))
        object["level"] = .string(level)
        object["msg"] = .string(message)
        var line = JSON.object(object).serialized()
        line.append(0x0A)
        // One write(2) per line: lines from many threads never interleave (below PIPE_BUF they are atomic on pipes too).
        line.withUnsafeBytes { _ = Foundation.write(1, $0.baseAddress, $0.count) }
    }

    private func isoMillis(_ millis: Int64) -> String {
        let base = rfc3339(millis: millis)
        return String(base.dropLast()) + String(format: ".%03dZ", Int(millis % 1000))
    }
}
