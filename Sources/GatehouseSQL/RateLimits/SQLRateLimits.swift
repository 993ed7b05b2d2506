import GatehouseCore

/// The app's fixed-window counters (`rate_limits`), bound to `appID`.
extension SQLAppScopedStore: RateLimitStore {
    var rateLimits: any RateLimitStore { self }

    func hit(bucket: String, windowStart: Int64) throws -> Int64 {
        try database.query("""
            INSERT INTO rate_limits (app_id, bucket, window_start, hits) VALUES (\(appID), \(bucket), \(windowStart), 1)
            ON CONFLICT (app_id, bucket) DO UPDATE SET
                hits = CASE WHEN rate_limits.window_start = excluded.window_start THEN rate_limits.hits + 1
                            WHEN rate_limits.window_start > excluded.window_start THEN rate_limits.hits
                            ELSE 1 END,
                window_start = CASE WHEN rate_limits.window_start > excluded.window_start THEN rate_limits.window_start
                                    ELSE excluded.window_start END
            RETURNING hits
            """).first?.int64("hits") ?? 1
    }

    func hits(bucket: String, windowStart: Int64) throws -> Int64 {
        try database.query("""
            SELECT hits FROM rate_limits WHERE app_id = \(appID) AND bucket = \(bucket) AND window_start = \(windowStart)
            """).first?.int64("hits") ?? 0
    }

    func reset(bucket: String) throws {
        try database.execute("DELETE FROM rate_limits WHERE app_id = \(appID) AND bucket = \(bucket)")
    }

    func purge(before: Int64) throws {
        try database.execute("DELETE FROM rate_limits WHERE app_id = \(appID) AND window_start < \(before)")
    }
}
