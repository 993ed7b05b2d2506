import Foundation
import GatehouseAPI
import GatehouseApp
import GatehouseCore
import GatehouseTesting
import Testing

/// The `gatehouse` executable as an operator runs it.
@Suite("The gatehouse executable")
struct ExecutableTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Built next to the test bundle by `swift build --build-tests`.
    var binary: String {
        var url = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        while url.path != "/" && !FileManager.default.fileExists(atPath: url.appendingPathComponent("gatehouse").path) {
            url.deleteLastPathComponent()
        }
        return url.appendingPathComponent("gatehouse").path
    }

    func freePort() -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return UInt16(bigEndian: address.sin_port)
    }

    /// `gatehouse serve` on an embedded database in `folder` with the demo app of Tenants/, on
    /// `port`; its log goes to `output` (a Pipe or a FileHandle).
    func serveDemo(folder: String, port: UInt16, output: Any) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["serve"]
        process.environment = [
            "GATEHOUSE_DATABASE_URL": "sqlite://\(folder)/gatehouse.db", "GATEHOUSE_LISTEN": "127.0.0.1:\(port)",
            "GATEHOUSE_TENANTS_DIR": Self.root.appendingPathComponent("Tenants").path, "GATEHOUSE_ACCESS_LOG": "off",
        ]
        process.standardOutput = output
        process.standardError = output
        try process.run()
        return process
    }

    /// Whether `base` answers `/readyz` 200 within about 10 s.
    func becomesReady(_ base: String) -> Bool {
        for _ in 0..<100 {
            if (try? TestHTTPClient.send("GET", base + "/readyz", timeoutSeconds: 1))?.status == 200 { return true }
            usleep(100_000)
        }
        return false
    }

    @Test
    func servesTheDemoAppAndStopsGracefullyOnSIGTERM() throws {
        let folder = NSTemporaryDirectory() + "gatehouse-exe-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let port = freePort()
        let output = Pipe()
        let process = try serveDemo(folder: folder, port: port, output: output)
        defer { if process.isRunning { process.terminate() } }

        let base = "http://127.0.0.1:\(port)"
        #expect(becomesReady(base))
        let app = try TestHTTPClient.send("GET", base + "/v1/app", headers: [("X-App-Key", "pk_demo_gatehouse_local_only")])
        #expect(app.status == 200)
        #expect(app.data?["name"] == "Gatehouse Demo")
        // Embedded mode without a configured key generates one, readable only by its owner.
        let attributes = try FileManager.default.attributesOfItem(atPath: folder + "/master.key")
        #expect((attributes[.posixPermissions] as? Int) == 0o600)

        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        #expect(process.terminationReason == .exit)
        #expect(process.terminationStatus == 0)
        let log = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(log.contains("\"msg\":\"shutting down\""))
        #expect((try? TestHTTPClient.send("GET", base + "/healthz", timeoutSeconds: 1)) == nil)
    }

    /// libvips and the libraries only it needs are opened at the first photo (ADR 0025): a server
    /// that is sent none does not map them.
    @Test
    func loadsLibvipsAtTheFirstPhotoOnly() throws {
        let folder = NSTemporaryDirectory() + "gatehouse-exe-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let port = freePort()
        let process = try serveDemo(folder: folder, port: port, output: FileHandle.nullDevice)
        defer { if process.isRunning { process.terminate(); process.waitUntilExit() } }

        let base = "http://127.0.0.1:\(port)"
        try #require(becomesReady(base))
        // What the process has mapped; read to its end (procfs files declare no size).
        func mapsLibvips() throws -> Bool {
            let file = try #require(FileHandle(forReadingAtPath: "/proc/\(process.processIdentifier)/maps"))
            defer { try? file.close() }
            let maps = String(decoding: file.readDataToEndOfFile(), as: UTF8.self)
            try #require(maps.contains("/libcrypto.so") && maps.contains("/libmicrohttpd.so"), "the maps were read")
            return maps.contains("/libvips.so.42")
        }
        let appKey = ("X-App-Key", "pk_demo_gatehouse_local_only")
        let signUp = try TestHTTPClient.send(
            "POST", base + "/v1/auth/signup", headers: [appKey, ("Content-Type", "application/json")],
            body: Array(#"{"email":"photo@example.com","password":"a long and unguessed passphrase 7"}"#.utf8))
        try #require(signUp.status == 201)
        let token = try #require(signUp.data?["access_token"]?.stringValue)
        let bearer = ("Authorization", "Bearer \(token)")
        #expect(try TestHTTPClient.send("GET", base + "/v1/me", headers: [appKey, bearer]).status == 200)
        #expect(try !mapsLibvips(), "signed up and served without a photo: libvips is not loaded")

        let photo = TinyImages.image(width: 32, height: 24, type: "image/png")
        let uploaded = try TestHTTPClient.send(
            "POST", base + "/v1/me/photo",
            headers: [appKey, bearer, ("Content-Type", "multipart/form-data; boundary=\(FilesAPITests.boundary)")],
            body: FilesAPITests.multipart(files: [("photo", "me.png", photo)]))
        #expect(uploaded.status == 200)
        #expect(uploaded.data?["photo_url"]?.stringValue != nil)
        #expect(try mapsLibvips(), "the first photo loaded libvips")
    }

    @Test
    func badConfigurationIsReportedAllAtOnceAndExits1() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.environment = ["GATEHOUSE_LISTEN": "nowhere", "GATEHOUSE_ADMIN_TOKEN": "short", "GATEHOUSE_DATABASE_URL": "mysql://x"]
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = Pipe()
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 1)
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(text.contains("GATEHOUSE_LISTEN") && text.contains("GATEHOUSE_ADMIN_TOKEN") && text.contains("GATEHOUSE_DATABASE_URL"))
    }

    @Test
    func embeddedModeKeepsItsFilesPrivateAndNeverReplacesALostKey() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-embedded-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var configuration = Configuration()
        configuration.database = .sqlite(path: folder + "/gatehouse.db")
        let previous = umask(0o022)
        defer { umask(previous) }
        try Gatehouse.open(configuration: configuration, log: Log(enabled: false)).close()
        func mode(_ path: String) throws -> Int { try #require(FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) }
        #expect(try mode(folder) == 0o700)
        #expect(try mode(folder + "/gatehouse.db") == 0o600)
        #expect(try mode(folder + "/master.key") == 0o600)
        // The key is lost: the next start refuses, and writes no new key.
        try FileManager.default.removeItem(atPath: folder + "/master.key")
        #expect(throws: ConfigurationError.self) { try Gatehouse.open(configuration: configuration, log: Log(enabled: false)) }
        #expect(!FileManager.default.fileExists(atPath: folder + "/master.key"))
    }

    @Test
    func aDifferentMasterKeyIsRefusedAtStart() throws {
        let database = try TestDatabase.make(.sqlite)
        defer { database.drop() }
        var configuration = Configuration()
        configuration.database = database.configuration
        configuration.masterKey = Array(repeating: 1, count: 32)
        try Gatehouse.open(configuration: configuration, log: Log(enabled: false)).close()
        configuration.masterKey = Array(repeating: 2, count: 32)
        #expect(throws: MasterKeyMismatch.self) { try Gatehouse.open(configuration: configuration, log: Log(enabled: false)) }
        configuration.masterKey = Array(repeating: 1, count: 32)
        try Gatehouse.open(configuration: configuration, log: Log(enabled: false)).close()
    }
}
