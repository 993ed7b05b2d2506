import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import GatehouseCore
import GatehouseCrypto
import GatehouseKit
import GatehouseTesting
import Synchronization

typealias KitError = GatehouseKit.GatehouseError
typealias KitCode = GatehouseKit.ErrorCode

/// Gatehouse on an ephemeral port with the real SMTP sink and fake Apple, Google and Firebase
/// servers, all on one manual clock, and an app that allows every sign-in method; GatehouseKit
/// clients talk to it over real HTTP.
final class KitWorld: @unchecked Sendable {  // every field is immutable after init
    static let bundleID = "com.example.kit"
    static let servicesID = "com.example.kit.web"
    static let googleClient = "5678-kit.apps.googleusercontent.com"
    static let project = "kit-demo-123"
    static let redirect = "https://app.example.com/auth/callback"

    let clock: ManualClock
    let sink: SMTPSink
    let apple: FakeApple
    let google: FakeGoogle
    let firebase: FakeFirebase
    let server: TestServer
    let app: TestServer.CreatedApp

    /// `clock`: the world's, given when a fake made before it (whose URL the settings name) must
    /// date its tokens by it too.
    init(
        _ kind: TestDatabaseKind = .sqlite, clock: ManualClock = ManualClock(), settings: [String: JSON] = [:],
        configure: (inout Configuration) -> Void = { _ in }
    ) throws {
        self.clock = clock
        sink = try SMTPSink()
        apple = try FakeApple(clock: clock)
        google = try FakeGoogle(clock: clock)
        firebase = try FakeFirebase(clock: clock)
        let (appleURL, googleURL, firebaseURL, smtpURL) = (apple.baseURL, google.keysURL, firebase.keysURL, sink.url)
        server = try TestServer(kind, clock: clock) {
            $0.appleURL = appleURL
            $0.googleJWKSURL = googleURL
            $0.firebaseJWKSURL = firebaseURL
            $0.smtpURL = smtpURL
            configure(&$0)
        }
        // Mail is delivered by ``code(to:)``, step by step.
        server.gatehouse.stopBackgroundWork()
        let credentials = try apple.makeCredentials()
        var all: [String: JSON] = [
            "name": "Kit", "sign_in_methods": ["password", "email_code", "apple", "google"],
            "rate_limits": ["auth_per_minute_per_ip": 1000, "web_flow_per_minute_per_ip": 1000], "redirect_uris": [.string(Self.redirect)],
            "apple": [
                "client_ids": [.string(Self.bundleID), .string(Self.servicesID)], "services_id": .string(Self.servicesID),
                "team_id": .string(credentials.teamID), "key_id": .string(credentials.keyID), "private_key": .string(credentials.privateKeyPEM),
            ],
            "google": ["client_ids": [.string(Self.googleClient)]], "firebase": ["project_id": .string(Self.project)],
        ]
        for (key, value) in settings { all[key] = value }
        app = try server.createApp(.object(all))
    }

    func stop() {
        server.stop()
        apple.stop()
        google.stop()
        firebase.stop()
        sink.stop()
    }

    /// A client of the app, on `store`, whose clock is `now`.
    /// `connections`: how many connections its URLSession opens to the server at once.
    func client(
        store: any GatehouseKit.SessionStore = MemorySessionStore(), connections: Int? = nil, now: @escaping @Sendable () -> Date = { Date() },
        configure: (inout GatehouseClient.Configuration) -> Void = { _ in }
    ) -> GatehouseClient {
        var configuration = GatehouseClient.Configuration(baseURL: URL(string: server.baseURL)!, appKey: app.appKey, sessionStore: store)
        configuration.now = now
        configure(&configuration)
        if let connections {
            let session = URLSessionConfiguration.ephemeral
            session.httpMaximumConnectionsPerHost = connections
            configuration.urlSession = URLSession(configuration: session)
        }
        return GatehouseClient(configuration: configuration)
    }

    struct NoCode: Error, CustomStringConvertible { let description: String }

    /// Delivers the mail that is due and reads the newest code sent to `address`.
    func code(to address: String) throws -> String {
        while try server.gatehouse.outboxWorker.runOnce() > 0 {}
        guard let code = try sink.newestCode(to: address) else { throw NoCode(description: "no code mailed to \(address)") }
        return code
    }

    /// Every sample of `/metrics` (platform token), by series.
    func metrics() throws -> [String: Double] { try MetricsScrape(server).samples }

    /// `POST /v1/auth/refresh` requests the server answered, whatever their status.
    func refreshRequestsServed() throws -> Double {
        try metrics().filter { $0.key.hasPrefix("gatehouse_http_requests_total{") && $0.key.contains("route=\"/v1/auth/refresh\"") }
            .values.reduce(0, +)
    }

    /// The claims of an access token, read without checking it (the server checks it on every call).
    static func claims(_ token: String) throws -> JSON {
        try JSON.parse(JWT.parse(token).payload)
    }

    static func hashHex(_ value: String) -> String { Digest.hex(Digest.sha256(Array(value.utf8))) }

    /// A real 1×1 PNG (the server checks a photo's bytes).
    static let png = TinyImages.png()
}

/// The ``KitError`` a call throws, or nil when it succeeds or throws something else.
func kitError<T>(_ call: () async throws -> T) async -> KitError? {
    do {
        _ = try await call()
        return nil
    } catch let error as KitError {
        return error
    } catch {
        return nil
    }
}

/// A value behind a lock, shareable with tasks.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    var value: Value { mutex.withLock { $0 } }
    func set(_ value: Value) { mutex.withLock { $0 = value } }
    func update(_ change: (inout Value) -> Void) { mutex.withLock { change(&$0) } }
    func mutate<R: Sendable>(_ change: (inout Value) -> R) -> R { mutex.withLock { change(&$0) } }
}

/// Collects a client's auth events as they arrive; the stream's first, `.initialSession`, is kept
/// apart as `initial`.
final class EventLog: Sendable {
    private let events = Locked<[AuthEvent]>([])
    private let opening = Locked<AuthEvent?>(nil)
    private let task: Task<Void, Never>

    init(_ client: GatehouseClient) {
        let stream = client.authEvents()
        let events = self.events
        let opening = self.opening
        task = Task {
            var first = true
            for await event in stream {
                if first { opening.set(event); first = false } else { events.update { $0.append(event) } }
            }
        }
    }

    /// The stream's first event (after up to 10 s).
    func initial() async -> AuthEvent? {
        for _ in 0..<1000 where opening.value == nil { try? await Task.sleep(for: .milliseconds(10)) }
        return opening.value
    }

    /// The events so far, once there are at least `count` (or after 10 s, whatever came).
    func first(_ count: Int) async -> [AuthEvent] {
        for _ in 0..<1000 where events.value.count < count {
            try? await Task.sleep(for: .milliseconds(10))
        }
        return events.value
    }

    deinit { task.cancel() }
}
