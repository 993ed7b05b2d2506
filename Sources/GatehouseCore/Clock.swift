import Foundation
import Synchronization

/// Time as the domain sees it: milliseconds since the Unix epoch. Injected so that expiry and
/// recent-login rules are tested exactly.
public protocol Clock: Sendable {
    func nowMillis() -> Int64
}

extension Clock {
    public var nowSeconds: Int64 { nowMillis() / 1000 }
}

/// The wall clock.
public struct SystemClock: Clock {
    public init() {}
    public func nowMillis() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)) }
}

/// A clock tests move by hand.
public final class ManualClock: Clock {
    private let millis: Atomic<Int64>
    /// Starts at `millis`, by default the current time (so tokens it dates are valid for outside verifiers too).
    public init(millis: Int64 = SystemClock().nowMillis()) { self.millis = Atomic(millis) }
    public func nowMillis() -> Int64 { millis.load(ordering: .relaxed) }
    public func advance(seconds: Int64) { millis.add(seconds * 1000, ordering: .relaxed) }
}

/// RFC 3339 UTC with whole seconds, as the API shows times.
public func rfc3339(millis: Int64) -> String {
    var seconds = time_t(millis / 1000)
    var parts = tm()
    gmtime_r(&seconds, &parts)
    // Built by hand: String(format:) goes through CFString and showed in profiles of /v1/me.
    func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
    let year = Int(parts.tm_year) + 1900
    let yearText = year < 1000 ? String(repeating: "0", count: 4 - String(year).count) + String(year) : String(year)
    return "\(yearText)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
}
