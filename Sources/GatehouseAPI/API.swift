import GatehouseCore
import GatehouseHTTP

/// The HTTP API over the domain's services: its route table and the responder that serves it.
/// The composition root (GatehouseApp) builds the services and hands them here; nothing of the
/// API knows a database driver or an outbound client.
public enum API {
    /// The services the handlers call.
    public struct Services: Sendable {
        public var store: any Store
        public var directory: AppDirectory
        public var apps: AppService
        public var tokens: TokenService
        public var units: UnitOfWork
        public var accounts: AccountService
        public var sessions: SessionService
        public var passwords: PasswordService
        public var emailFlows: EmailFlowService
        public var providerSignIn: ProviderSignInService
        public var deletion: AccountDeletion
        public var appleNotifications: AppleNotifications
        public var files: FilesService
        /// Second factors and the second step.
        public var mfa: MFAService
        /// Passkeys (ADR 0028).
        public var passkeys: PasskeyService
        /// Anonymous sign-in (`POST /v1/auth/anonymous`).
        public var anonymous: AnonymousUsers
        /// Imports of users (ADR 0031).
        public var userImport: UserImport
        /// Exports of users (`GET /v1/admin/users/export`).
        public var userExport: UserExport
        /// An admin's test message through the app's SMTP server (ADR 0035).
        public var testMail: TestMail
        /// An admin's test webhook delivery and the list of deliveries (ADR 0035).
        public var webhookTest: WebhookTest
        public var metrics: any RequestMetrics
        public var clock: any Clock

        public init(
            store: any Store, directory: AppDirectory, apps: AppService, tokens: TokenService, units: UnitOfWork, accounts: AccountService,
            sessions: SessionService, passwords: PasswordService, emailFlows: EmailFlowService, providerSignIn: ProviderSignInService, deletion: AccountDeletion,
            appleNotifications: AppleNotifications, files: FilesService, mfa: MFAService, passkeys: PasskeyService, anonymous: AnonymousUsers, userImport: UserImport, userExport: UserExport,
            testMail: TestMail, webhookTest: WebhookTest, metrics: any RequestMetrics, clock: any Clock
        ) {
            self.testMail = testMail
            self.webhookTest = webhookTest
            self.anonymous = anonymous
            self.mfa = mfa
            self.store = store
            self.directory = directory
            self.apps = apps
            self.tokens = tokens
            self.units = units
            self.accounts = accounts
            self.sessions = sessions
            self.passwords = passwords
            self.emailFlows = emailFlows
            self.providerSignIn = providerSignIn
            self.deletion = deletion
            self.appleNotifications = appleNotifications
            self.files = files
            self.passkeys = passkeys
            self.userImport = userImport
            self.userExport = userExport
            self.metrics = metrics
            self.clock = clock
        }
    }

    /// Every operation of the API, and the web console's files unless `console` is false
    /// (`GATEHOUSE_CONSOLE=off`).
    public static func routes(_ services: Services, console: Bool = true) -> Routes {
        let s = services
        let auth = Authenticator(directory: s.directory, apps: s.apps, tokens: s.tokens)
        var routes = Routes()
        OperationsController(auth: auth, store: s.store, metrics: s.metrics).register(&routes)
        AppController(auth: auth, directory: s.directory).register(&routes)
        AdminController(
            auth: auth, apps: s.apps, auditLog: AuditLog(store: s.store), users: AdminUsers(store: s.store, units: s.units, clock: s.clock),
            exports: s.userExport,
            deletion: s.deletion, deadLetters: DeadLetters(store: s.store, units: s.units, clock: s.clock), mfa: s.mfa, userImport: s.userImport,
            sessions: s.sessions, testMail: s.testMail, webhookTest: s.webhookTest, clock: s.clock
        ).register(&routes)
        let authController = AuthController(
            auth: auth, passwords: s.passwords, sessions: s.sessions, providers: s.providerSignIn, emailFlows: s.emailFlows, passkeys: s.passkeys, anonymous: s.anonymous,
            clock: s.clock)
        authController.register(&routes)
        EmailController(auth: auth, flows: s.emailFlows, sessions: authController).register(&routes)
        ProviderController(auth: auth, providers: s.providerSignIn, sessions: authController).register(&routes)
        MFAController(auth: auth, mfa: s.mfa, sessions: authController).register(&routes)
        MeController(
            auth: auth, accounts: s.accounts, passwords: s.passwords, sessions: s.sessions, deletion: s.deletion, files: s.files,
            accountExport: AccountExport(store: s.store, units: s.units, sessions: s.sessions, mfa: s.mfa, clock: s.clock)
        ).register(&routes)
        FilesController(auth: auth, files: s.files).register(&routes)
        PasskeyController(auth: auth, passkeys: s.passkeys, mfa: s.mfa, sessions: s.sessions, sessionResponses: authController).register(&routes)
        AppleNotificationsController(directory: s.directory, notifications: s.appleNotifications).register(&routes)
        if console { ConsoleController().register(&routes) }
        return routes
    }

    /// What the HTTP server calls for `routes`: request ids, CORS (the origins of `catalog`'s
    /// apps), limits, the one mapping of errors to problem+json, `metrics` and the access log.
    /// `accessLog` writes one access-log line; nil when `GATEHOUSE_ACCESS_LOG` is off.
    public static func responder(
        routes: Routes, directory: AppDirectory, catalog: any AppCatalog, clock: any Clock, metrics: any RequestMetrics, log: any LogSink,
        accessLog: (@Sendable ([String: JSON]) -> Void)?, trustedProxies: [IPRange]
    ) -> any HTTPResponder {
        APIResponder(
            router: routes.router, directory: directory, cors: CORSPolicy(directory: directory, catalog: catalog, clock: clock), metrics: metrics,
            log: log, accessLog: accessLog, trustedProxies: trustedProxies)
    }
}
