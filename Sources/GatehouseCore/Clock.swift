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
    return String(
        format: "%04d-%02d-%02dT%02d:%02d:%02dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
        Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec))
}
