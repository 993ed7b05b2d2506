import Foundation
import GatehouseCore
import Synchronization

/// Request counters and latency histograms by route and status, the domain's counters (sign-ins,
/// refresh reuse, rate limiting, provider calls), rendered as Prometheus text with the process's
/// own metrics. Every label value comes from a fixed set (route patterns, methods, providers,
/// error codes), so the number of series is bounded.
public final class Metrics: Sendable, DomainMetrics {
    static let buckets: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    private struct Key: Hashable {
        let method: String
        let route: String
        let status: Int
    }

    private struct Series {
        var bucketCounts = [UInt64](repeating: 0, count: Metrics.buckets.count)
        var count: UInt64 = 0
        var sum: Double = 0

        mutating func add(_ other: Series) {
            count += other.count
            sum += other.sum
            for i in bucketCounts.indices { bucketCounts[i] += other.bucketCounts[i] }
        }

        mutating func record(seconds: Double, bucket: Int?) {
            count += 1
            sum += seconds
            if let bucket { bucketCounts[bucket] += 1 }
        }
    }

    /// Striped by thread so that worker threads rarely meet on one lock; merged when rendered.
    private let shards: [Shard] = (0..<16).map { _ in Shard() }

    private final class Shard: Sendable {
        let series = Mutex<[Key: Series]>([:])
    }

    /// Sign-ins by method and outcome, in `SignInMethod.allCases` order, success then failure.
    private let signIns = Mutex<[UInt64]>(Array(repeating: 0, count: 2 * SignInMethod.allCases.count))
    private let refreshReuses = Atomic<UInt64>(0)
    /// Mails not queued past their app's hourly cap, by app (only apps that hit it have a series).
    private let mailsCapped = Mutex<[String: UInt64]>([:])
    /// 429 answers by route and error code.
    private let rateLimited = Mutex<[String: UInt64]>([:])

    private struct ProviderKey: Hashable {
        let provider: String
        let operation: String
        let outcome: String
    }

    private let providerCalls = Mutex<[ProviderKey: Series]>([:])

    public init() {}

    // MARK: - Domain

    public func signIn(_ method: SignInMethod, succeeded: Bool) {
        let index = 2 * SignInMethod.allCases.firstIndex(of: method)! + (succeeded ? 0 : 1)
        signIns.withLock { $0[index] += 1 }
    }

    public func refreshTokenReused() { refreshReuses.add(1, ordering: .relaxed) }

    public func mailCapped(app: AppID) { mailsCapped.withLock { $0[app.rawValue, default: 0] += 1 } }

    /// Counts a 429 answer on `route` with its error `code`.
    func recordRateLimited(route: String, code: String) {
        rateLimited.withLock { $0["\(route)\u{0}\(code)", default: 0] += 1 }
    }

    /// An observer for the providers' HTTP client: each call is recorded under the provider its
    /// URL belongs to (the configured Apple base URL and Google and Firebase key URLs).
    func providerCallObserver(appleURL: String, googleKeysURL: String, firebaseKeysURL: String) -> @Sendable (String, Int?, Double) -> Void {
        let apple = IdentityProvider.apple.rawValue, google = IdentityProvider.google.rawValue
        return { [self] url, status, seconds in
            let (provider, operation): (String, String) =
                if url == googleKeysURL { (google, "keys") }
                else if url == firebaseKeysURL { ("firebase", "keys") }
                else if url.hasPrefix(appleURL + "/") {
                    switch url.dropFirst(appleURL.count) {
                    case "/auth/keys": (apple, "keys")
                    case "/auth/token": (apple, "token")
                    case "/auth/revoke": (apple, "revoke")
                    default: (apple, "other")
                    }
                } else { ("other", "other") }
            let outcome = status.map { (200..<300).contains($0) ? "ok" : "http_error" } ?? "unreachable"
            recordProviderCall(provider: provider, operation: operation, outcome: outcome, seconds: seconds)
        }
    }

    /// Records one call to an identity provider: `provider` (`apple`, `google`, `firebase`),
    /// `operation` (`keys`, `token`, `revoke`), `outcome` (`ok` for a 2xx, `http_error` for
    /// another status, `unreachable` when no response came).
    public func recordProviderCall(provider: String, operation: String, outcome: String, seconds: Double) {
        let bucket = Metrics.buckets.firstIndex(where: { seconds <= $0 })
        providerCalls.withLock { $0[ProviderKey(provider: provider, operation: operation, outcome: outcome), default: Series()].record(seconds: seconds, bucket: bucket) }
    }

    /// Methods get a label of their own; any other (clients may send any token) counts as `other`,
    /// so that the series stay bounded and every label value is safe in the exposition format.
    static let knownMethods: Set<String> = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]

    /// Records one finished request. `route` is the matched pattern, or a fixed word for unmatched requests.
    public func record(method: String, route: String, status: Int, seconds: Double) {
        let key = Key(method: Self.knownMethods.contains(method) ? method : "other", route: route, status: status)
        let bucket = Metrics.buckets.firstIndex(where: { seconds <= $0 })
        // Mutated in place (no copy of the bucket array), so the lock is held for a few adds:
        // every request of every worker thread passes here.
        let shard = shards[Int(UInt(bitPattern: pthread_self().hashValue) % UInt(shards.count))]
        shard.series.withLock { all in
            all[key, default: Series()].record(seconds: seconds, bucket: bucket)
        }
    }

    /// The Prometheus text exposition, with `gauges` and `counters` (name, help, value) appended.
    public func render(gauges: [(name: String, help: String, value: Double)], counters: [(name: String, help: String, value: Double)] = []) -> String {
        var snapshot: [Key: Series] = [:]
        for shard in shards {
            for (key, series) in shard.series.withLock({ $0 }) { snapshot[key, default: Series()].add(series) }
        }
        let keys = snapshot.keys.sorted { ($0.route, $0.method, $0.status) < ($1.route, $1.method, $1.status) }
        var out = "# HELP gatehouse_http_requests_total Requests answered, by route and status.\n"
        out += "# TYPE gatehouse_http_requests_total counter\n"
        for key in keys {
            out += "gatehouse_http_requests_total{\(labels(key))} \(snapshot[key]!.count)\n"
        }
        out += "# HELP gatehouse_http_request_duration_seconds Time from the last request byte to the response, by route and status.\n"
        out += "# TYPE gatehouse_http_request_duration_seconds histogram\n"
        for key in keys {
            let s = snapshot[key]!
            var cumulative: UInt64 = 0
            for (i, bound) in Metrics.buckets.enumerated() {
                cumulative += s.bucketCounts[i]
                out += "gatehouse_http_request_duration_seconds_bucket{\(labels(key)),le=\"\(bound)\"} \(cumulative)\n"
            }
            out += "gatehouse_http_request_duration_seconds_bucket{\(labels(key)),le=\"+Inf\"} \(s.count)\n"
            out += "gatehouse_http_request_duration_seconds_sum{\(labels(key))} \(s.sum)\n"
            out += "gatehouse_http_request_duration_seconds_count{\(labels(key))} \(s.count)\n"
        }
        for gauge in gauges {
            out += "# HELP \(gauge.name) \(gauge.help)\n# TYPE \(gauge.name) gauge\n\(gauge.name) \(gauge.value)\n"
        }
        for counter in counters {
            out += "# HELP \(counter.name) \(counter.help)\n# TYPE \(counter.name) counter\n\(counter.name) \(counter.value)\n"
        }
        out += renderDomain()
        out += ProcessMetrics.render()
        return out
    }

    private func renderDomain() -> String {
        var out = "# HELP gatehouse_sign_ins_total Sign-ins (sign-ups included) by method; outcome failure is any refusal: a wrong credential, a rate limit, an invalid field.\n"
        out += "# TYPE gatehouse_sign_ins_total counter\n"
        let signIns = self.signIns.withLock { $0 }
        for (index, method) in SignInMethod.allCases.enumerated() {
            for (offset, outcome) in ["success", "failure"].enumerated() {
                out += "gatehouse_sign_ins_total{method=\"\(method.rawValue)\",outcome=\"\(outcome)\"} \(signIns[2 * index + offset])\n"
            }
        }
        out += "# HELP gatehouse_refresh_reuse_total Rotated refresh tokens presented again past the grace window (each ended its session).\n"
        out += "# TYPE gatehouse_refresh_reuse_total counter\ngatehouse_refresh_reuse_total \(refreshReuses.load(ordering: .relaxed))\n"
        out += "# HELP gatehouse_mail_capped_total Mails not queued because their app had sent its rate_limits.mail_per_hour this hour.\n"
        out += "# TYPE gatehouse_mail_capped_total counter\n"
        for (app, count) in mailsCapped.withLock({ $0 }).sorted(by: { $0.key < $1.key }) {
            out += "gatehouse_mail_capped_total{app_id=\"\(escape(app))\"} \(count)\n"
        }
        out += "# HELP gatehouse_rate_limited_total Requests answered 429, by route and error code.\n# TYPE gatehouse_rate_limited_total counter\n"
        for (key, count) in rateLimited.withLock({ $0 }).sorted(by: { $0.key < $1.key }) {
            let parts = key.split(separator: "\u{0}", maxSplits: 1).map(String.init)
            out += "gatehouse_rate_limited_total{route=\"\(escape(parts[0]))\",code=\"\(escape(parts.count > 1 ? parts[1] : ""))\"} \(count)\n"
        }
        out += "# HELP gatehouse_provider_request_duration_seconds Calls to identity providers (keys, Apple's token and revoke endpoints) by provider, operation and outcome.\n"
        out += "# TYPE gatehouse_provider_request_duration_seconds histogram\n"
        let calls = providerCalls.withLock { $0 }
        for key in calls.keys.sorted(by: { ($0.provider, $0.operation, $0.outcome) < ($1.provider, $1.operation, $1.outcome) }) {
            let series = calls[key]!
            let labels = "provider=\"\(key.provider)\",operation=\"\(key.operation)\",outcome=\"\(key.outcome)\""
            var cumulative: UInt64 = 0
            for (i, bound) in Metrics.buckets.enumerated() {
                cumulative += series.bucketCounts[i]
                out += "gatehouse_provider_request_duration_seconds_bucket{\(labels),le=\"\(bound)\"} \(cumulative)\n"
            }
            out += "gatehouse_provider_request_duration_seconds_bucket{\(labels),le=\"+Inf\"} \(series.count)\n"
            out += "gatehouse_provider_request_duration_seconds_sum{\(labels)} \(series.sum)\n"
            out += "gatehouse_provider_request_duration_seconds_count{\(labels)} \(series.count)\n"
        }
        out += "# HELP gatehouse_build_info The running build; always 1.\n# TYPE gatehouse_build_info gauge\n"
        out += "gatehouse_build_info{version=\"\(escape(Gatehouse.version))\"} 1\n"
        return out
    }

    private func labels(_ key: Key) -> String {
        "method=\"\(key.method)\",route=\"\(escape(key.route))\",status=\"\(key.status)\""
    }

    private func escape(_ s: String) -> String { Self.escape(s) }

    /// A label value as the Prometheus text format writes it.
    static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: "\\n")
    }
}
