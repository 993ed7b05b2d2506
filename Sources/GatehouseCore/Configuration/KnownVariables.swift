extension Configuration {
    /// Every variable the server reads. Any other `GATEHOUSE_*` variable in its environment is
    /// a misspelling or a leftover, and `unknownVariables(in:)` names it so that the server can
    /// warn (a test keeps this list and the names read in Sources in step).
    public static let knownVariables: Set<String> = [
        "GATEHOUSE_DATABASE_URL", "GATEHOUSE_DATABASE_POOLER", "GATEHOUSE_BLOB_STORE", "GATEHOUSE_BLOB_DIRECTORY", "GATEHOUSE_S3_ENDPOINT", "GATEHOUSE_S3_BUCKET",
        "GATEHOUSE_S3_REGION", "GATEHOUSE_S3_ACCESS_KEY_ID", "GATEHOUSE_S3_SECRET_ACCESS_KEY", "GATEHOUSE_S3_SECRET_ACCESS_KEY_FILE",
        "GATEHOUSE_LISTEN", "GATEHOUSE_PUBLIC_URL", "GATEHOUSE_MASTER_KEY", "GATEHOUSE_MASTER_KEY_FILE", "GATEHOUSE_ADMIN_TOKEN",
        "GATEHOUSE_ADMIN_TOKEN_FILE", "GATEHOUSE_TENANTS_DIR", "GATEHOUSE_UPLOAD_SPOOL_DIR", "GATEHOUSE_SMTP_URL",
        "GATEHOUSE_ALLOW_PRIVATE_OUTBOUND", "GATEHOUSE_TRUSTED_PROXIES", "GATEHOUSE_APPLE_URL", "GATEHOUSE_GOOGLE_JWKS_URL",
        "GATEHOUSE_FIREBASE_JWKS_URL", "GATEHOUSE_PROVIDER_URL_KAKAO", "GATEHOUSE_PROVIDER_URL_LINE", "GATEHOUSE_PROVIDER_URL_MICROSOFT",
        "GATEHOUSE_PROVIDER_URL_NAVER", "GATEHOUSE_PROVIDER_URL_GITHUB", "GATEHOUSE_PROVIDER_URL_NAVER_AUTH", "GATEHOUSE_PROVIDER_URL_GITHUB_AUTH",
        "GATEHOUSE_REFRESH_GRACE_SECONDS", "GATEHOUSE_OUTBOX_MAX_BACKOFF_SECONDS", "GATEHOUSE_OUTBOX_CONCURRENCY",
        "GATEHOUSE_EVENT_RETENTION_DAYS", "GATEHOUSE_HTTP_THREADS", "GATEHOUSE_DB_POOL_SIZE", "GATEHOUSE_CONNECTION_LIMIT",
        "GATEHOUSE_PER_IP_CONNECTION_LIMIT", "GATEHOUSE_CONNECTION_TIMEOUT_SECONDS", "GATEHOUSE_HEADER_TIMEOUT_SECONDS",
        "GATEHOUSE_ARGON2_MEMORY_KIB", "GATEHOUSE_ARGON2_ITERATIONS", "GATEHOUSE_ARGON2_PARALLELISM", "GATEHOUSE_HASH_CONCURRENCY",
        "GATEHOUSE_PROVIDER_THREADS", "GATEHOUSE_ACCESS_LOG", "GATEHOUSE_LOG_LEVEL", "GATEHOUSE_CONSOLE", "GATEHOUSE_DB_STATEMENT_TIMEOUT_MS",
        "GATEHOUSE_DB_CONNECT_TIMEOUT_SECONDS", "GATEHOUSE_MAINTENANCE_INTERVAL_SECONDS",
        "GATEHOUSE_OUTBOX_PER_APP_IN_FLIGHT", "GATEHOUSE_SMTP_FROM", "GATEHOUSE_MAX_MAIL_PER_HOUR",
        "GATEHOUSE_PHOTO_CONCURRENCY", "GATEHOUSE_MAX_UPLOADS_PER_HOUR_PER_USER", "GATEHOUSE_MAX_FILES_PER_USER", "GATEHOUSE_MAX_BYTES_PER_USER",
    ]

    /// The `GATEHOUSE_*` variables of `environment` that the server does not read, sorted, each
    /// with the known variable it most likely misspells (nil when none is close). Their values
    /// are never looked at: a misspelt secret must not end up in a log.
    public static func unknownVariables(in environment: [String: String]) -> [(name: String, suggestion: String?)] {
        environment.keys.filter { $0.hasPrefix("GATEHOUSE_") && !knownVariables.contains($0) }.sorted().map { name in
            let scored = knownVariables.map { ($0, editDistance(name, $0)) }.min { ($0.1, $0.0) < ($1.1, $1.0) }
            return (name, scored.flatMap { $0.1 <= max(2, name.count / 6) ? $0.0 : nil })
        }
    }

    /// Levenshtein distance over the UTF-8 bytes (variable names are ASCII).
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a.utf8), b = Array(b.utf8)
        var previous = Array(0...b.count)
        for i in 1...max(a.count, 1) where !a.isEmpty {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...max(b.count, 1) where !b.isEmpty {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return a.isEmpty ? b.count : previous[b.count]
    }
}
