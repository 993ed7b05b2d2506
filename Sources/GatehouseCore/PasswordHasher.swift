import Dispatch
import GatehouseCrypto
import Synchronization

/// argon2id under its own concurrency bound: at most `permits` hashes run at once (about one per
/// core), so a flood of sign-ins queues here instead of starving refreshes and `/me` of CPU.
/// Waiting holds an HTTP worker thread (and so the other connections it serves), so the queue is
/// short: at most `permits` callers wait, for at most `maxWait`; the rest are refused at once with
/// 503 `server/busy` and `Retry-After`.
public final class PasswordHasher: Sendable {
    public let parameters: Argon2id.Parameters
    private let permits: DispatchSemaphore
    private let admitted: Atomic<Int>
    private let maxAdmitted: Int
    private let maxWaitSeconds: Double
    /// Verified against when the email is unknown, so that both answers take the same time.
    private let dummyHash: String

    public init(parameters: Argon2id.Parameters, permits: Int, maxWaitSeconds: Double = 2) throws {
        self.parameters = parameters
        self.permits = DispatchSemaphore(value: max(1, permits))
        self.admitted = Atomic(0)
        self.maxAdmitted = 2 * max(1, permits)
        self.maxWaitSeconds = maxWaitSeconds
        dummyHash = try Argon2id.hash(password: Array("gatehouse-dummy-password".utf8), parameters: parameters)
    }

    public func hash(_ password: String) throws -> String {
        try bounded { try Argon2id.hash(password: Array(password.utf8), parameters: parameters) }
    }

    /// Checks a password against a stored hash, or against the dummy hash when there is none.
    public func verify(_ password: String, encoded: String?) throws -> Bool {
        try bounded {
            let matches = Argon2id.verify(password: Array(password.utf8), encoded: encoded ?? dummyHash)
            return encoded != nil && matches
        }
    }

    public func needsRehash(_ encoded: String) -> Bool { Argon2id.needsRehash(encoded: encoded, parameters: parameters) }

    private func bounded<T>(_ work: () throws -> T) throws -> T {
        let busy = GatehouseError(.busy, "Too many sign-ins at once; retry shortly.", retryAfter: 1)
        guard admitted.add(1, ordering: .acquiring).newValue <= maxAdmitted else {
            admitted.subtract(1, ordering: .releasing)
            throw busy
        }
        defer { admitted.subtract(1, ordering: .releasing) }
        guard permits.wait(timeout: .now() + maxWaitSeconds) == .success else { throw busy }
        defer { permits.signal() }
        return try work()
    }
}

/// The part of a client address a limiter counts: the address for IPv4, its /64 for IPv6 (one
/// subscriber usually holds a whole /64, so counting single IPv6 addresses would count nothing).
public func rateLimitSubject(ip: String?) -> String {
    guard let ip, let bytes = IPRange.parseAddress(ip) else { return ip ?? "unknown" }
    guard bytes.count == 16 else { return ip }
    return Digest.hex(bytes.prefix(8)) + "::/64"
}

/// The per-app, per-subject fixed-window limiter (`rate_limits.auth_per_minute_per_ip`). Counters
/// live in the database, so every node behind one PostgreSQL shares them.
public struct RateLimiter: Sendable {
    let clock: any Clock

    public init(clock: any Clock) { self.clock = clock }

    /// Counts a hit for `subject` (e.g. the client IP) in `bucket`; throws 429 with `Retry-After` past `limit` per minute.
    public func hit(_ store: any AppScopedStore, bucket: String, subject: String, limit: Int64) throws {
        let now = clock.nowMillis()
        let windowStart = now - now % 60_000
        let hits = try store.hitRateLimit(bucket: "\(bucket):\(subject)", windowStart: windowStart)
        // Counters of past windows are dead weight: now and then, drop this app's old ones.
        if hits == 1, SecureRandom.bytes(1)[0] < 4 { try store.purgeRateLimits(before: windowStart - 60_000) }
        if hits > limit {
            let retryAfter = Int((windowStart + 60_000 - now + 999) / 1000)
            throw GatehouseError(.tooManyRequests, "Too many attempts; retry in \(retryAfter) s.", retryAfter: max(1, retryAfter))
        }
    }
}
