import Foundation
import GatehouseAPI
import GatehouseCore
import GatehouseCrypto
import GatehouseHTTP
import GatehouseMail
import GatehouseMigrations
import GatehouseOutbound
import GatehouseProviders
import GatehouseSQL
import PostgresDriver
import SQLiteDriver

/// The whole application, composed from its configuration. The executable and the tests build
/// it the same way: `Gatehouse.open(configuration:)`, then `serve()`.
public final class Gatehouse: Sendable {
    public let configuration: Configuration
    public let database: any SQLDatabase
    public let store: SQLStore
    public let directory: AppDirectory
    public let apps: AppService
    public let accounts: AccountService
    /// Sessions, refresh-token rotation and recent login, for every sign-in method.
    public let sessions: SessionService
    public let passwords: PasswordService
    private let hasher: PasswordHasher
    private let photos: PhotoProcessor
    public let emailFlows: EmailFlowService
    public let tokens: TokenService
    /// Sessions ended on any node, refused at once by this one.
    public let revocations: RevocationList
    /// Runs every service's units of work: webhooks fanned out, sessions revoked, the outbox woken.
    public let units: UnitOfWork
    public let providerSignIn: ProviderSignInService
    /// Account deletion, its grace period and purge.
    public let deletion: AccountDeletion
    /// Apple's server-to-server notifications.
    public let appleNotifications: AppleNotifications
    /// Users' files and profile photos.
    public let files: FilesService
    /// Second factors and the second step.
    public let mfa: MFAService
    /// Passkeys (ADR 0028): registration, sign-in, reauthentication and the second step.
    public let passkeys: PasskeyService
    /// Anonymous sign-in (the upgrades are the linking services'; the expiry is ``deletion``'s).
    public let anonymous: AnonymousUsers
    /// Imports of users (ADR 0031): the admin API's and the command line's.
    public let userImport: UserImport
    /// Exports of users: the admin API's.
    public let userExport: UserExport
    /// Where file contents live (``Configuration/blobStorage``).
    public let blobs: any BlobStore
    /// Delivers the outbox while the server runs (``startBackgroundWork()``).
    public let outboxWorker: OutboxWorker
    /// Seals secrets at rest (settings, queued mail).
    public let sealer: SecretSealer
    /// Upkeep on every node: maintenance (bounded storage), the purge of deleted accounts.
    public let periodicJobs: PeriodicJobs
    /// Keep the request path's caches fresh off the request path (ADR 0022), each on a thread of
    /// its own, so that a long maintenance round never delays them and a slow query of one never
    /// delays another: the ended-sessions poll, the changed-accounts poll, and the version checks
    /// of the apps in use.
    let cacheJobs: [PeriodicJobs]
    /// Deletes what no one needs any more, in small batches (``periodicJobs`` runs it).
    public let maintenance: Maintenance
    public let metrics: Metrics
    public let log: Log
    public let clock: any Clock
    /// What the API counts, and its `GET /metrics` page.
    let requestMetrics: NodeMetrics
    let routes: Routes

    /// Opens (and migrates) the database, loads the master key, applies `Tenants/` files and
    /// builds the route table. Nothing listens yet.
    public static func open(
        configuration: Configuration, clock: any Clock = SystemClock(), environment: [String: String] = ProcessInfo.processInfo.environment,
        log: Log? = nil
    ) throws -> Gatehouse {
        let log = log ?? Log(enabled: true, level: configuration.logLevel, clock: clock)
        let database = try openDatabase(configuration)
        do {
            warnOfUnboundedStatements(database, configuration, log)
            try migrate(database)
            let masterKey = try configuration.masterKey ?? loadOrCreateEmbeddedMasterKey(configuration, database: database, log: log)
            let gatehouse = try Gatehouse(configuration: configuration, database: database, masterKey: masterKey, clock: clock, log: log)
            if let folder = configuration.tenantsDirectory {
                for line in try gatehouse.apps.applyTenants(folder: folder, environment: environment) {
                    log.info("tenants file applied", ["result": .string(line)])
                }
            }
            return gatehouse
        } catch {
            database.close()
            throw error
        }
    }

    private init(configuration: Configuration, database: any SQLDatabase, masterKey: [UInt8], clock: any Clock, log: Log) throws {
        self.configuration = configuration
        self.database = database
        self.clock = clock
        self.log = log
        let metrics = Metrics()
        self.metrics = metrics
        let accountCache = AccountCache(clock: clock, log: log)
        store = SQLStore(database: database, userChanges: accountCache)
        let sealer = try SecretSealer(masterKey: masterKey)
        self.sealer = sealer
        try sealer.verifyMatchesDatabase(store)
        directory = AppDirectory(store: store, sealer: sealer, clock: clock, caps: configuration.platformCaps)
        // The outbox and its kinds, mail and webhooks; every unit of work below wakes it after a commit that queued items.
        let mail = MailOutboxHandler(
            directory: directory, sealer: sealer, platformSMTPURL: configuration.smtpURL,
            // GATEHOUSE_SMTP_FROM, else no-reply@ the public host (checked by the configuration).
            platformSender: try (try? MailAddress(configuration.platformSenderAddress)) ?? MailAddress("no-reply@localhost"),
            allowPrivateOutbound: configuration.allowPrivateOutbound, clock: clock, log: { [log] text in log.info("mail", ["message": .string(text)]) },
            relayForwarding: AppleRelayForwarding(store: store))
        let outbound = OutboundHTTPClient(
            observer: metrics.providerCallObserver(
                appleURL: configuration.appleURL, googleKeysURL: configuration.googleJWKSURL, firebaseKeysURL: configuration.firebaseJWKSURL))
        let apple = AppleClient(baseURL: configuration.appleURL, client: outbound, clock: clock)
        let verifier = ProviderVerifier(
            jwks: JWKSCache(client: outbound, clock: clock), clock: clock, appleKeysURL: apple.keysURL,
            googleKeysURL: configuration.googleJWKSURL, firebaseKeysURL: configuration.firebaseJWKSURL)
        // Tenants' own providers: the fixed kinds (Kakao, LINE, Microsoft) through the providers'
        // client; `oidc` issuers, URLs a tenant sets, through a client under the tenant address
        // policy, with the same time and size bounds, into bounded caches.
        // A discovery document or key set is a few KiB: 64 KiB, and 20 keys a set, bound what a
        // tenant's issuer can make every node hold (1,024 URLs of each cache).
        // Calls to servers tenants chose (their own issuers, their SMTP server's test message), all
        // apps together: three quarters of the provider threads, so that two or three tenants whose
        // servers hang still leave Apple, Google and the fixed kinds a quarter.
        let tenantCalls = TenantCallBudget(limit: configuration.providerThreads * 3 / 4)
        let tenantOutbound = OutboundHTTPClient(maxResponseBytes: 64 * 1024, addressPolicy: .forTenantURLs(allowPrivate: configuration.allowPrivateOutbound))
        let oidc = OIDCVerifier(
            // Microsoft's discovery URL carries the tenant a tenant admin names: bounded too.
            checks: verifier, fixedKinds: OIDCVerifier.Source(client: outbound, clock: clock, httpsOnly: false, maxURLs: 1024),
            tenantIssuers: OIDCVerifier.Source(
                client: tenantOutbound, clock: clock, httpsOnly: !configuration.allowPrivateOutbound, maxURLs: 1024, maxKeysPerSet: 20),
            providerURLs: configuration.providerURLs,
            // Half the threads that run provider calls: an app whose issuer hangs leaves the rest to
            // the others; and the tenants' calls' budget for all apps' own issuers together.
            maxInFlightPerApp: configuration.providerThreads / 2, tenantCalls: tenantCalls)
        let providers = ProviderAdapter(verifier: verifier, apple: apple, oidc: oidc, log: log)
        let appleRevocation = AppleRevocationHandler(
            directory: directory, sealer: sealer, providers: providers, outbox: store.outbox, clock: clock,
            webCallbackURL: ProviderSignInService.callbackURL(publicURL: configuration.publicURL), appleURL: configuration.appleURL)
        // Webhooks: a client of their own, for URLs a tenant sets (10 s, the tenant address policy).
        let webhooks = WebhookOutboxHandler(
            directory: directory, sealer: sealer, transport: OutboundWebhookTransport(allowPrivate: configuration.allowPrivateOutbound), clock: clock)
        let blobs: any BlobStore = switch configuration.blobStorage {
        case .database: SQLBlobStore(database: database)
        case .filesystem(let directory): try FileSystemBlobStore(directory: directory)
        case .s3(let s3):
            try Self.checkedBucket(
                S3BlobStore(endpoint: s3.endpoint, bucket: s3.bucket, region: s3.region, accessKeyID: s3.accessKeyID, secretAccessKey: s3.secretAccessKey),
                log: log)
        }
        self.blobs = blobs
        let blobDestination: String? = if case .s3(let s3) = configuration.blobStorage { OutboxDestination.of(url: s3.endpoint) } else { nil }
        outboxWorker = OutboxWorker(
            outbox: store.outbox, handlers: [mail, appleRevocation, webhooks, BlobDeletionHandler(blobs: blobs, destination: blobDestination)], policy: OutboxRetryPolicy(maxBackoffSeconds: configuration.outboxMaxBackoffSeconds),
            clock: clock, lanes: configuration.outboxConcurrency, perAppInFlight: configuration.outboxPerAppInFlight, log: log)

        let revocations = RevocationList(store: store, clock: clock, log: log)
        try revocations.load()
        self.revocations = revocations
        // Every unit of work: the audit events an app's webhooks subscribe to queue their
        // deliveries in its transaction; after its commit, the sessions it ended are revoked on
        // this node and the outbox is woken for what it queued.
        let units = UnitOfWork(fanOut: WebhookFanOut(directory: directory, sealer: sealer), revocations: revocations, wakeOutbox: outboxWorker.wake)
        self.units = units
        apps = AppService(store: store, sealer: sealer, directory: directory, clock: clock, adminToken: configuration.adminToken, masterKey: masterKey,
            units: units, allowPrivateOutbound: configuration.allowPrivateOutbound, caps: configuration.platformCaps)
        tokens = TokenService(publicURL: configuration.publicURL, clock: clock, masterKey: masterKey, revocations: revocations)
        let hasher = try PasswordHasher(
            parameters: Argon2id.Parameters(
                memoryKiB: UInt32(configuration.argon2MemoryKiB), iterations: UInt32(configuration.argon2Iterations),
                parallelism: UInt32(configuration.argon2Parallelism)),
            permits: configuration.hashConcurrency,
            // Password routes run on the HTTP server's offload threads, two per permit (one
            // hashing, one at the database or ready): so at most as many wait as hash.
            maxQueued: configuration.hashConcurrency, sealer: sealer)
        self.hasher = hasher
        // Mail is written from the templates and sealed into the outbox in the transaction of the
        // change it belongs to; the outbox worker delivers it.
        let emailCodes = EmailCodes(
            masterKey: masterKey, composer: TemplatedMailComposer(templates: try MailTemplates.bundled(), sealer: sealer), clock: clock,
            units: units, maxMailPerHour: configuration.platformCaps.mailPerHour, metrics: metrics)
        accounts = AccountService(store: store, cache: accountCache, units: units, clock: clock)
        let bulkJobs = BulkJobs(offloadThreads: configuration.providerThreads)
        userImport = UserImport(store: store, units: units, sealer: sealer, jobs: bulkJobs, clock: clock)
        userExport = UserExport(store: store, units: units, sealer: sealer, jobs: bulkJobs, clock: clock, pageSize: configuration.exportPageSize)
        let sessions = SessionService(
            store: store, cache: accountCache, tokens: tokens, units: units, clock: clock, refreshGraceSeconds: configuration.refreshGraceSeconds,
            metrics: metrics)
        self.sessions = sessions
        let gate = SignInGate(clock: clock)
        passwords = PasswordService(
            store: store, cache: accountCache, sessions: sessions, gate: gate, units: units, hasher: hasher, clock: clock, masterKey: masterKey,
            emailCodes: emailCodes, log: log, metrics: metrics)
        emailFlows = EmailFlowService(
            store: store, sessions: sessions, gate: gate, units: units, codes: emailCodes, hasher: hasher, sealer: sealer, clock: clock, metrics: metrics,
            log: log)

        let naver = NaverClient(
            baseURL: configuration.providerURLs["naver"] ?? NaverClient.defaultBaseURL,
            loginURL: configuration.providerURLs["naver_auth"] ?? NaverClient.defaultLoginURL, client: outbound)
        let github = GitHubClient(
            baseURL: configuration.providerURLs["github"] ?? GitHubClient.defaultBaseURL,
            loginURL: configuration.providerURLs["github_auth"] ?? GitHubClient.defaultLoginURL, client: outbound)
        let providerUnavailable: AccessTokenProfileReader.UnavailableObserver = { [log] kind, why in
            log.warning("identity provider unavailable", ["provider": .string(kind.rawValue), "reason": .string(why)])
        }
        providerSignIn = ProviderSignInService(
            store: store, directory: directory, sessions: sessions, providers: providers,
            sealer: sealer, clock: clock, publicURL: configuration.publicURL, emailCodes: emailCodes, units: units, metrics: metrics, log: log,
            accessTokenProfiles: AccessTokenProfileReader(naver: naver, github: github, onUnavailable: providerUnavailable),
            webFlows: TenantWebFlow(
                oidc: oidc, naver: naver, github: github,
                onUnavailable: { [log] provider, why in
                    log.warning(
                        "identity provider unavailable",
                        ["provider": .string(provider.id), "kind": .string(provider.kind.rawValue), "reason": .string(why)])
                }))
        passkeys = PasskeyService(store: store, sessions: sessions, gate: gate, units: units, clock: clock, metrics: metrics)
        anonymous = AnonymousUsers(store: store, sessions: sessions, gate: gate, units: units, clock: clock, metrics: metrics)
        mfa = MFAService(
            store: store, sessions: sessions, units: units, gate: gate, sealer: sealer, masterKey: masterKey, clock: clock, passkeys: passkeys, metrics: metrics)
        let deletion = AccountDeletion(
            store: store, directory: directory, sessions: sessions, sealer: sealer, clock: clock, erasers: [FileEraser()], units: units,
            log: log)
        self.deletion = deletion
        appleNotifications = AppleNotifications(store: store, providers: providers, deletion: deletion, units: units, clock: clock, log: log)
        // Photo uploads run on the offload threads; as many may wait as decode.
        let photos = PhotoProcessor(threads: configuration.photoConcurrency, maxQueued: configuration.photoConcurrency)
        self.photos = photos
        files = FilesService(
            store: store, blobs: blobs, clock: clock, publicURL: configuration.publicURL, units: units, log: log, photos: photos)

        let maintenance = Maintenance(
            store: store,
            policy: MaintenancePolicy(
                intervalSeconds: configuration.maintenanceIntervalSeconds, refreshGraceSeconds: configuration.refreshGraceSeconds,
                eventRetentionDays: configuration.eventRetentionDays),
            log: log)
        self.maintenance = maintenance
        periodicJobs = PeriodicJobs(
            [
                // Expired and old rows of every kind, the audit log's retention among them; one round in the cluster at a time.
                maintenance.job,
                // Accounts whose grace period has passed, and old tombstones of deleted accounts.
                PeriodicJob(name: "account_purge", everyMillis: 60_000) { now in try deletion.purge(now: now) },
                // Anonymous accounts not seen for their app's `anonymous_ttl_days`, each app in turn.
                PeriodicJob(name: "anonymous_expiry", everyMillis: Int64(configuration.maintenanceIntervalSeconds) * 1000) { now in
                    try deletion.eraseUnseenAnonymousUsers(now: now)
                },
                // What glibc's heaps hold free goes back to the system (ADR 0020).
                PeriodicJob(name: "heap_trim", everyMillis: 10_000) { _ in HeapTrim.run(); return 0 },
            ], clock: clock, log: log)

        let store = store
        let directory = directory
        cacheJobs = [
            // Every 250 ms each thread looks; each poll runs at its own interval (1 s), the apps a
            // fifth of theirs early. Nothing to log: the polls log their own failures.
            PeriodicJobs(
                [PeriodicJob(name: "ended_sessions_poll", everyMillis: 250) { _ in revocations.pollIfDue(); return 0 }],
                clock: clock, log: log, threadName: "gatehouse-sessions"),
            PeriodicJobs(
                [PeriodicJob(name: "changed_accounts_poll", everyMillis: 250) { _ in accountCache.pollIfDue(store: store); return 0 }],
                clock: clock, log: log, threadName: "gatehouse-accounts"),
            PeriodicJobs(
                [PeriodicJob(name: "app_checks", everyMillis: 250) { now in directory.revalidateAhead(now: now); return 0 }],
                clock: clock, log: log, threadName: "gatehouse-apps"),
        ]

        let requestMetrics = NodeMetrics(registry: metrics, store: store, hasher: hasher, outbox: outboxWorker, clock: clock)
        self.requestMetrics = requestMetrics
        routes = API.routes(API.Services(
            store: store, directory: directory, apps: apps, tokens: tokens, units: units, accounts: accounts, sessions: sessions, passwords: passwords,
            emailFlows: emailFlows, providerSignIn: providerSignIn,
            deletion: deletion, appleNotifications: appleNotifications, files: files, mfa: mfa, passkeys: passkeys, anonymous: anonymous, userImport: userImport,
            userExport: userExport,
            testMail: TestMail(
                store: store,
                sender: SMTPTestSender(
                    platformSender: try (try? MailAddress(configuration.platformSenderAddress)) ?? MailAddress("no-reply@localhost"),
                    allowPrivateOutbound: configuration.allowPrivateOutbound, clock: clock),
                tenantCalls: tenantCalls, clock: clock),
            webhookTest: WebhookTest(store: store, units: units, sealer: sealer, clock: clock),
            metrics: requestMetrics, clock: clock), console: configuration.console)
    }

    /// A bucket that is missing or refuses the credentials stops the start (uploads could only
    /// fail); one that cannot be reached now is a warning (sign-ins do not need it).
    private static func checkedBucket(_ store: S3BlobStore, log: Log) throws -> S3BlobStore {
        switch store.checkBucket() {
        case .ok: break
        case .refused(let reason): throw ConfigurationError(problems: ["GATEHOUSE_S3_BUCKET: \(reason)."])
        case .unreachable(let reason): log.warning("the S3 bucket cannot be reached now; uploads fail until it can", ["reason": .string(reason)])
        }
        return store
    }

    /// Every operation of the route table, for the OpenAPI drift test.
    public var operations: [(method: String, pattern: String)] { routes.router.operations }

    /// An HTTP server for this application (not yet started).
    ///
    /// `extraRoutes` adds operations to the route table of this server only (tests use it to
    /// reach the HTTP machinery through a route of their own).
    public func makeServer(host: String? = nil, port: UInt16? = nil, extraRoutes: (inout Routes) -> Void = { _ in }) -> HTTPServer {
        var http = HTTPServer.Configuration()
        http.host = host ?? configuration.listenHost
        http.port = port ?? configuration.listenPort
        http.threadCount = configuration.httpThreads
        // Requests that hash passwords wait on their own threads, their connections suspended,
        // so a sign-in flood never holds the workers that answer refresh and /me. About a
        // second of sign-ins may queue; more are answered 503 server/busy at once.
        http.offloadThreads = 2 * configuration.hashConcurrency
        http.offloadQueueLimit = 64 * configuration.hashConcurrency
        // Provider calls (keys, Apple's token endpoint) wait on the network, up to the outbound
        // timeout, on threads of their own: a slow provider holds neither the workers nor the
        // hashing threads. Reauthentication, which may do either, runs here too.
        http.networkOffloadThreads = configuration.providerThreads
        http.networkOffloadQueueLimit = 32 * configuration.providerThreads
        http.connectionLimit = configuration.connectionLimit
        http.perIPConnectionLimit = configuration.perIPConnectionLimit
        http.connectionTimeoutSeconds = configuration.connectionTimeoutSeconds
        http.headerTimeoutSeconds = Double(configuration.headerTimeoutSeconds)
        http.jsonBodyTimeoutSeconds = configuration.jsonBodyTimeoutSeconds
        http.uploadGraceSeconds = configuration.uploadGraceSeconds
        http.uploadMinimumBytesPerSecond = configuration.uploadMinimumBytesPerSecond
        if let spool = configuration.uploadSpoolDirectory { http.uploadSpoolDirectory = spool }
        var routes = routes
        extraRoutes(&routes)
        let log = log
        var accessLog: (@Sendable ([String: JSON]) -> Void)?
        if configuration.accessLog { accessLog = { @Sendable fields in log.access(fields) } }
        let responder = API.responder(
            routes: routes, directory: directory, catalog: store.apps, clock: clock, metrics: requestMetrics, log: log, accessLog: accessLog,
            trustedProxies: configuration.trustedProxies.compactMap(IPRange.init))
        return HTTPServer(configuration: http, responder: responder)
    }

    /// Starts the work the server does besides answering requests (the outbox worker, the
    /// periodic jobs and the cache thread). The executable calls it when it serves, not for one-off commands;
    /// `stopBackgroundWork()` joins it.
    public func startBackgroundWork() {
        outboxWorker.start()
        periodicJobs.start()
        for jobs in cacheJobs { jobs.start() }
    }

    /// Stops the background work and waits for its threads.
    public func stopBackgroundWork() {
        outboxWorker.stop()
        periodicJobs.stop()
        for jobs in cacheJobs { jobs.stop() }
    }

    /// Stops the background work, ends the hash threads (after the hashes under way) and closes
    /// the database: every thread this instance started has ended when it returns. Call it after
    /// the HTTP server has shut down.
    public func close() {
        stopBackgroundWork()
        hasher.shutdown()
        photos.shutdown()
        database.close()
    }

    // MARK: - Start-up steps

    static func openDatabase(_ configuration: Configuration) throws -> any SQLDatabase {
        switch configuration.database {
        case .sqlite(let path): return try SQLiteDatabase(path: path, poolSize: configuration.databasePoolSizeResolved)
        case .postgres(let url):
            // A request waits at most 3 s for a free connection, then answers 503: when the
            // database hangs, requests do not pile up on the HTTP threads behind it.
            return try PostgresDatabase(
                url: url, poolSize: configuration.databasePoolSizeResolved, acquireTimeout: 3,
                connectTimeoutSeconds: configuration.databaseConnectTimeoutSeconds, statementTimeoutMillis: configuration.databaseStatementTimeoutMillis,
                transactionPooling: configuration.databasePooler == .transaction)
        }
    }

    /// Under transaction pooling Gatehouse bounds the statements of its transactions (`SET LOCAL`),
    /// but a statement outside one runs under the role's own `statement_timeout`: warned of at
    /// start when that is none, or longer than `GATEHOUSE_DB_STATEMENT_TIMEOUT_MS`
    /// (docs/operations.md, "Through PgBouncer").
    static func warnOfUnboundedStatements(_ database: any SQLDatabase, _ configuration: Configuration, _ log: Log) {
        guard configuration.databasePooler == .transaction, configuration.databaseStatementTimeoutMillis > 0,
            let text = try? database.query("SELECT current_setting('statement_timeout') AS timeout").first?.string("timeout")
        else { return }
        let millis = postgresDurationMillis(text)
        guard millis == nil || millis == 0 || millis! > Int64(configuration.databaseStatementTimeoutMillis) else { return }
        log.warning(
            "statements outside transactions are not bounded by GATEHOUSE_DB_STATEMENT_TIMEOUT_MS through the pooler",
            ["role_statement_timeout": .string(text), "fix": .string("ALTER ROLE <gatehouse role> SET statement_timeout = '\(configuration.databaseStatementTimeoutMillis)ms'")])
    }

    /// A PostgreSQL duration setting as `SHOW` prints it (`0`, `250ms`, `5s`, `2min`, `1h`) in
    /// milliseconds; nil for anything else.
    static func postgresDurationMillis(_ text: String) -> Int64? {
        let units: [(String, Int64)] = [("ms", 1), ("min", 60_000), ("s", 1000), ("h", 3_600_000), ("d", 86_400_000)]
        for (suffix, factor) in units where text.hasSuffix(suffix) {
            return Int64(text.dropLast(suffix.count)).map { $0 * factor }
        }
        return Int64(text)
    }

    /// Applies pending migrations; refuses a changed migration or a database newer than this build.
    @discardableResult
    public static func migrate(_ database: any SQLDatabase) throws -> [Migration] {
        let migrations = try Migrator.load(from: BundledMigrations.directory, dialect: database.dialect) {
            Digest.hex(Digest.sha256(Array($0.utf8)))
        }
        return try Migrator(database: database, migrations: migrations).migrate()
    }

    /// Embedded mode without a configured key: use `<data>/master.key`, creating it (mode 0600) on first start.
    static func loadOrCreateEmbeddedMasterKey(_ configuration: Configuration, database: any SQLDatabase, log: Log) throws -> [UInt8] {
        guard let folder = configuration.dataDirectory else {
            throw ConfigurationError(problems: ["GATEHOUSE_MASTER_KEY or GATEHOUSE_MASTER_KEY_FILE is required."])
        }
        let path = (folder as NSString).appendingPathComponent("master.key")
        if let text = try? String(contentsOfFile: path, encoding: .utf8) {
            guard let key = MasterKey.decode(text) else { throw ConfigurationError(problems: ["\(path) does not hold a valid master key."]) }
            return key
        }
        // A database already sealed with a key: a new key would only be refused (and leave a wrong key file behind).
        if try SQLStore(database: database).serverValue(SecretSealer.checkName) != nil {
            throw ConfigurationError(problems: [
                "\(path) is missing, but the database was written with a master key: put that key back, or set GATEHOUSE_MASTER_KEY."
            ])
        }
        let key = SecureRandom.bytes(32)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let created = FileManager.default.createFile(
            atPath: path, contents: Data((Base64URL.encode(key) + "\n").utf8), attributes: [.posixPermissions: 0o600])
        guard created else { throw ConfigurationError(problems: ["Cannot write the generated master key to \(path)."]) }
        log.warning(
            "generated a master key for embedded mode; back it up, or set GATEHOUSE_MASTER_KEY (secrets stored with it cannot be read without it)",
            ["path": .string(path)])
        return key
    }
}
