import Foundation

/// The server's configuration, read from the environment (API.md, Operations). Every variable is
/// validated at start and every problem is reported at once.
public struct Configuration: Sendable {
    public enum Database: Sendable, Equatable {
        case sqlite(path: String)
        case postgres(url: String)
    }

    public var database: Database = .sqlite(path: "./data/gatehouse.db")
    /// Where file contents live (ADR 0013): `GATEHOUSE_BLOB_STORE=database` (default) or
    /// `filesystem` in `GATEHOUSE_BLOB_DIRECTORY` (default `<data folder>/blobs` with SQLite;
    /// required with PostgreSQL), or `s3`: an S3-compatible bucket (`GATEHOUSE_S3_*`).
    public enum BlobStorage: Sendable, Equatable {
        case database
        case filesystem(directory: String)
        case s3(S3Settings)
    }

    /// Where `GATEHOUSE_BLOB_STORE=s3` keeps blobs. Its descriptions leave the secret out.
    public struct S3Settings: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
        /// `https://host[:port]`, or `http://` to a loopback address only.
        public var endpoint: String
        public var bucket: String
        public var region: String
        public var accessKeyID: String
        public var secretAccessKey: String

        public init(endpoint: String, bucket: String, region: String = "us-east-1", accessKeyID: String, secretAccessKey: String) {
            self.endpoint = endpoint
            self.bucket = bucket
            self.region = region
            self.accessKeyID = accessKeyID
            self.secretAccessKey = secretAccessKey
        }

        public var description: String { "S3(\(endpoint)/\(bucket), region \(region), key \(accessKeyID))" }
        public var debugDescription: String { description }
    }

    public var blobStorage: BlobStorage = .database
    public var listenHost = "127.0.0.1"
    public var listenPort: UInt16 = 8080
    /// Base URL clients reach this server at, without a trailing slash; token issuers are built on it.
    public var publicURL = "http://127.0.0.1:8080"
    /// The master key as given (`GATEHOUSE_MASTER_KEY` or the file's content); nil means "generate
    /// one into the data folder" (embedded mode only).
    public var masterKey: [UInt8]?
    public var adminToken: String?
    public var tenantsDirectory: String?
    public var smtpURL = "log:"
    /// `GATEHOUSE_SMTP_FROM`: the address the platform's mailer sends every app's mail from (the
    /// app's name as the display name); nil: `no-reply@` the public URL's host.
    public var smtpFrom: String?
    /// `GATEHOUSE_MAX_MAIL_PER_HOUR`: the highest `rate_limits.mail_per_hour` an app may set.
    public var maxMailPerHour: Int = 10_000
    public var trustedProxies: [String] = []
    /// `GATEHOUSE_ALLOW_PRIVATE_OUTBOUND`: whether connections to URLs a tenant admin sets (an
    /// app's SMTP server, its webhooks) may reach loopback, private, link-local and metadata
    /// addresses. Off in production; for local development and tests. The server's own URLs are
    /// never restricted.
    public var allowPrivateOutbound = false
    public var appleURL = "https://appleid.apple.com"
    public var googleJWKSURL = "https://www.googleapis.com/oauth2/v3/certs"
    public var firebaseJWKSURL = "https://www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com"
    public var refreshGraceSeconds = 10
    public var outboxMaxBackoffSeconds = 600
    /// Outbox deliveries of each kind (mail, webhooks, Apple revocations, blob deletions) a node
    /// makes at once (`GATEHOUSE_OUTBOX_CONCURRENCY`).
    public var outboxConcurrency = 4
    /// Items of one app and kind a node delivers at once (`GATEHOUSE_OUTBOX_PER_APP_IN_FLIGHT`).
    public var outboxPerAppInFlight = 2
    /// Days an audit event is kept (`GATEHOUSE_EVENT_RETENTION_DAYS`).
    public var eventRetentionDays = 400
    /// Seconds between a node's tries at a maintenance round (`GATEHOUSE_MAINTENANCE_INTERVAL_SECONDS`).
    public var maintenanceIntervalSeconds = 300
    /// libmicrohttpd worker threads. Handlers block on database calls, so this is above the core count.
    public var httpThreads = max(16, 8 * ProcessInfo.processInfo.activeProcessorCount)
    public var databasePoolSize: Int?
    /// PostgreSQL: every statement is cancelled after this long (`GATEHOUSE_DB_STATEMENT_TIMEOUT_MS`,
    /// 0: never), and the request answers 503. Migrations are not bounded.
    public var databaseStatementTimeoutMillis = 5_000
    /// PostgreSQL: a connection attempt gives up after this long (`GATEHOUSE_DB_CONNECT_TIMEOUT_SECONDS`).
    public var databaseConnectTimeoutSeconds = 5
    public var connectionLimit = 1024
    public var perIPConnectionLimit = 256
    public var connectionTimeoutSeconds = 30
    /// The total time a connection may take to send a request's headers.
    public var headerTimeoutSeconds = 30
    /// The time a JSON body may take, from the end of its headers (408 `request/timeout` after).
    public var jsonBodyTimeoutSeconds: Double = 10
    /// Uploads: after this many seconds from the end of their headers, at least
    /// `uploadMinimumBytesPerSecond` on average, else 408 `request/timeout`.
    public var uploadGraceSeconds: Double = 10
    public var uploadMinimumBytesPerSecond = 16 * 1024
    /// `json` (default) or `off`: one line per request on standard output.
    public var accessLog = true
    /// `GATEHOUSE_LOG_LEVEL`: the least severe line written besides the access log (`info` by default).
    public var logLevel = LogLevel.info
    /// argon2id cost; OWASP's m=19456 KiB, t=2, p=1 by default. Stored hashes carry their own
    /// parameters and are rehashed at the next sign-in when these change.
    public var argon2MemoryKiB = 19456
    public var argon2Iterations = 2
    public var argon2Parallelism = 1
    /// Password hashes computed at once, each on its own thread; as many callers again may wait,
    /// and beyond that a call is refused at once with 503 `server/busy` (see `PasswordHasher`).
    public var hashConcurrency = ProcessInfo.processInfo.activeProcessorCount
    /// Threads that answer the routes calling an identity provider (they may wait on its network).
    /// Each one used keeps 2–3 MiB resident (measured: 16 cost 38 MiB idle on 2 cores).
    public var providerThreads = max(4, 4 * ProcessInfo.processInfo.activeProcessorCount)
    /// `GATEHOUSE_PHOTO_CONCURRENCY`: photos decoded at once, each on its own thread (1 by
    /// default); as many uploads again may wait, beyond that 503 `server/busy` (``PhotoProcessor``).
    public var photoConcurrency = 1

    /// Where uploads are written while they arrive, before their handler runs; each spool
    /// file is removed when its request ends. The system's temporary directory by default.
    public var uploadSpoolDirectory: String?

    public init() {}

    /// The folder that holds the embedded database and, when generated, the master key.
    public var dataDirectory: String? {
        guard case .sqlite(let path) = database else { return nil }
        return (path as NSString).deletingLastPathComponent.isEmpty ? "." : (path as NSString).deletingLastPathComponent
    }

    public var databasePoolSizeResolved: Int { databasePoolSize ?? httpThreads }

    /// Reads the configuration from `environment`. Throws `ConfigurationError` listing every problem.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigurationError) -> Configuration {
        var config = Configuration()
        var problems: [String] = []
        func value(_ name: String) -> String? {
            guard let v = environment[name]?.trimmingCharacters(in: .whitespacesAndNewlines), !v.isEmpty else { return nil }
            return v
        }
        func integer(_ name: String, _ range: ClosedRange<Int>, into target: inout Int) {
            guard let raw = value(name) else { return }
            guard let n = Int(raw), range.contains(n) else {
                problems.append("\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound).")
                return
            }
            target = n
        }

        if let url = value("GATEHOUSE_DATABASE_URL") {
            if url.hasPrefix("sqlite://") {
                let path = String(url.dropFirst("sqlite://".count))
                if path.isEmpty { problems.append("GATEHOUSE_DATABASE_URL: sqlite:// needs a path, e.g. sqlite://./data/gatehouse.db.") }
                config.database = .sqlite(path: path)
            } else if url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") {
                config.database = .postgres(url: url)
            } else {
                problems.append("GATEHOUSE_DATABASE_URL must start with sqlite:// or postgres://.")
            }
        }

        let blobDirectory = value("GATEHOUSE_BLOB_DIRECTORY")
        switch value("GATEHOUSE_BLOB_STORE") ?? "database" {
        case "database":
            if blobDirectory != nil { problems.append("GATEHOUSE_BLOB_DIRECTORY is only for GATEHOUSE_BLOB_STORE=filesystem.") }
        case "s3":
            if blobDirectory != nil { problems.append("GATEHOUSE_BLOB_DIRECTORY is only for GATEHOUSE_BLOB_STORE=filesystem.") }
            let endpoint = value("GATEHOUSE_S3_ENDPOINT")
            if let endpoint, let problem = s3EndpointProblem(endpoint) { problems.append(problem) }
            if endpoint == nil { problems.append("GATEHOUSE_BLOB_STORE=s3 needs GATEHOUSE_S3_ENDPOINT.") }
            let bucket = value("GATEHOUSE_S3_BUCKET")
            if let bucket, !isBucketName(bucket) {
                problems.append("GATEHOUSE_S3_BUCKET must be a bucket name: 3 to 63 of a-z 0-9 . -, starting and ending with a letter or digit.")
            }
            if bucket == nil { problems.append("GATEHOUSE_BLOB_STORE=s3 needs GATEHOUSE_S3_BUCKET.") }
            let region = value("GATEHOUSE_S3_REGION") ?? "us-east-1"
            if !region.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D }) || region.utf8.count > 64 {
                problems.append("GATEHOUSE_S3_REGION must be a region name such as us-east-1.")
            }
            let keyID = value("GATEHOUSE_S3_ACCESS_KEY_ID")
            if keyID == nil { problems.append("GATEHOUSE_BLOB_STORE=s3 needs GATEHOUSE_S3_ACCESS_KEY_ID.") }
            if let keyID, keyID.contains(":") || keyID.utf8.contains(where: { $0 < 0x21 || $0 == 0x7F }) {
                problems.append("GATEHOUSE_S3_ACCESS_KEY_ID must not contain ':', spaces or control characters.")
            }
            var secret: String?
            let secretText = value("GATEHOUSE_S3_SECRET_ACCESS_KEY")
            let secretFile = value("GATEHOUSE_S3_SECRET_ACCESS_KEY_FILE")
            if secretText != nil && secretFile != nil {
                problems.append("Set GATEHOUSE_S3_SECRET_ACCESS_KEY or GATEHOUSE_S3_SECRET_ACCESS_KEY_FILE, not both.")
            } else if let secretText {
                secret = secretText
            } else if let secretFile {
                if let text = try? String(contentsOfFile: secretFile, encoding: .utf8) {
                    let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
                    if trimmed.isEmpty { problems.append("GATEHOUSE_S3_SECRET_ACCESS_KEY_FILE: \(secretFile) is empty.") } else { secret = trimmed }
                } else {
                    problems.append("GATEHOUSE_S3_SECRET_ACCESS_KEY_FILE: cannot read \(secretFile).")
                }
            } else {
                problems.append("GATEHOUSE_BLOB_STORE=s3 needs GATEHOUSE_S3_SECRET_ACCESS_KEY or GATEHOUSE_S3_SECRET_ACCESS_KEY_FILE.")
            }
            if let endpoint, let bucket, let keyID, let secret {
                config.blobStorage = .s3(S3Settings(endpoint: endpoint, bucket: bucket, region: region, accessKeyID: keyID, secretAccessKey: secret))
            }
        case "filesystem":
            if let blobDirectory {
                config.blobStorage = .filesystem(directory: blobDirectory)
            } else if let data = config.dataDirectory {
                config.blobStorage = .filesystem(directory: data + "/blobs")
            } else {
                problems.append("GATEHOUSE_BLOB_STORE=filesystem needs GATEHOUSE_BLOB_DIRECTORY with PostgreSQL.")
            }
        default:
            problems.append("GATEHOUSE_BLOB_STORE must be database, filesystem or s3.")
        }

        var listenGiven = false
        if let listen = value("GATEHOUSE_LISTEN") {
            listenGiven = true
            if let (host, port) = parseListen(listen) {
                config.listenHost = host
                config.listenPort = port
            } else {
                problems.append("GATEHOUSE_LISTEN must be host:port, e.g. 127.0.0.1:8080 or [::]:8080.")
            }
        }
        if let publicURL = value("GATEHOUSE_PUBLIC_URL") {
            if let parsed = URLComponents(string: publicURL), let scheme = parsed.scheme, ["http", "https"].contains(scheme),
                parsed.host?.isEmpty == false, parsed.query == nil, parsed.fragment == nil, parsed.user == nil, parsed.password == nil
            {
                var trimmed = Substring(publicURL)
                while trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
                config.publicURL = String(trimmed)
            } else {
                problems.append("GATEHOUSE_PUBLIC_URL must be an absolute http(s) URL without user, query or fragment, e.g. https://auth.example.com.")
            }
        } else if listenGiven {
            let host = config.listenHost.contains(":") ? "[\(config.listenHost)]" : config.listenHost
            config.publicURL = "http://\(host):\(config.listenPort)"
        }

        let keyText = value("GATEHOUSE_MASTER_KEY")
        let keyFile = value("GATEHOUSE_MASTER_KEY_FILE")
        if keyText != nil && keyFile != nil {
            problems.append("Set GATEHOUSE_MASTER_KEY or GATEHOUSE_MASTER_KEY_FILE, not both.")
        } else if let keyText {
            if let key = MasterKey.decode(keyText) { config.masterKey = key } else { problems.append(MasterKey.formatProblem("GATEHOUSE_MASTER_KEY")) }
        } else if let keyFile {
            if let text = try? String(contentsOfFile: keyFile, encoding: .utf8) {
                if let key = MasterKey.decode(text) { config.masterKey = key } else { problems.append(MasterKey.formatProblem("GATEHOUSE_MASTER_KEY_FILE")) }
            } else {
                problems.append("GATEHOUSE_MASTER_KEY_FILE: cannot read \(keyFile).")
            }
        }
        if config.masterKey == nil, case .postgres = config.database {
            problems.append("GATEHOUSE_MASTER_KEY or GATEHOUSE_MASTER_KEY_FILE is required with PostgreSQL (every node needs the same key).")
        }

        let tokenText = value("GATEHOUSE_ADMIN_TOKEN")
        let tokenFile = value("GATEHOUSE_ADMIN_TOKEN_FILE")
        if tokenText != nil && tokenFile != nil {
            problems.append("Set GATEHOUSE_ADMIN_TOKEN or GATEHOUSE_ADMIN_TOKEN_FILE, not both.")
        } else if let tokenText {
            if tokenText.utf8.count < 32 { problems.append("GATEHOUSE_ADMIN_TOKEN must be at least 32 characters.") }
            config.adminToken = tokenText
        } else if let tokenFile {
            if let text = try? String(contentsOfFile: tokenFile, encoding: .utf8) {
                let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
                if token.utf8.count < 32 {
                    problems.append("GATEHOUSE_ADMIN_TOKEN_FILE: the token in \(tokenFile) must be at least 32 characters.")
                } else {
                    config.adminToken = token
                }
            } else {
                problems.append("GATEHOUSE_ADMIN_TOKEN_FILE: cannot read \(tokenFile).")
            }
        }
        if let dir = value("GATEHOUSE_TENANTS_DIR") {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: dir, isDirectory: &isDirectory), isDirectory.boolValue {
                config.tenantsDirectory = dir
            } else {
                problems.append("GATEHOUSE_TENANTS_DIR: \(dir) is not a folder.")
            }
        }
        if let dir = value("GATEHOUSE_UPLOAD_SPOOL_DIR") {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: dir, isDirectory: &isDirectory), isDirectory.boolValue,
                FileManager.default.isWritableFile(atPath: dir)
            {
                config.uploadSpoolDirectory = dir
            } else {
                problems.append("GATEHOUSE_UPLOAD_SPOOL_DIR: \(dir) is not a writable folder.")
            }
        }
        if let smtp = value("GATEHOUSE_SMTP_URL") {
            if smtp == "log:" || smtp.hasPrefix("smtp://") || smtp.hasPrefix("smtps://") {
                config.smtpURL = smtp
            } else {
                problems.append("GATEHOUSE_SMTP_URL must be log:, smtp://… or smtps://….")
            }
        } else if config.publicURL.lowercased().hasPrefix("https://") {
            // The default prints every mail, codes included, to the log: fine on a laptop, not
            // behind a real https address unless the operator says so.
            problems.append(
                "GATEHOUSE_SMTP_URL is required when GATEHOUSE_PUBLIC_URL is https: the default, log:, writes every mail (sign-in codes included) to the log. Set smtp://… or smtps://…, or GATEHOUSE_SMTP_URL=log: to print mail on purpose.")
        }
        if let from = value("GATEHOUSE_SMTP_FROM") {
            if isMailAddress(from) {
                config.smtpFrom = from
            } else {
                problems.append("GATEHOUSE_SMTP_FROM must be an address such as no-reply@auth.example.com (ASCII, one @, no name or spaces).")
            }
        }
        if let allow = value("GATEHOUSE_ALLOW_PRIVATE_OUTBOUND") {
            switch allow {
            case "true": config.allowPrivateOutbound = true
            case "false": config.allowPrivateOutbound = false
            default: problems.append("GATEHOUSE_ALLOW_PRIVATE_OUTBOUND must be true or false.")
            }
        }
        if let proxies = value("GATEHOUSE_TRUSTED_PROXIES") {
            let list = proxies.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            for entry in list where IPRange(entry) == nil {
                problems.append("GATEHOUSE_TRUSTED_PROXIES: \(entry) is not an IP address or CIDR range.")
            }
            config.trustedProxies = list
        }
        for (name, keyPath) in [
            ("GATEHOUSE_APPLE_URL", \Configuration.appleURL), ("GATEHOUSE_GOOGLE_JWKS_URL", \.googleJWKSURL),
            ("GATEHOUSE_FIREBASE_JWKS_URL", \.firebaseJWKSURL),
        ] {
            guard let url = value(name) else { continue }
            if let parsed = URLComponents(string: url), ["http", "https"].contains(parsed.scheme ?? ""), parsed.host?.isEmpty == false {
                config[keyPath: keyPath] = url.hasSuffix("/") ? String(url.dropLast()) : url
            } else {
                problems.append("\(name) must be an absolute http(s) URL.")
            }
        }
        integer("GATEHOUSE_REFRESH_GRACE_SECONDS", 0...60, into: &config.refreshGraceSeconds)
        integer("GATEHOUSE_OUTBOX_MAX_BACKOFF_SECONDS", 5...86400, into: &config.outboxMaxBackoffSeconds)
        integer("GATEHOUSE_OUTBOX_CONCURRENCY", 1...64, into: &config.outboxConcurrency)
        integer("GATEHOUSE_OUTBOX_PER_APP_IN_FLIGHT", 1...64, into: &config.outboxPerAppInFlight)
        integer("GATEHOUSE_EVENT_RETENTION_DAYS", 1...36_500, into: &config.eventRetentionDays)
        integer("GATEHOUSE_MAINTENANCE_INTERVAL_SECONDS", 60...86_400, into: &config.maintenanceIntervalSeconds)
        integer("GATEHOUSE_HTTP_THREADS", 1...1024, into: &config.httpThreads)
        var pool = -1
        integer("GATEHOUSE_DB_POOL_SIZE", 1...1024, into: &pool)
        if pool > 0 { config.databasePoolSize = pool }
        integer("GATEHOUSE_DB_STATEMENT_TIMEOUT_MS", 0...3_600_000, into: &config.databaseStatementTimeoutMillis)
        integer("GATEHOUSE_DB_CONNECT_TIMEOUT_SECONDS", 1...300, into: &config.databaseConnectTimeoutSeconds)
        integer("GATEHOUSE_CONNECTION_LIMIT", 1...1_000_000, into: &config.connectionLimit)
        integer("GATEHOUSE_PER_IP_CONNECTION_LIMIT", 1...1_000_000, into: &config.perIPConnectionLimit)
        integer("GATEHOUSE_CONNECTION_TIMEOUT_SECONDS", 1...3600, into: &config.connectionTimeoutSeconds)
        integer("GATEHOUSE_HEADER_TIMEOUT_SECONDS", 1...3600, into: &config.headerTimeoutSeconds)
        integer("GATEHOUSE_ARGON2_MEMORY_KIB", 1024...1_048_576, into: &config.argon2MemoryKiB)
        integer("GATEHOUSE_ARGON2_ITERATIONS", 1...20, into: &config.argon2Iterations)
        integer("GATEHOUSE_ARGON2_PARALLELISM", 1...16, into: &config.argon2Parallelism)
        integer("GATEHOUSE_HASH_CONCURRENCY", 1...256, into: &config.hashConcurrency)
        integer("GATEHOUSE_PROVIDER_THREADS", 1...1024, into: &config.providerThreads)
        integer("GATEHOUSE_MAX_MAIL_PER_HOUR", 1...1_000_000, into: &config.maxMailPerHour)
        integer("GATEHOUSE_PHOTO_CONCURRENCY", 1...64, into: &config.photoConcurrency)
        // The upload ceilings are read by the settings themselves (``AppSettings/PlatformCaps/current``);
        // here a bad value is reported with the other problems at start.
        problems += AppSettings.PlatformCaps.read(environment).problems
        if let log = value("GATEHOUSE_ACCESS_LOG") {
            switch log {
            case "json": config.accessLog = true
            case "off": config.accessLog = false
            default: problems.append("GATEHOUSE_ACCESS_LOG must be json or off.")
            }
        }
        if let level = value("GATEHOUSE_LOG_LEVEL") {
            if let parsed = LogLevel(name: level) { config.logLevel = parsed } else { problems.append("GATEHOUSE_LOG_LEVEL must be debug, info, warn or error.") }
        }

        if !problems.isEmpty { throw ConfigurationError(problems: problems) }
        return config
    }

    /// Every variable the server reads. Any other `GATEHOUSE_*` variable in its environment is
    /// a misspelling or a leftover, and `unknownVariables(in:)` names it so that the server can
    /// warn (a test keeps this list and the names read in Sources in step).
    public static let knownVariables: Set<String> = [
        "GATEHOUSE_DATABASE_URL", "GATEHOUSE_BLOB_STORE", "GATEHOUSE_BLOB_DIRECTORY", "GATEHOUSE_S3_ENDPOINT", "GATEHOUSE_S3_BUCKET",
        "GATEHOUSE_S3_REGION", "GATEHOUSE_S3_ACCESS_KEY_ID", "GATEHOUSE_S3_SECRET_ACCESS_KEY", "GATEHOUSE_S3_SECRET_ACCESS_KEY_FILE",
        "GATEHOUSE_LISTEN", "GATEHOUSE_PUBLIC_URL", "GATEHOUSE_MASTER_KEY", "GATEHOUSE_MASTER_KEY_FILE", "GATEHOUSE_ADMIN_TOKEN",
        "GATEHOUSE_ADMIN_TOKEN_FILE", "GATEHOUSE_TENANTS_DIR", "GATEHOUSE_UPLOAD_SPOOL_DIR", "GATEHOUSE_SMTP_URL",
        "GATEHOUSE_ALLOW_PRIVATE_OUTBOUND", "GATEHOUSE_TRUSTED_PROXIES", "GATEHOUSE_APPLE_URL", "GATEHOUSE_GOOGLE_JWKS_URL",
        "GATEHOUSE_FIREBASE_JWKS_URL", "GATEHOUSE_REFRESH_GRACE_SECONDS", "GATEHOUSE_OUTBOX_MAX_BACKOFF_SECONDS", "GATEHOUSE_OUTBOX_CONCURRENCY",
        "GATEHOUSE_EVENT_RETENTION_DAYS", "GATEHOUSE_HTTP_THREADS", "GATEHOUSE_DB_POOL_SIZE", "GATEHOUSE_CONNECTION_LIMIT",
        "GATEHOUSE_PER_IP_CONNECTION_LIMIT", "GATEHOUSE_CONNECTION_TIMEOUT_SECONDS", "GATEHOUSE_HEADER_TIMEOUT_SECONDS",
        "GATEHOUSE_ARGON2_MEMORY_KIB", "GATEHOUSE_ARGON2_ITERATIONS", "GATEHOUSE_ARGON2_PARALLELISM", "GATEHOUSE_HASH_CONCURRENCY",
        "GATEHOUSE_PROVIDER_THREADS", "GATEHOUSE_ACCESS_LOG", "GATEHOUSE_LOG_LEVEL", "GATEHOUSE_DB_STATEMENT_TIMEOUT_MS",
        "GATEHOUSE_DB_CONNECT_TIMEOUT_SECONDS", "GATEHOUSE_MAINTENANCE_INTERVAL_SECONDS",
        "GATEHOUSE_OUTBOX_PER_APP_IN_FLIGHT", "GATEHOUSE_SMTP_FROM", "GATEHOUSE_MAX_MAIL_PER_HOUR",
        "GATEHOUSE_PHOTO_CONCURRENCY", "GATEHOUSE_MAX_UPLOADS_PER_HOUR_PER_USER", "GATEHOUSE_MAX_FILES_PER_USER", "GATEHOUSE_MAX_BYTES_PER_USER",
    ]

    /// The platform mailer's sender address: `GATEHOUSE_SMTP_FROM`, else `no-reply@` the public
    /// URL's host (`localhost` for an IP address, which makes no mail domain).
    public var platformSenderAddress: String {
        if let smtpFrom { return smtpFrom }
        let host = URLComponents(string: publicURL)?.host ?? ""
        let isName = !host.isEmpty && IPRange(host) == nil && !host.contains(":") && host.contains(where: \.isLetter)
        return "no-reply@" + (isName ? host : "localhost")
    }

    /// What the server warns about when it starts: settings that are for development only and
    /// must not be left on by mistake. (Never a value that could be a secret.)
    public var startWarnings: [String] {
        var warnings: [String] = []
        if smtpURL == "log:" {
            warnings.append("mail is printed to the log, not sent (GATEHOUSE_SMTP_URL=log:): for development only; every code is in the log")
        }
        if allowPrivateOutbound {
            warnings.append(
                "GATEHOUSE_ALLOW_PRIVATE_OUTBOUND=true: tenants' webhooks and SMTP servers may reach loopback, private and metadata addresses; for development only")
        }
        if outboxPerAppInFlight >= outboxConcurrency {
            warnings.append(
                "GATEHOUSE_OUTBOX_PER_APP_IN_FLIGHT (\(outboxPerAppInFlight)) is not below GATEHOUSE_OUTBOX_CONCURRENCY (\(outboxConcurrency)): one app's stalled destinations can hold every outbox lane of a kind")
        }
        return warnings
    }

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

    static func parseListen(_ text: String) -> (String, UInt16)? {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            // An IPv6 address goes in brackets: `::1:8080` could be read two ways.
            guard let colon = text.lastIndex(of: ":"), !text[..<colon].contains(":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        // Port 0 would bind a port nobody knows (and a public URL that says 0).
        guard !host.isEmpty, let port = UInt16(portText), port > 0, IPRange(String(host)) != nil || host == "localhost" else { return nil }
        return (host == "localhost" ? "127.0.0.1" : String(host), port)
    }
}

/// Every configuration problem found at start.
/// Why `GATEHOUSE_S3_ENDPOINT` is not usable, or nil: `https://host[:port]`, or `http://` to a
/// loopback host (a local test server); no path, query, user or password.
func s3EndpointProblem(_ endpoint: String) -> String? {
    let message = "GATEHOUSE_S3_ENDPOINT must be https://host[:port] (or http:// to 127.0.0.1, [::1] or localhost), without a path."
    guard let parsed = URLComponents(string: endpoint), let scheme = parsed.scheme?.lowercased(), let host = parsed.host, !host.isEmpty,
        parsed.path.isEmpty || parsed.path == "/", parsed.query == nil, parsed.fragment == nil, parsed.user == nil, parsed.password == nil
    else { return message }
    switch scheme {
    case "https": return nil
    case "http":
        let loopback = host == "localhost" || host == "::1" || host == "[::1]" || host.hasPrefix("127.")
        return loopback ? nil : "GATEHOUSE_S3_ENDPOINT: http:// is allowed only to a loopback address; use https://."
    default: return message
    }
}

/// A bare ASCII mail address: one `@`, both sides non-empty, no space, control character or
/// the characters that delimit addresses.
func isMailAddress(_ text: String) -> Bool {
    let bytes = Array(text.utf8)
    let specials = Set("<>()[],;:\\\"".utf8)
    guard bytes.count <= 254, bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F && !specials.contains($0) }) else { return false }
    let parts = text.split(separator: "@", omittingEmptySubsequences: false)
    return parts.count == 2 && !parts[0].isEmpty && !parts[1].isEmpty
}

/// An S3 bucket name (the DNS-compatible rules; no `/`, so it is one path segment).
func isBucketName(_ name: String) -> Bool {
    let bytes = Array(name.utf8)
    func alnum(_ b: UInt8) -> Bool { (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) }
    guard (3...63).contains(bytes.count), alnum(bytes.first!), alnum(bytes.last!) else { return false }
    return bytes.allSatisfy { alnum($0) || $0 == 0x2E || $0 == 0x2D }
}

public struct ConfigurationError: Error, CustomStringConvertible {
    public let problems: [String]
    public init(problems: [String]) { self.problems = problems }
    public var description: String { "Configuration is not valid:\n" + problems.map { "  - \($0)" }.joined(separator: "\n") }
}

/// The master key that encrypts secrets at rest: 32 bytes given as base64 (standard or URL-safe) or 64 hex digits.
public enum MasterKey {
    public static func decode(_ text: String) -> [UInt8]? {
        let t = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if t.utf8.count == 64, t.utf8.allSatisfy({ $0 < 128 && Character(Unicode.Scalar($0)).isHexDigit }) {
            var bytes: [UInt8] = []
            var index = t.startIndex
            while index < t.endIndex {
                let next = t.index(index, offsetBy: 2)
                bytes.append(UInt8(t[index..<next], radix: 16)!)
                index = next
            }
            return bytes
        }
        var b64 = t.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while b64.utf8.count % 4 != 0 { b64 += "=" }
        guard let data = Data(base64Encoded: b64), data.count == 32 else { return nil }
        return Array(data)
    }

    static func formatProblem(_ name: String) -> String {
        "\(name) must be 32 bytes as base64 or 64 hex digits (generate one with: openssl rand -base64 32)."
    }
}

extension Configuration.Database {
    /// `sqlite` or `postgres`, for logs (never the URL, which may hold a password).
    public var kind: String {
        switch self {
        case .sqlite: "sqlite"
        case .postgres: "postgres"
        }
    }
}
