import Foundation

/// The server's configuration, read from the environment (API.md, Operations). Every variable is
/// validated at start and every problem is reported at once.
public struct Configuration: Sendable {
    public enum Database: Sendable, Equatable {
        case sqlite(path: String)
        case postgres(url: String)
    }

    public var database: Database = .sqlite(path: "./data/gatehouse.db")

    /// What stands between the nodes and PostgreSQL (`GATEHOUSE_DATABASE_POOLER`).
    public enum DatabasePooler: String, Sendable, Equatable {
        /// Each pooled connection is a PostgreSQL session of its own (no pooler, or one in session mode).
        case none
        /// A pooler that lends a server connection for one transaction (PgBouncer's
        /// `pool_mode = transaction`): Gatehouse keeps no session state (ADR 0034).
        case transaction
    }

    /// `none` unless `GATEHOUSE_DATABASE_POOLER=transaction` says a transaction pooler is in front.
    public var databasePooler: DatabasePooler = .none
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
    /// The platform's maxima on what an app may set (`GATEHOUSE_MAX_MAIL_PER_HOUR` and the upload
    /// ceilings), handed to the settings' decoding, ``AppService`` and the mail flows.
    public var platformCaps = AppSettings.PlatformCaps()
    /// `GATEHOUSE_MAX_MAIL_PER_HOUR`: the highest `rate_limits.mail_per_hour` an app may set
    /// (``platformCaps``'s).
    public var maxMailPerHour: Int {
        get { Int(platformCaps.mailPerHour) }
        set { platformCaps.mailPerHour = Int64(newValue) }
    }
    public var trustedProxies: [String] = []
    /// `GATEHOUSE_ALLOW_PRIVATE_OUTBOUND`: whether connections to URLs a tenant admin sets (an
    /// app's SMTP server, its webhooks) may reach loopback, private, link-local and metadata
    /// addresses. Off in production; for local development and tests. The server's own URLs are
    /// never restricted.
    public var allowPrivateOutbound = false
    public var appleURL = "https://appleid.apple.com"
    public var googleJWKSURL = "https://www.googleapis.com/oauth2/v3/certs"
    public var firebaseJWKSURL = "https://www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com"
    /// The base URL of each provider kind with a fixed home (`GATEHOUSE_PROVIDER_URL_<KIND>`, for
    /// tests), by kind: `kakao` and `line` serve their discovery document at
    /// `<base>/.well-known/openid-configuration`, `microsoft` at
    /// `<base>/<tenant>/v2.0/.well-known/openid-configuration`; `naver` is the profile API's
    /// (`/v1/nid/me`), `github` the REST API's (`/user`, `/user/emails`,
    /// `/applications/{client_id}/token`). An `oidc` provider's is its issuer.
    public var providerURLs: [String: String] = Configuration.defaultProviderURLs
    public static let defaultProviderURLs: [String: String] = [
        "kakao": "https://kauth.kakao.com", "line": "https://access.line.me", "microsoft": "https://login.microsoftonline.com",
        "naver": "https://openapi.naver.com", "github": "https://api.github.com",
        // The web flow's authorization servers of the two kinds whose API is elsewhere.
        "naver_auth": "https://nid.naver.com", "github_auth": "https://github.com",
    ]
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
    /// `GATEHOUSE_CONSOLE`: `on` (default) serves the web console at `/console/`; `off` removes its routes.
    public var console = true
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
    /// Users per page of `GET /v1/admin/users/export` (``UserExport/pageSize``). No environment
    /// variable sets it: tests make it small to see an export cross pages.
    public var exportPageSize = 1000

    public init() {}

    /// The folder that holds the embedded database and, when generated, the master key.
    public var dataDirectory: String? {
        guard case .sqlite(let path) = database else { return nil }
        return (path as NSString).deletingLastPathComponent.isEmpty ? "." : (path as NSString).deletingLastPathComponent
    }

    public var databasePoolSizeResolved: Int { databasePoolSize ?? httpThreads }

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
}

/// Every configuration problem found at start.
public struct ConfigurationError: Error, CustomStringConvertible {
    public let problems: [String]
    public init(problems: [String]) { self.problems = problems }
    public var description: String { "Configuration is not valid:\n" + problems.map { "  - \($0)" }.joined(separator: "\n") }
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
