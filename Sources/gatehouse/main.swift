import Foundation
import GatehouseAPI
import GatehouseCore

let usage = """
    gatehouse — a multi-tenant identity server

    Usage:
      gatehouse [serve]                 start the HTTP server (the default)
      gatehouse migrate                 apply pending database migrations and exit
      gatehouse apps apply DIR          apply every Tenants-style *.json file in DIR (idempotent)
      gatehouse apps create --name NAME | --settings FILE
                                        create an app; prints its id, app key and secret key (shown once)
      gatehouse apps secret-key --app APP
                                        issue a new admin secret key (shown once; older keys work 24 h more)
      gatehouse keys rotate --app APP [--revoke-previous]
                                        rotate an app's signing key (APP is an app id or app key);
                                        --revoke-previous drops the old keys at once (a leaked key)
      gatehouse --help                  this text

    Configuration comes from the environment: GATEHOUSE_DATABASE_URL, GATEHOUSE_LISTEN,
    GATEHOUSE_PUBLIC_URL, GATEHOUSE_MASTER_KEY(_FILE), GATEHOUSE_ADMIN_TOKEN, GATEHOUSE_TENANTS_DIR, …
    (see docs/operations.md).
    """

func fail(_ message: String, code: Int32 = 1) -> Never {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    exit(code)
}

func loadConfiguration() -> Configuration {
    do { return try Configuration.fromEnvironment() } catch { fail(error.description) }
}

/// Opens the database as `serve` does, telling standard error when this created the embedded
/// master key (the server logs it; a command's standard output is its result).
func open(_ configuration: Configuration) throws -> Gatehouse {
    let keyFile = configuration.masterKey == nil ? configuration.dataDirectory.map { ($0 as NSString).appendingPathComponent("master.key") } : nil
    let hadKey = keyFile.map { FileManager.default.fileExists(atPath: $0) } ?? true
    let gatehouse = try Gatehouse.open(configuration: configuration, log: Log(enabled: false))
    if !hadKey, let keyFile, FileManager.default.fileExists(atPath: keyFile) {
        FileHandle.standardError.write(Data("gatehouse: generated a master key for embedded mode in \(keyFile); back it up.\n".utf8))
    }
    return gatehouse
}

/// Runs the server until SIGTERM or SIGINT, then stops accepting, lets requests in flight finish, and exits 0.
func serve() -> Never {
    // Block the signals in every thread (the server's threads inherit this mask) and wait for them here.
    var signals = sigset_t()
    sigemptyset(&signals)
    sigaddset(&signals, SIGTERM)
    sigaddset(&signals, SIGINT)
    pthread_sigmask(SIG_BLOCK, &signals, nil)

    let configuration = loadConfiguration()
    let gatehouse: Gatehouse
    do { gatehouse = try Gatehouse.open(configuration: configuration) } catch { fail("gatehouse: cannot start: \(error)") }
    let server = gatehouse.makeServer()
    do { try server.start() } catch { fail("gatehouse: cannot listen on \(configuration.listenHost):\(configuration.listenPort): \(error)") }
    gatehouse.startBackgroundWork()
    warnAboutUnknownVariables(gatehouse.log)
    gatehouse.log.info(
        "listening",
        ["address": .string("\(configuration.listenHost):\(server.port)"), "public_url": .string(configuration.publicURL),
         "database": .string(configuration.database.kind)])

    var received: Int32 = 0
    sigwait(&signals, &received)
    gatehouse.log.info("shutting down", ["signal": .int(Int64(received))])
    server.shutdown()
    gatehouse.stopBackgroundWork()
    gatehouse.close()
    exit(0)
}

/// One warning per `GATEHOUSE_*` variable the server does not read: a misspelt setting would
/// otherwise leave its default in force in silence. The value is never logged.
func warnAboutUnknownVariables(_ log: Log) {
    for (name, suggestion) in Configuration.unknownVariables(in: ProcessInfo.processInfo.environment) {
        var fields: [String: JSON] = ["variable": .string(name)]
        if let suggestion { fields["did_you_mean"] = .string(suggestion) }
        log.warning("unknown setting ignored", fields)
    }
}

/// Opens the database for a one-off command. `Tenants/` files are applied only by `serve` and `apps apply`.
func withGatehouse(_ body: (Gatehouse) throws -> Void) -> Never {
    var configuration = loadConfiguration()
    configuration.tenantsDirectory = nil
    do {
        let gatehouse = try open(configuration)
        defer { gatehouse.close() }
        try body(gatehouse)
    } catch let error as GatehouseError {
        fail("gatehouse: " + ([error.detail ?? error.code.rawValue] + error.fieldErrors.map { "  \($0.field): \($0.message)" }).joined(separator: "\n"))
    } catch {
        fail("gatehouse: \(error)")
    }
    exit(0)
}

func printJSON(_ json: JSON) { print(json.serializedString) }

/// An app by id (`app_…`) or by app key.
func findApp(_ target: String, in gatehouse: Gatehouse) throws -> AppContext {
    let app = try AppID(parsing: target).flatMap { try gatehouse.directory.app(id: $0) } ?? gatehouse.directory.app(key: target)
    guard let app else { fail("gatehouse: no app with id or key \(target)") }
    return app
}

// Every command has one exact shape; anything else (an unknown option, a stray argument) is
// a usage error rather than silently ignored.
let args = Array(CommandLine.arguments.dropFirst())
switch args {
case [], ["serve"]:
    serve()
case ["--help"], ["-h"], ["help"]:
    print(usage)
case ["migrate"]:
    var configuration = loadConfiguration()
    configuration.tenantsDirectory = nil
    do {
        try open(configuration).close()
        print("migrations applied")
    } catch { fail("gatehouse: \(error)") }
case _ where args.count == 3 && args[0] == "apps" && args[1] == "apply":
    var isFolder: ObjCBool = false
    guard FileManager.default.fileExists(atPath: args[2], isDirectory: &isFolder), isFolder.boolValue else {
        fail("gatehouse: \(args[2]) is not a folder")
    }
    withGatehouse { gatehouse in
        try gatehouse.apps.applyTenants(folder: args[2], environment: ProcessInfo.processInfo.environment) { print($0) }
    }
case _ where args.count == 4 && args[0] == "apps" && args[1] == "create" && ["--name", "--settings"].contains(args[2]):
    withGatehouse { gatehouse in
        let settings: JSON
        if args[2] == "--settings" {
            guard let data = FileManager.default.contents(atPath: args[3]) else { fail("gatehouse: cannot read \(args[3])") }
            guard let json = try? JSON.parse(Array(data)) else { fail("gatehouse: \(args[3]) is not valid JSON") }
            settings = json
        } else {
            settings = ["name": .string(args[3])]
        }
        let created = try gatehouse.apps.create(settings: settings)
        printJSON(["app_id": .string(created.app.id.rawValue), "app_key": .string(created.app.record.appKey), "secret_key": .string(created.secretKey)])
    }
case _ where args.count == 4 && args[0] == "apps" && args[1] == "secret-key" && args[2] == "--app":
    withGatehouse { gatehouse in
        let app = try findApp(args[3], in: gatehouse)
        printJSON(["app_id": .string(app.id.rawValue), "secret_key": .string(try gatehouse.apps.rotateSecretKey(app))])
    }
case _ where (args.count == 4 || (args.count == 5 && args[4] == "--revoke-previous")) && args[0] == "keys" && args[1] == "rotate" && args[2] == "--app":
    withGatehouse { gatehouse in
        let app = try findApp(args[3], in: gatehouse)
        let kid = try gatehouse.apps.rotateSigningKey(app, revokePrevious: args.count == 5)
        printJSON(["app_id": .string(app.id.rawValue), "kid": .string(kid)])
    }
default:
    fail(usage, code: 2)
}
