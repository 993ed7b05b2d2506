import GatehouseCore
import GatehouseCrypto
import GatehouseOutbound
import Synchronization

/// Provider signing keys, fetched from JWKS URLs and cached per URL.
///
/// - Keys are kept for the response's `Cache-Control: max-age` (1 h when absent, at most 24 h).
/// - A `kid` the cached set lacks triggers a refetch, but at most once per
///   `unknownKidRefetchInterval` per URL (counted from the last fetch attempt), so a flood of
///   tokens with made-up `kid`s cannot become a flood of requests to the provider.
/// - A failed fetch is retried no sooner than `unknownKidRefetchInterval` later (a negative cache
///   per URL), whether or not keys were fetched before: meanwhile the last good keys are served,
///   and a `kid` they lack (or any `kid`, with no keys ever fetched) throws
///   ``ProviderError/unavailable(_:)`` at once, so a key server that is down or hangs is not
///   asked again by every request.
/// - A `kid` that is not in the cached set while the last fetch failed (the refetch it triggered
///   failed, or was held back by the interval after a failure) throws
///   ``ProviderError/unavailable(_:)``, not "unknown": the token may be signed by a key the
///   provider published after our last good fetch. Only a `kid` missing from a set fetched
///   successfully (and no sooner than the interval allows) is unknown.
/// - Only one thread fetches a given URL at a time; threads that waited for that fetch use its
///   result instead of fetching again. A thread that holds a cached (stale) key for its `kid` never
///   waits for another thread's fetch.
///
/// A set with no usable key (after skipping keys that are not public RSA/P-256 signing keys
/// with a `kid`) counts as a failed fetch.
public final class JWKSCache: Sendable {
    /// Keys are kept this long when the response has no `max-age`.
    public static let defaultMaxAgeSeconds: Int64 = 3600
    /// A `max-age` above this is capped.
    public static let maxMaxAgeSeconds: Int64 = 86_400

    private let client: OutboundHTTPClient
    private let clock: any Clock
    private let refetchInterval: Int64
    private let entries = Mutex<[String: Entry]>([:])
    /// Most URLs cached at once; past it, a new URL pushes out an arbitrary other one (for
    /// caches of URLs tenants choose, which could otherwise grow without end).
    private let maxURLs: Int
    private let maxKeysPerSet: Int

    /// Creates an empty cache. `unknownKidRefetchInterval` is in milliseconds.
    /// `maxKeysPerSet`: the keys kept of one set (the first usable ones); a set a tenant's issuer
    /// serves is no reason to hold thousands of keys.
    public init(client: OutboundHTTPClient, clock: any Clock, unknownKidRefetchInterval: Int64 = 30_000, maxURLs: Int = .max, maxKeysPerSet: Int = .max) {
        self.maxKeysPerSet = max(1, maxKeysPerSet)
        self.client = client
        self.clock = clock
        self.refetchInterval = max(0, unknownKidRefetchInterval)
        self.maxURLs = max(1, maxURLs)
    }

    /// The key with `kid` published at `url`, fetching or refetching the set as the rules above
    /// allow. `nil` when the `kid` is not in the set even after the allowed refetch succeeded.
    /// Throws ``ProviderError/unavailable(_:)`` when the `kid` is not in the cached set and the
    /// last fetch from `url` failed (including when no keys were ever fetched).
    public func key(url: String, kid: String) throws(ProviderError) -> VerificationKey? {
        let entry = self.entry(for: url)
        let now = clock.nowMillis()
        let seen = entry.state.withLock { $0 }
        if let keys = seen.keys, now < seen.expiresAt, let key = keys[kid] { return key }

        guard mayFetch(seen, kidKnown: seen.keys?[kid] != nil, now: now) else { return try Self.lookUp(kid, in: seen, url: url) }

        if let stale = seen.keys?[kid] {
            // Stale but usable: refresh if nobody else is, never wait.
            let refreshed: Bool? = entry.fetching.withLockIfAvailable { _ in
                fetchUnlessFetched(entry, url: url, attemptsSeen: seen.attempts)
                return true
            }
            if refreshed == nil { return stale }
        } else {
            entry.fetching.withLock { _ in fetchUnlessFetched(entry, url: url, attemptsSeen: seen.attempts) }
        }

        return try Self.lookUp(kid, in: entry.state.withLock { $0 }, url: url)
    }

    /// `kid`'s key in `state`; `nil` only when the set it was looked up in is the result of a
    /// successful fetch, else (a failed last fetch, no keys) unavailable.
    private static func lookUp(_ kid: String, in state: Entry.State, url: String) throws(ProviderError) -> VerificationKey? {
        if let key = state.keys?[kid] { return key }
        guard state.keys == nil || state.lastError != nil else { return nil }
        let reason = state.lastError ?? "fetch failed"
        throw .unavailable(
            state.keys == nil
                ? "no keys from \(OutboundHTTPClient.origin(url)): \(reason)"
                : "kid not in the cached keys of \(OutboundHTTPClient.origin(url)) and the last fetch failed: \(reason)")
    }

    private func mayFetch(_ state: Entry.State, kidKnown: Bool, now: Int64) -> Bool {
        guard let lastAttempt = state.lastAttemptAt else { return true }
        // A wall clock stepped back (now before the last attempt) must not hold fetches off until it catches up.
        let cooledDown = now - lastAttempt >= refetchInterval || now < lastAttempt
        if state.lastError != nil { return cooledDown }  // the last fetch failed: not before the interval
        if now >= state.expiresAt { return true }
        return !kidKnown && cooledDown
    }

    /// Runs with `entry.fetching` held. Skips the fetch when another thread completed one while
    /// this thread waited for the lock.
    private func fetchUnlessFetched(_ entry: Entry, url: String, attemptsSeen: Int) {
        guard entry.state.withLock({ $0.attempts }) == attemptsSeen else { return }
        let startedAt = clock.nowMillis()
        let result = fetch(url)
        entry.state.withLock { state in
            state.attempts += 1
            state.lastAttemptAt = startedAt
            switch result {
            case .success(let fetched):
                state.keys = fetched.keys
                state.expiresAt = startedAt + fetched.maxAgeSeconds * 1000
                state.lastError = nil
            case .failure(let error):
                state.lastError = error.description
            }
        }
    }

    private func fetch(_ url: String) -> Result<(keys: [String: VerificationKey], maxAgeSeconds: Int64), ProviderError> {
        let response: OutboundResponse
        do {
            response = try client.get(url, headers: [("Accept", "application/json")])
        } catch {
            return .failure(error)
        }
        guard response.status == 200 else {
            return .failure(.unavailable("JWKS answered HTTP \(response.status)"))
        }
        guard let document = try? JSON.parse(response.body), let list = document["keys"]?.arrayValue else {
            return .failure(.unavailable("JWKS is not a JSON key set"))
        }
        var keys: [String: VerificationKey] = [:]
        for item in list where keys.count < maxKeysPerSet {
            guard let jwk = Self.jwk(item), let kid = jwk.kid, !kid.isEmpty, keys[kid] == nil,
                jwk.use == nil || jwk.use == "sig",
                let key = try? VerificationKey(jwk: jwk)
            else { continue }
            keys[kid] = key
        }
        guard !keys.isEmpty else { return .failure(.unavailable("JWKS has no usable key")) }
        return .success((keys, Self.maxAge(response.header("cache-control"))))
    }

    private static func jwk(_ item: JSON) -> JWK? {
        guard let kty = item["kty"]?.stringValue else { return nil }
        return JWK(
            kty: kty, kid: item["kid"]?.stringValue, use: item["use"]?.stringValue, alg: item["alg"]?.stringValue,
            n: item["n"]?.stringValue, e: item["e"]?.stringValue, crv: item["crv"]?.stringValue,
            x: item["x"]?.stringValue, y: item["y"]?.stringValue)
    }

    /// `max-age` in seconds from a `Cache-Control` value; 0 for `no-store`/`no-cache`.
    static func maxAge(_ cacheControl: String?) -> Int64 {
        guard let cacheControl else { return defaultMaxAgeSeconds }
        var result: Int64?
        for directive in cacheControl.lowercased().split(separator: ",") {
            let parts = directive.split(separator: "=", maxSplits: 1).map { $0.filter { $0 != " " && $0 != "\t" } }
            switch parts.first {
            case "no-store", "no-cache":
                return 0
            case "max-age" where parts.count == 2:
                let digits = parts[1].filter { $0 != "\"" }
                guard !digits.isEmpty, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber) else { continue }
                result = digits.count > 9 ? maxMaxAgeSeconds : Int64(digits)
            default:
                continue
            }
        }
        return min(result ?? defaultMaxAgeSeconds, maxMaxAgeSeconds)
    }

    private func entry(for url: String) -> Entry {
        entries.withLock { entries in
            if let entry = entries[url] { return entry }
            let entry = Entry()
            if entries.count >= maxURLs, let victim = entries.keys.randomElement() { entries[victim] = nil }
            entries[url] = entry
            return entry
        }
    }

    /// One URL's cached set. `fetching` is held for the duration of a fetch.
    private final class Entry: Sendable {
        struct State: Sendable {
            var keys: [String: VerificationKey]?
            var expiresAt: Int64 = 0
            var lastAttemptAt: Int64?
            var lastError: String?
            var attempts = 0
        }

        let state = Mutex(State())
        let fetching = Mutex(())
    }
}
