import Foundation
import GatehouseAPI
import GatehouseApp
import GatehouseCore
import GatehouseHTTP

/// Gatehouse running in-process on an ephemeral loopback port, on a fresh database, exactly as the
/// executable composes it.
public final class TestServer: @unchecked Sendable {  // immutable after init; HTTPServer and Gatehouse are thread-safe
    public static let adminToken = "test-platform-token-0123456789abcdef"
    public static let publicURL = "http://gatehouse.test"

    public let gatehouse: Gatehouse
    public let server: HTTPServer
    public let database: TestDatabase
    public let baseURL: String
    public let clock: any Clock
    private let ownsDatabase: Bool

    /// Starts a server. `configure` may change the configuration before it opens; `environment`
    /// is what `Tenants/` files read `_env` secrets from; `extraRoutes` adds test-only operations;
    /// `log` receives the server's lines (none are written by default).
    public convenience init(
        _ kind: TestDatabaseKind, clock: any Clock = SystemClock(), environment: [String: String] = [:], log: Log? = nil,
        configure: (inout Configuration) -> Void = { _ in }, extraRoutes: (inout Routes) -> Void = { _ in }
    ) throws {
        try self.init(
            database: try TestDatabase.make(kind), owningIt: true, clock: clock, environment: environment, log: log, configure: configure,
            extraRoutes: extraRoutes)
    }

    /// Starts a server on `database`, which it drops when it stops.
    public convenience init(database: TestDatabase, clock: any Clock = SystemClock(), configure: (inout Configuration) -> Void = { _ in }) throws {
        try self.init(database: database, owningIt: true, clock: clock, environment: [:], log: nil, configure: configure)
    }

    /// Starts another node on the database of `first`, as a second process of the same deployment
    /// would be; stopping it leaves the database to `first`.
    public convenience init(anotherNodeOf first: TestServer, clock: any Clock = SystemClock(), configure: (inout Configuration) -> Void = { _ in }) throws {
        try self.init(database: first.database, owningIt: false, clock: clock, environment: [:], log: nil, configure: configure)
    }

    private init(
        database: TestDatabase, owningIt: Bool, clock: any Clock, environment: [String: String], log: Log?, configure: (inout Configuration) -> Void,
        extraRoutes: (inout Routes) -> Void = { _ in }
    ) throws {
        self.database = database
        ownsDatabase = owningIt
        var configuration = Configuration.forTests(on: database)
        configure(&configuration)
        self.clock = clock
        do {
            gatehouse = try Gatehouse.open(configuration: configuration, clock: clock, environment: environment, log: log ?? Log(enabled: false))
            server = gatehouse.makeServer(host: "127.0.0.1", port: 0, extraRoutes: extraRoutes)
            try server.start()
            gatehouse.startBackgroundWork()
        } catch {
            if owningIt { database.drop() }
            throw error
        }
        baseURL = "http://127.0.0.1:\(server.port)"
    }

    public func stop() {
        server.shutdown()
        gatehouse.stopBackgroundWork()
        gatehouse.close()
        if ownsDatabase { database.drop() }
    }

    /// Sends a request; `json` is serialised as the body with `Content-Type: application/json`.
    public func request(
        _ method: String, _ path: String, appKey: String? = nil, bearer: String? = nil, headers: [(String, String)] = [],
        json: JSON? = nil, body: [UInt8]? = nil
    ) throws -> TestResponse {
        var all = headers
        if let appKey { all.append(("X-App-Key", appKey)) }
        if let bearer { all.append(("Authorization", "Bearer \(bearer)")) }
        var payload = body
        if let json {
            payload = json.serialized()
            if !all.contains(where: { $0.0.lowercased() == "content-type" }) { all.append(("Content-Type", "application/json")) }
        }
        return try TestHTTPClient.send(method, baseURL + path, headers: all, body: payload)
    }

    /// An app made through the admin API with the platform token.
    public struct CreatedApp: Sendable {
        public let id: String
        public let appKey: String
        public let secretKey: String
        public let response: TestResponse
    }

    /// Signs up a user and returns the session response's `data`.
    public func signUp(_ app: CreatedApp, email: String = "ada@example.com", password: String = "correct horse battery") throws -> JSON {
        let response = try request("POST", "/v1/auth/signup", appKey: app.appKey, json: ["email": .string(email), "password": .string(password)])
        guard response.status == 201, let data = response.data else {
            throw TestHTTPClient.Failure(description: "sign-up answered \(response.status): \(response.text)")
        }
        return data
    }

    public func createApp(_ settings: JSON = ["name": "Test App"]) throws -> CreatedApp {
        let response = try request("POST", "/v1/admin/apps", bearer: Self.adminToken, json: settings)
        guard response.status == 201, let data = response.data, let id = data["app"]?["id"]?.stringValue,
            let appKey = data["app_key"]?.stringValue, let secretKey = data["secret_key"]?.stringValue
        else { throw TestHTTPClient.Failure(description: "creating an app answered \(response.status): \(response.text)") }
        return CreatedApp(id: id, appKey: appKey, secretKey: secretKey, response: response)
    }
}
