import Foundation
import GatehouseAPI
import GatehouseApp
import GatehouseCore
import GatehouseTesting
import Synchronization
import Testing

/// The lines a `Log` writes, parsed, for tests to read.
final class CapturedLog: Sendable {
    private let lines = Mutex<[JSON]>([])

    func log(level: LogLevel = .info) -> Log {
        Log(enabled: true, level: level) { [self] bytes in append(bytes) }
    }

    private func append(_ line: [UInt8]) {
        guard let json = try? JSON.parse(Array(line.dropLast())) else { return }
        lines.withLock { $0.append(json) }
    }

    var all: [JSON] { lines.withLock { $0 } }
    func messages(_ msg: String) -> [JSON] { all.filter { $0["msg"]?.stringValue == msg } }
    var text: String { all.map(\.serializedString).joined(separator: "\n") }
}

/// What an operator relies on to run the server: settings that cannot pass in silence, a log
/// level, and log lines that tie together what one request caused.
@Suite("Operability")
struct OperabilityTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test
    func theAdminTokenIsReadFromItsFile() throws {
        let path = NSTemporaryDirectory() + "gatehouse-admin-token-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let token = String(repeating: "t0k3n", count: 8)
        try Data((token + "\n").utf8).write(to: URL(fileURLWithPath: path))
        #expect(try Configuration.fromEnvironment(["GATEHOUSE_ADMIN_TOKEN_FILE": path]).adminToken == token)

        func problems(_ environment: [String: String]) -> [String] {
            do {
                _ = try Configuration.fromEnvironment(environment)
                return []
            } catch { return error.problems }
        }
        #expect(problems(["GATEHOUSE_ADMIN_TOKEN_FILE": path, "GATEHOUSE_ADMIN_TOKEN": token]).contains { $0.contains("not both") })
        #expect(problems(["GATEHOUSE_ADMIN_TOKEN_FILE": path + ".missing"]).contains { $0.contains("cannot read") })
        try Data("short\n".utf8).write(to: URL(fileURLWithPath: path))
        let short = problems(["GATEHOUSE_ADMIN_TOKEN_FILE": path])
        #expect(short.contains { $0.contains("at least 32 characters") })
        #expect(!short.joined().contains("short"), "the file's content is not echoed")
    }

    @Test
    func unknownVariablesAreNamedWithTheSettingTheyMisspell() throws {
        let unknown = Configuration.unknownVariables(in: [
            "GATEHOUSE_LISTN": "127.0.0.1:1", "GATEHOUSE_ADMIN_TOKEN": "x", "GATEHOUSE_TEST_POSTGRES_URL": "postgres://", "PATH": "/bin",
            "GATEHOUSE_MASTERKEY_FILE": "/k", "GATEHOUSE_SOMETHING_ELSE_ENTIRELY": "1",
        ])
        #expect(unknown.map(\.name) == ["GATEHOUSE_LISTN", "GATEHOUSE_MASTERKEY_FILE", "GATEHOUSE_SOMETHING_ELSE_ENTIRELY", "GATEHOUSE_TEST_POSTGRES_URL"])
        #expect(unknown[0].suggestion == "GATEHOUSE_LISTEN")
        #expect(unknown[1].suggestion == "GATEHOUSE_MASTER_KEY_FILE")
        #expect(unknown[2].suggestion == nil)
        #expect(unknown[3].suggestion == nil)
        #expect(Configuration.unknownVariables(in: ["GATEHOUSE_LOG_LEVEL": "debug", "GATEHOUSE_ADMIN_TOKEN_FILE": "/x"]).isEmpty)
    }

    /// Every `GATEHOUSE_*` name the server's code reads is on the known list (or the server
    /// would warn about its own setting), and every one on the list is documented.
    @Test
    func everyVariableTheServerReadsIsKnownAndDocumented() throws {
        let sources = Self.root.appendingPathComponent("Sources")
        let pattern = try NSRegularExpression(pattern: #""(GATEHOUSE_[A-Z0-9_]*[A-Z0-9])""#)
        var read: Set<String> = []
        for case let url as URL in FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil)!
        where url.pathExtension == "swift" && !url.path.contains("/GatehouseTesting/") {
            let text = try String(contentsOf: url, encoding: .utf8)
            for match in pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                read.insert(String(text[Range(match.range(at: 1), in: text)!]))
            }
        }
        #expect(read.count > 30)
        #expect(read.subtracting(Configuration.knownVariables).isEmpty, "read but not known: \(read.subtracting(Configuration.knownVariables).sorted())")
        let operations = try String(contentsOf: Self.root.appendingPathComponent("docs/operations.md"), encoding: .utf8)
        let undocumented = Configuration.knownVariables.filter { !operations.contains("`\($0)`") }
        #expect(undocumented.isEmpty, "not in docs/operations.md: \(undocumented.sorted())")
    }

    @Test
    func theAccessTokenProvidersURLsAreTheRealOnesUnlessSet() throws {
        let defaults = try Configuration.fromEnvironment([:])
        #expect(defaults.providerURLs["naver"] == "https://openapi.naver.com")
        #expect(defaults.providerURLs["github"] == "https://api.github.com")
        let set = try Configuration.fromEnvironment([
            "GATEHOUSE_PROVIDER_URL_NAVER": "http://127.0.0.1:8081/", "GATEHOUSE_PROVIDER_URL_GITHUB": "http://127.0.0.1:8082",
        ])
        #expect(set.providerURLs["naver"] == "http://127.0.0.1:8081")
        #expect(set.providerURLs["github"] == "http://127.0.0.1:8082")
        #expect {
            try Configuration.fromEnvironment(["GATEHOUSE_PROVIDER_URL_NAVER": "openapi.naver.com", "GATEHOUSE_PROVIDER_URL_GITHUB": "ftp://x"])
        } throws: { error in
            (error as? ConfigurationError)?.problems == [
                "GATEHOUSE_PROVIDER_URL_NAVER must be an absolute http(s) URL.", "GATEHOUSE_PROVIDER_URL_GITHUB must be an absolute http(s) URL.",
            ]
        }
    }

    @Test
    func theLogLevelDropsTheLinesBelowIt() throws {
        #expect(try Configuration.fromEnvironment([:]).logLevel == .info)
        #expect(try Configuration.fromEnvironment(["GATEHOUSE_LOG_LEVEL": "warn"]).logLevel == .warning)
        #expect(try Configuration.fromEnvironment(["GATEHOUSE_LOG_LEVEL": "debug"]).logLevel == .debug)
        #expect(throws: ConfigurationError.self) { try Configuration.fromEnvironment(["GATEHOUSE_LOG_LEVEL": "loud"]) }

        let captured = CapturedLog()
        let log = captured.log(level: .warning)
        log.debug("d")
        log.info("i")
        log.warning("w")
        log.error("e")
        #expect(captured.all.map { $0["msg"]?.stringValue } == ["w", "e"])
        #expect(captured.all.map { $0["level"]?.stringValue } == ["warn", "error"])
        let verbose = CapturedLog()
        verbose.log(level: .debug).debug("d", ["n": 1])
        #expect(verbose.messages("d").first?["level"] == "debug")
    }

    /// An access-log line names the app, the client's user agent and the error code; and every
    /// line the request causes carries its request id.
    @Test(arguments: TestDatabase.kinds)
    func accessLogLinesCarryTheAppTheUserAgentAndTheErrorCode(_ kind: TestDatabaseKind) throws {
        let captured = CapturedLog()
        let server = try TestServer(kind, log: captured.log()) { $0.accessLog = true }
        defer { server.stop() }
        let app = try server.createApp()
        _ = try server.signUp(app)
        let failed = try server.request(
            "POST", "/v1/auth/signin", appKey: app.appKey, headers: [("User-Agent", "ShopApp/2.1 (iOS 18)"), ("X-Request-Id", "trace-signin-1")],
            json: ["email": "ada@example.com", "password": "not the password"])
        #expect(failed.status == 400)
        let ok = try server.request("GET", "/v1/app", appKey: app.appKey, headers: [("X-Request-Id", "trace-app-1")])
        #expect(ok.status == 200)

        let lines = captured.messages("request")
        let signIn = try #require(lines.first { $0["request_id"] == "trace-signin-1" })
        #expect(signIn["app_id"]?.stringValue == app.id)
        #expect(signIn["user_agent"] == "ShopApp/2.1 (iOS 18)")
        #expect(signIn["code"] == "auth/invalid-credential")
        #expect(signIn["status"] == 400)
        let read = try #require(lines.first { $0["request_id"] == "trace-app-1" })
        #expect(read["app_id"]?.stringValue == app.id)
        #expect(read["code"] == nil)
        #expect(read["user_agent"] == nil, "the test client sends no User-Agent")
        // No password or token in any line.
        #expect(!captured.text.contains("not the password") && !captured.text.contains(TestServer.adminToken))
    }

    /// A provider that cannot be reached is logged with the id of the request that found it down.
    @Test
    func aProviderFailureIsLoggedWithTheRequestID() throws {
        let google = try FakeGoogle()
        defer { google.stop() }
        let captured = CapturedLog()
        // A port nothing listens on: the key fetch fails at once.
        let server = try TestServer(.sqlite, log: captured.log()) { $0.googleJWKSURL = "http://127.0.0.1:9/certs" }
        defer { server.stop() }
        let app = try server.createApp(["name": "Down", "google": ["client_ids": [.string(ProviderWorld.googleClient)]]])
        let token = google.mintIDToken(sub: "g-down", aud: ProviderWorld.googleClient, email: nil)
        let response = try server.request(
            "POST", "/v1/auth/oauth/google", appKey: app.appKey, headers: [("X-Request-Id", "trace-provider-9")], json: ["id_token": .string(token)])
        #expect(response.problemCode == "provider/unavailable")
        let line = try #require(captured.messages("identity provider unavailable").first)
        #expect(line["request_id"] == "trace-provider-9")
        #expect(line["app_id"]?.stringValue == app.id)
        #expect(!captured.text.contains(token))
    }
}

extension ExecutableTests {
    /// The server started from the environment reads its admin token from a file, and warns,
    /// without the value, about a variable it does not know.
    @Test
    func theServerReadsTheAdminTokenFileAndWarnsAboutUnknownVariables() throws {
        let folder = NSTemporaryDirectory() + "gatehouse-exe-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let token = "file-admin-token-" + String(repeating: "a1", count: 12)
        try Data((token + "\n").utf8).write(to: URL(fileURLWithPath: folder + "/admin.token"))
        let port = freePort()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.environment = [
            "GATEHOUSE_DATABASE_URL": "sqlite://\(folder)/gatehouse.db", "GATEHOUSE_LISTEN": "127.0.0.1:\(port)",
            "GATEHOUSE_ADMIN_TOKEN_FILE": folder + "/admin.token", "GATEHOUSE_ACCESS_LOG": "off",
            "GATEHOUSE_SMTP_PASWORD": "misspelt-secret-value", "GATEHOUSE_LOG_LEVEL": "info", "GATEHOUSE_ALLOW_PRIVATE_OUTBOUND": "true",
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        let base = "http://127.0.0.1:\(port)"
        var ready = false
        for _ in 0..<100 where !ready {
            ready = (try? TestHTTPClient.send("GET", base + "/readyz", timeoutSeconds: 1))?.status == 200
            if !ready { usleep(100_000) }
        }
        #expect(ready)
        #expect(try TestHTTPClient.send("GET", base + "/metrics", headers: [("Authorization", "Bearer \(token)")]).status == 200)
        #expect(try TestHTTPClient.send("GET", base + "/metrics", headers: [("Authorization", "Bearer wrong-\(token)")]).status == 401)
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        let log = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let warning = try #require(log.split(separator: "\n").first { $0.contains("unknown setting ignored") })
        #expect(warning.contains("\"variable\":\"GATEHOUSE_SMTP_PASWORD\""))
        #expect(warning.contains("\"level\":\"warn\""))
        #expect(!log.contains("misspelt-secret-value"))
        #expect(!log.contains(token))
        // Development settings are said out loud at start.
        let lines = log.split(separator: "\n").filter { $0.contains("\"level\":\"warn\"") }
        #expect(lines.contains { $0.contains("mail is printed to the log") })
        #expect(lines.contains { $0.contains("GATEHOUSE_ALLOW_PRIVATE_OUTBOUND=true") })
    }

    /// Behind an https address the server does not start on the log mailer it was not told to use.
    @Test
    func theServerRefusesToPrintMailBehindHTTPSUnlessToldTo() throws {
        let folder = NSTemporaryDirectory() + "gatehouse-exe-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["serve"]
        process.environment = [
            "GATEHOUSE_DATABASE_URL": "sqlite://\(folder)/gatehouse.db", "GATEHOUSE_LISTEN": "127.0.0.1:\(freePort())",
            "GATEHOUSE_PUBLIC_URL": "https://auth.example.com",
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus != 0)
        #expect(text.contains("GATEHOUSE_SMTP_URL is required when GATEHOUSE_PUBLIC_URL is https"))
    }
}
