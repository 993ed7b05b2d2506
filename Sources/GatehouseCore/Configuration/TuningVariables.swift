extension Configuration {
    /// The whole numbers that size the server (threads, pools, timeouts, hashing cost, the outbox)
    /// and the platform's caps (``platformCaps``).
    mutating func readTuning(_ e: inout EnvironmentReader) {
        e.integer("GATEHOUSE_REFRESH_GRACE_SECONDS", 0...60, into: &refreshGraceSeconds)
        e.integer("GATEHOUSE_OUTBOX_MAX_BACKOFF_SECONDS", 5...86400, into: &outboxMaxBackoffSeconds)
        e.integer("GATEHOUSE_OUTBOX_CONCURRENCY", 1...64, into: &outboxConcurrency)
        e.integer("GATEHOUSE_OUTBOX_PER_APP_IN_FLIGHT", 1...64, into: &outboxPerAppInFlight)
        e.integer("GATEHOUSE_EVENT_RETENTION_DAYS", 1...36_500, into: &eventRetentionDays)
        e.integer("GATEHOUSE_MAINTENANCE_INTERVAL_SECONDS", 60...86_400, into: &maintenanceIntervalSeconds)
        e.integer("GATEHOUSE_HTTP_THREADS", 1...1024, into: &httpThreads)
        var pool = -1
        e.integer("GATEHOUSE_DB_POOL_SIZE", 1...1024, into: &pool)
        if pool > 0 { databasePoolSize = pool }
        e.integer("GATEHOUSE_DB_STATEMENT_TIMEOUT_MS", 0...3_600_000, into: &databaseStatementTimeoutMillis)
        e.integer("GATEHOUSE_DB_CONNECT_TIMEOUT_SECONDS", 1...300, into: &databaseConnectTimeoutSeconds)
        e.integer("GATEHOUSE_CONNECTION_LIMIT", 1...1_000_000, into: &connectionLimit)
        e.integer("GATEHOUSE_PER_IP_CONNECTION_LIMIT", 1...1_000_000, into: &perIPConnectionLimit)
        e.integer("GATEHOUSE_CONNECTION_TIMEOUT_SECONDS", 1...3600, into: &connectionTimeoutSeconds)
        e.integer("GATEHOUSE_HEADER_TIMEOUT_SECONDS", 1...3600, into: &headerTimeoutSeconds)
        e.integer("GATEHOUSE_ARGON2_MEMORY_KIB", 1024...1_048_576, into: &argon2MemoryKiB)
        e.integer("GATEHOUSE_ARGON2_ITERATIONS", 1...20, into: &argon2Iterations)
        e.integer("GATEHOUSE_ARGON2_PARALLELISM", 1...16, into: &argon2Parallelism)
        e.integer("GATEHOUSE_HASH_CONCURRENCY", 1...256, into: &hashConcurrency)
        e.integer("GATEHOUSE_PROVIDER_THREADS", 1...1024, into: &providerThreads)
        e.integer("GATEHOUSE_MAX_MAIL_PER_HOUR", 1...1_000_000, into: &maxMailPerHour)
        e.integer("GATEHOUSE_PHOTO_CONCURRENCY", 1...64, into: &photoConcurrency)
        // The upload ceilings have problems of their own wording, reported after the numbers above.
        let uploads = AppSettings.PlatformCaps.read(e.environment, over: platformCaps)
        platformCaps = uploads.caps
        e.problems += uploads.problems
    }

    /// `GATEHOUSE_ACCESS_LOG`, `GATEHOUSE_LOG_LEVEL` and `GATEHOUSE_CONSOLE`.
    mutating func readLogging(_ e: inout EnvironmentReader) {
        if let console = e.value("GATEHOUSE_CONSOLE") {
            switch console {
            case "on": self.console = true
            case "off": self.console = false
            default: e.problems.append("GATEHOUSE_CONSOLE must be on or off.")
            }
        }
        if let log = e.value("GATEHOUSE_ACCESS_LOG") {
            switch log {
            case "json": accessLog = true
            case "off": accessLog = false
            default: e.problems.append("GATEHOUSE_ACCESS_LOG must be json or off.")
            }
        }
        if let level = e.value("GATEHOUSE_LOG_LEVEL") {
            if let parsed = LogLevel(name: level) { logLevel = parsed } else { e.problems.append("GATEHOUSE_LOG_LEVEL must be debug, info, warn or error.") }
        }
    }
}
