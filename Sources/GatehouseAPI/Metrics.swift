import Foundation
import Synchronization

/// Request counters and latency histograms by route and status, rendered as Prometheus text.
/// Labels come from the route table (patterns, not paths), so their number is bounded.
public final class Metrics: Sendable {
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

    public init() {}

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
        return out
    }

    private func labels(_ key: Key) -> String {
        "method=\"\(key.method)\",route=\"\(escape(key.route))\",status=\"\(key.status)\""
    }

    private func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: "\\n")
    }
}
