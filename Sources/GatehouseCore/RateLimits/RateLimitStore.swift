/// The app's fixed-window counters (``RateLimiter``). In a unit of work a hit commits with it.
public protocol RateLimitStore: Sendable {
    /// Counts a hit in the fixed window starting at `windowStart`; returns the hits in that window so far.
    func hit(bucket: String, windowStart: Int64) throws -> Int64
    /// The hits counted in `bucket` in the window starting at `windowStart` (0 for another window).
    func hits(bucket: String, windowStart: Int64) throws -> Int64
    /// Deletes this app's counter of `bucket`.
    func reset(bucket: String) throws
    /// Deletes this app's counters of windows that started before `before`.
    func purge(before: Int64) throws
}
