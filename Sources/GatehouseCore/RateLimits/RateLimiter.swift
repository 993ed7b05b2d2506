import GatehouseCrypto

/// The part of a client address a limiter counts: the address for IPv4, its /64 for IPv6 (one
/// subscriber usually holds a whole /64, so counting single IPv6 addresses would count nothing).
public func rateLimitSubject(ip: String?) -> String {
    guard let ip, let parsed = IPRange.parseAddress(ip) else { return ip ?? "unknown" }
    if IPRange.unmapped(parsed) != nil { return IPRange.canonical(ip) ?? ip }
    guard parsed.count == 16 else { return ip }
    return Digest.hex(parsed.prefix(8)) + "::/64"
}

/// The per-app, per-subject fixed-window limiters. Counters live in the database, so every node
/// behind one PostgreSQL shares them.
public struct RateLimiter: Sendable {
    let clock: any Clock

    public init(clock: any Clock) { self.clock = clock }

    /// A limit on guessing one account's password: 10 failures in a fixed 15-minute window,
    /// counted per (app, email) at sign-in and per user at reauthentication and password change,
    /// and forgotten after a success. The same for an email with no account, so the answer tells
    /// nothing. Failures, not tries, so that no success (however many at once) is ever refused.
    public static let accountGuesses = (limit: Int64(10), windowSeconds: Int64(15 * 60))

    /// The longest window any bucket counts in (the day of ``EmailCodes/guessLimits``): older
    /// counters can go.
    static let longestWindowMillis: Int64 = 24 * 3600 * 1000

    /// Counts a hit for `subject` (e.g. the client IP) in `bucket`; throws 429 with `Retry-After`
    /// past `limit` in the fixed window of `windowSeconds` (a minute by default).
    public func hit(_ store: any AppScopedStore, bucket: String, subject: String, limit: Int64, windowSeconds: Int64 = 60) throws {
        let now = clock.nowMillis()
        let window = windowSeconds * 1000
        let windowStart = now - now % window
        let hits = try store.rateLimits.hit(bucket: "\(bucket):\(subject)", windowStart: windowStart)
        // Counters of past windows are dead weight: now and then, drop this app's old ones.
        if hits == 1, SecureRandom.bytes(1)[0] < 4 { try store.rateLimits.purge(before: now - Self.longestWindowMillis - 60_000) }
        if hits > limit {
            let retryAfter = Int((windowStart + window - now + 999) / 1000)
            throw GatehouseError(.tooManyRequests, "Too many attempts; retry in \(retryAfter) s.", retryAfter: max(1, retryAfter))
        }
    }

    /// Throws 429 with `Retry-After` when `subject` already has `limit` counted in `bucket` in this
    /// fixed window; counts nothing itself (``count(_:bucket:subject:windowSeconds:)`` does).
    /// Returns the count, so that a caller resets only a count there is.
    @discardableResult
    public func requireUnder(_ store: any AppScopedStore, bucket: String, subject: String, limit: Int64, windowSeconds: Int64) throws -> Int64 {
        let now = clock.nowMillis()
        let window = windowSeconds * 1000
        let windowStart = now - now % window
        let hits = try store.rateLimits.hits(bucket: "\(bucket):\(subject)", windowStart: windowStart)
        if hits >= limit {
            let retryAfter = Int((windowStart + window - now + 999) / 1000)
            throw GatehouseError(.tooManyRequests, "Too many attempts; retry in \(retryAfter) s.", retryAfter: max(1, retryAfter))
        }
        return hits
    }

    /// Counts one for `subject` in `bucket` in this fixed window (a failure, for ``requireUnder``).
    public func count(_ store: any AppScopedStore, bucket: String, subject: String, windowSeconds: Int64) throws {
        let now = clock.nowMillis()
        _ = try store.rateLimits.hit(bucket: "\(bucket):\(subject)", windowStart: now - now % (windowSeconds * 1000))
    }

    /// Forgets `subject`'s count in `bucket` (after a success, so a user who got in is not held
    /// back by their own earlier typos).
    public func reset(_ store: any AppScopedStore, bucket: String, subject: String) throws {
        try store.rateLimits.reset(bucket: "\(bucket):\(subject)")
    }
}

extension RateLimiter {
    /// Throws 429 once `subject` has used up ``accountGuesses`` in `bucket`; the count so far.
    @discardableResult
    func requireAccountGuessesLeft(_ store: any AppScopedStore, bucket: String, subject: String) throws -> Int64 {
        try requireUnder(store, bucket: bucket, subject: subject, limit: Self.accountGuesses.limit, windowSeconds: Self.accountGuesses.windowSeconds)
    }

    /// Counts one failed guess at `subject`'s account in `bucket`.
    func countFailedAccountGuess(_ store: any AppScopedStore, bucket: String, subject: String) throws {
        try count(store, bucket: bucket, subject: subject, windowSeconds: Self.accountGuesses.windowSeconds)
    }
}
