import Foundation
import GatehouseApp
import GatehouseCore

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
    for warning in configuration.startWarnings { gatehouse.log.warning(warning) }
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

/// The embedded database's file when it does not exist yet (nil with PostgreSQL, or when it does).
func missingDatabaseFile(_ configuration: Configuration) -> String? {
    guard case .sqlite(let path) = configuration.database, !FileManager.default.fileExists(atPath: path) else { return nil }
    return URL(fileURLWithPath: path).standardizedFileURL.path
}

/// A one-off command works on the server's database and never creates one: run from another
/// folder, the default `sqlite://./data/gatehouse.db` names a database that is not there, and
/// creating it, with a new master key beside it, would only hide the mistake (the command would
/// report on, or change, an empty database nobody serves). `migrate` and `serve` create it.
func refuseToCreateDatabase(_ configuration: Configuration) {
    guard let file = missingDatabaseFile(configuration) else { return }
    let source = ProcessInfo.processInfo.environment["GATEHOUSE_DATABASE_URL"] == nil
        ? "GATEHOUSE_DATABASE_URL is not set, so sqlite://./data/gatehouse.db in \(FileManager.default.currentDirectoryPath)"
        : "from GATEHOUSE_DATABASE_URL"
    fail("""
        gatehouse: no database at \(file) (\(source)).
        This command works on the server's database and creates none. Run it with the server's environment \
        (its GATEHOUSE_DATABASE_URL and master key) or from the folder the server runs in; to create a new \
        database there, run 'gatehouse migrate' first.
        """)
}

/// Opens the database for a one-off command. `Tenants/` files are applied only by `serve` and `apps apply`.
func withGatehouse(_ body: (Gatehouse) throws -> Void) -> Never {
    var configuration = loadConfiguration()
    configuration.tenantsDirectory = nil
    refuseToCreateDatabase(configuration)
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

/// An app by id or app key, disabled ones too (a disabled app's key finds no app for requests).
func findAnyApp(_ target: String, in gatehouse: Gatehouse) throws -> AppContext {
    let id = try AppID(parsing: target) ?? gatehouse.store.apps.find(appKey: target)?.id
    guard let id, let app = try gatehouse.directory.app(id: id) else { fail("gatehouse: no app with id or key \(target)") }
    return app
}

/// `apps disable` and `apps enable`: prints {"app_id", "disabled"}.
func switchApp(_ target: String, disabled: Bool) -> Never {
    withGatehouse { gatehouse in
        let app = try gatehouse.apps.setDisabled(try findAnyApp(target, in: gatehouse), disabled)
        printJSON(["app_id": .string(app.id.rawValue), "disabled": .bool(app.isDisabled)])
    }
}

// MARK: - Commands

/// One command: its words, the shape of its arguments, and its help.
struct Command {
    let words: [String]
    /// What follows the words, e.g. `--app APP [--revoke-previous]`.
    let arguments: String
    let summary: String
    let details: String
    /// Options taking a value, and flags, this command accepts.
    var valueOptions: Set<String> = []
    var flags: Set<String> = []
    /// How many positional arguments (after the options are taken out).
    var positionals: ClosedRange<Int> = 0...0
    let run: (Parsed) -> Never

    var name: String { words.joined(separator: " ") }
    var synopsis: String { "gatehouse " + name + (arguments.isEmpty ? "" : " " + arguments) }
    /// Its line in `gatehouse --help`: the summary beside the synopsis, or under a long one.
    var usageLine: String {
        synopsis.count <= 32
            ? "  " + synopsis.padding(toLength: 34, withPad: " ", startingAt: 0) + summary
            : "  " + synopsis + "\n" + String(repeating: " ", count: 36) + summary
    }
    var help: String { "Usage: \(synopsis)\n\n\(summary)\n\n\(details)" }
}

/// A command's arguments, checked against its shape.
struct Parsed {
    var values: [String: String] = [:]
    var flags: Set<String> = []
    var positionals: [String] = []
}

/// A usage error: says what was wrong, shows the command's shape, and exits 2.
func usageError(_ message: String, _ command: Command? = nil) -> Never {
    var text = "gatehouse: \(message)"
    if let command {
        text += "\nUsage: \(command.synopsis)\nRun 'gatehouse help \(command.name)' for more."
    } else {
        text += "\nRun 'gatehouse --help' for the list of commands."
    }
    fail(text, code: 2)
}

func parse(_ arguments: [String], for command: Command) -> Parsed {
    var parsed = Parsed()
    var index = 0
    while index < arguments.count {
        let argument = arguments[index]
        if command.valueOptions.contains(argument) {
            guard index + 1 < arguments.count, !arguments[index + 1].hasPrefix("--") else { usageError("\(argument) needs a value", command) }
            guard parsed.values[argument] == nil else { usageError("\(argument) is given twice", command) }
            parsed.values[argument] = arguments[index + 1]
            index += 2
        } else if command.flags.contains(argument) {
            guard !parsed.flags.contains(argument) else { usageError("\(argument) is given twice", command) }
            parsed.flags.insert(argument)
            index += 1
        } else if argument.hasPrefix("-") {
            usageError("\(command.name) has no option \(argument)", command)
        } else {
            parsed.positionals.append(argument)
            index += 1
        }
    }
    if !command.positionals.contains(parsed.positionals.count) {
        if parsed.positionals.count > command.positionals.upperBound {
            let extra = parsed.positionals.dropFirst(command.positionals.upperBound).map { "'\($0)'" }.joined(separator: " ")
            usageError("unexpected argument \(extra) after \(command.name)", command)
        }
        usageError("\(command.name) needs \(command.arguments)", command)
    }
    return parsed
}

let commands: [Command] = [
    Command(
        words: ["serve"], arguments: "", summary: "Start the HTTP server (the default when no command is given).",
        details: """
            Reads the environment (docs/operations.md, "Configuration"), opens and migrates the database,
            applies the Tenants folder, and serves until SIGTERM or SIGINT, then drains and exits 0.
            """
    ) { _ in serve() },
    Command(
        words: ["migrate"], arguments: "", summary: "Apply pending database migrations and exit.",
        details: """
            Every other command applies them too; this one does nothing else. With SQLite it creates
            the database (and, with no master key configured, master.key beside it) when there is
            none, and says so on standard error: the other commands refuse to.
            """
    ) { _ in
        var configuration = loadConfiguration()
        configuration.tenantsDirectory = nil
        let creating = missingDatabaseFile(configuration)
        do {
            try open(configuration).close()
            if let creating { FileHandle.standardError.write(Data("gatehouse: created a new database at \(creating).\n".utf8)) }
            print("migrations applied")
        } catch { fail("gatehouse: \(error)") }
        exit(0)
    },
    Command(
        words: ["backup"], arguments: "FILE", summary: "Copy the SQLite database to FILE, consistently, while the server runs.",
        details: """
            Uses SQLite's online backup API: the copy is the database as of one commit, taken without
            stopping the server (writes go on meanwhile). FILE must not exist; it is written beside its
            name first, checked (PRAGMA integrity_check), flushed, then named, with mode 0600. Prints
            {"backup": FILE, "bytes": N}. Neither migrates nor changes the database.

            The master key is not in the backup: keep it (master.key in the data folder, or
            GATEHOUSE_MASTER_KEY) apart from it. Files in a filesystem or S3 blob store are not in it either.
            To restore: stop the server, put FILE in place of the database file (removing its -wal and
            -shm), start the server.

            With PostgreSQL this command explains how to use pg_dump instead, and exits 1.
            """, positionals: 1...1
    ) { parsed in
        let configuration = loadConfiguration()
        refuseToCreateDatabase(configuration)
        do {
            let copy = try Gatehouse.backup(configuration, to: parsed.positionals[0])
            printJSON(["backup": .string(copy.path), "bytes": .int(copy.bytes)])
            var notes = ["gatehouse: the master key is not in the backup; keep \(configuration.masterKey == nil ? "master.key of the data folder" : "GATEHOUSE_MASTER_KEY") apart from it."]
            if configuration.blobStorage != .database { notes.append("gatehouse: file contents live outside the database (GATEHOUSE_BLOB_STORE); back them up too.") }
            FileHandle.standardError.write(Data((notes.joined(separator: "\n") + "\n").utf8))
        } catch {
            fail("gatehouse: \(error)")
        }
        exit(0)
    },
    Command(
        words: ["apps", "list"], arguments: "", summary: "List every app: one JSON line each, oldest first.",
        details: """
            Each line is {"app_id", "app_key", "name", "source", "created_at", "disabled"}; source is api
            or tenants (from a Tenants file); disabled is true for an app switched off with apps disable.
            No secret is printed.
            """
    ) { _ in
        withGatehouse { gatehouse in
            for record in try gatehouse.store.apps.all() {
                let name = try gatehouse.directory.app(id: record.id)?.settings.name
                printJSON([
                    "app_id": .string(record.id.rawValue), "app_key": .string(record.appKey), "name": name.map(JSON.string) ?? .null,
                    "source": .string(record.source), "created_at": .string(rfc3339(millis: record.createdAt)),
                    "disabled": .bool(record.disabledAt != nil),
                ])
            }
        }
    },
    Command(
        words: ["apps", "apply"], arguments: "DIR", summary: "Apply every Tenants-style *.json file in DIR (idempotent).",
        details: "Prints one line per file: created, updated or unchanged, with the app id. See docs/operations.md, \"Apps from Tenants files\".",
        positionals: 1...1
    ) { parsed in
        let folder = parsed.positionals[0]
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder), isFolder.boolValue else {
            fail("gatehouse: \(folder) is not a folder")
        }
        withGatehouse { gatehouse in
            try gatehouse.apps.applyTenants(folder: folder, environment: ProcessInfo.processInfo.environment) { print($0) }
        }
    },
    Command(
        words: ["apps", "create"], arguments: "--name NAME | --settings FILE",
        summary: "Create an app; prints its id, app key and secret key (the secret key is shown once).",
        details: """
            --name NAME creates an app with default settings; --settings FILE takes a settings object under
            the admin API's rules (secrets in clear, no _file or _env, no app_key). Prints
            {"app_id", "app_key", "secret_key"}.
            """, valueOptions: ["--name", "--settings"]
    ) { parsed in
        let command = commands.first { $0.words == ["apps", "create"] }!
        switch (parsed.values["--name"], parsed.values["--settings"]) {
        case (nil, nil): usageError("apps create needs --name NAME or --settings FILE", command)
        case (.some, .some): usageError("apps create takes --name or --settings, not both", command)
        default: break
        }
        withGatehouse { gatehouse in
            let settings: JSON
            if let file = parsed.values["--settings"] {
                guard let data = FileManager.default.contents(atPath: file) else { fail("gatehouse: cannot read \(file)") }
                guard let json = try? JSON.parse(Array(data)) else { fail("gatehouse: \(file) is not valid JSON") }
                settings = json
            } else {
                settings = ["name": .string(parsed.values["--name"]!)]
            }
            let created = try gatehouse.apps.create(settings: settings)
            printJSON(["app_id": .string(created.app.id.rawValue), "app_key": .string(created.app.record.appKey), "secret_key": .string(created.secretKey)])
        }
    },
    Command(
        words: ["apps", "secret-key"], arguments: "--app APP",
        summary: "Issue a new admin secret key for APP (an app id or app key); shown once.",
        details: "Older secret keys keep working 24 hours more. Prints {\"app_id\", \"secret_key\"}.", valueOptions: ["--app"]
    ) { parsed in
        guard let target = parsed.values["--app"] else { usageError("apps secret-key needs --app APP", commands.first { $0.words == ["apps", "secret-key"] }) }
        withGatehouse { gatehouse in
            let app = try findApp(target, in: gatehouse)
            printJSON(["app_id": .string(app.id.rawValue), "secret_key": .string(try gatehouse.apps.rotateSecretKey(app))])
        }
    },
    Command(
        words: ["apps", "disable"], arguments: "APP", summary: "Switch an app off (APP is an app id or app key); nothing is deleted.",
        details: """
            Its app key and secret keys are refused, its tokens too, its JWKS and discovery metadata
            answer 404 and its outbox items wait, on every node within 5 seconds; apps enable undoes it.
            A Tenants file applied later does not enable it. Prints {"app_id", "disabled"}.
            """, positionals: 1...1
    ) { parsed in switchApp(parsed.positionals[0], disabled: true) },
    Command(
        words: ["apps", "enable"], arguments: "APP", summary: "Switch a disabled app on again (APP is an app id or app key).",
        details: "Everything the app had works again, and its waiting outbox items are sent. Prints {\"app_id\", \"disabled\"}.",
        positionals: 1...1
    ) { parsed in switchApp(parsed.positionals[0], disabled: false) },
    Command(
        words: ["keys", "rotate"], arguments: "--app APP [--revoke-previous]",
        summary: "Rotate an app's signing key (APP is an app id or app key); at most once a minute.",
        details: """
            The new key is published at once and signs from now on; the old ones stay published until
            their tokens expire. --revoke-previous drops the old keys at once (a leaked key): tokens
            they signed stop verifying. Prints {"app_id", "kid"}.
            """, valueOptions: ["--app"], flags: ["--revoke-previous"]
    ) { parsed in
        guard let target = parsed.values["--app"] else { usageError("keys rotate needs --app APP", commands.first { $0.words == ["keys", "rotate"] }) }
        withGatehouse { gatehouse in
            let app = try findApp(target, in: gatehouse)
            let kid = try gatehouse.apps.rotateSigningKey(app, revokePrevious: parsed.flags.contains("--revoke-previous"))
            printJSON(["app_id": .string(app.id.rawValue), "kid": .string(kid)])
        }
    },
    Command(
        words: ["users", "import"], arguments: "FILE --app APP",
        summary: "Import users from an NDJSON file into APP (an app id or app key), as POST /v1/admin/users/import does.",
        details: """
            FILE holds one user a line, {email?, email_verified?, password_hash?, first_name?, last_name?,
            display_name?, created_at?, identities?: [{provider, subject}], app_metadata?}, checked line
            by line with the rules of the API (docs/admin.md, "Importing users"); it is read in batches
            of 500 lines, each written in one transaction, so it may be of any length (the API's limit
            of 10,000 lines a request does not apply). An email or identity the app has is skipped,
            never overwritten. Prints a progress line to standard error after each batch
            ("imported 12000, skipped 3, errors 1") and, at the end, the report on standard output:
            {"imported", "skipped", "failed", "errors": [{"line", "code", "message"}]} (the first 1,000
            errors). Exits 0 once the file has been read through, whatever its lines held.
            """, valueOptions: ["--app"], positionals: 1...1
    ) { parsed in
        guard let target = parsed.values["--app"] else { usageError("users import needs --app APP", commands.first { $0.words == ["users", "import"] }) }
        let file = parsed.positionals[0]
        guard FileManager.default.isReadableFile(atPath: file) else { fail("gatehouse: cannot read \(file)") }
        withGatehouse { gatehouse in
            let app = try findApp(target, in: gatehouse)
            let report = try gatehouse.userImport.run(app: app, path: file, source: .cli) { report in
                FileHandle.standardError.write(Data("imported \(report.imported), skipped \(report.skipped), errors \(report.failed)\n".utf8))
            }
            printJSON(report.json)
        }
    },
    Command(
        words: ["outbox", "list"], arguments: "--state dead [--app APP]",
        summary: "List dead outbox items, newest first: one JSON line each (no payload, no secret).",
        details: """
            --state dead is required (dead items are the only ones listed). --app APP (an app id or app
            key) lists one app's only; every app's otherwise. Each line is {"id", "kind", "app_id",
            "state", "attempts", "last_error", "destination", "created_at", "dead_at", "retried_at",
            "retryable", "payload_kept_until"}: a dead item keeps its sealed payload 30 days
            (retryable true), then the maintenance job erases it. See docs/admin.md, "Dead outbox items".
            """, valueOptions: ["--state", "--app"]
    ) { parsed in
        let command = commands.first { $0.words == ["outbox", "list"] }!
        guard let state = parsed.values["--state"] else { usageError("outbox list needs --state dead", command) }
        guard state == "dead" else { usageError("outbox list lists dead items only: --state dead", command) }
        withGatehouse { gatehouse in
            let only = try parsed.values["--app"].map { try findAnyApp($0, in: gatehouse).id }
            let letters = DeadLetters(store: gatehouse.store, units: gatehouse.units, clock: SystemClock())
            var after: DeadLetterPosition?
            repeat {
                let (items, next) = try letters.list(.platform, only: only, after: after, limit: 100)
                for item in items { printJSON(item.adminJSON) }
                after = next
            } while after != nil
        }
    },
    Command(
        words: ["outbox", "retry"], arguments: "ID",
        summary: "Queue a dead outbox item (obx_…) again, once its cause is fixed.",
        details: """
            The item is due at once, its attempts counted from 0 and its give-up window (72 hours, 30
            days for an Apple revocation) from now; outbox.retried is recorded in its app's audit log.
            Prints the item as outbox list shows it. An item that is not dead, or whose payload was
            erased (30 days after it died), is refused (exit 1) with the reason.
            """, positionals: 1...1
    ) { parsed in
        withGatehouse { gatehouse in
            let letters = DeadLetters(store: gatehouse.store, units: gatehouse.units, clock: SystemClock())
            printJSON(try letters.retry(.platform, id: parsed.positionals[0]).adminJSON)
        }
    },
]

/// The help of a group of commands (`gatehouse help outbox`): its commands' lines.
@MainActor func groupHelp(_ group: String) -> String? {
    let members = commands.filter { $0.words.count > 1 && $0.words[0] == group }
    guard !members.isEmpty else { return nil }
    return "Usage: gatehouse \(group) \(members.map { $0.words[1] }.joined(separator: "|")) …\n\n"
        + members.map(\.usageLine).joined(separator: "\n") + "\n\nRun 'gatehouse help \(group) COMMAND' for a command's help."
}

let usage = """
    gatehouse \(Gatehouse.version) — a multi-tenant identity server

    Usage:
    \(commands.map(\.usageLine).joined(separator: "\n"))
      gatehouse help [COMMAND]          this text, or a command's help (also: COMMAND --help)
      gatehouse --version               print the version

    Configuration comes from the environment: GATEHOUSE_DATABASE_URL, GATEHOUSE_LISTEN,
    GATEHOUSE_PUBLIC_URL, GATEHOUSE_MASTER_KEY(_FILE), GATEHOUSE_ADMIN_TOKEN(_FILE), GATEHOUSE_TENANTS_DIR, …
    (see docs/operations.md).
    """

/// The command whose words begin `words` (the longest such), and the words left over.
@MainActor func command(for words: [String]) -> (Command, [String])? {
    commands.filter { words.starts(with: $0.words) }.max { $0.words.count < $1.words.count }.map { ($0, Array(words.dropFirst($0.words.count))) }
}

/// Says what is wrong with words that name no command.
@MainActor func unknownCommand(_ words: [String]) -> Never {
    let groups = Set(commands.filter { $0.words.count > 1 }.map { $0.words[0] })
    if let group = words.first, groups.contains(group) {
        let subcommands = commands.filter { $0.words.first == group }.map { $0.words[1] }.joined(separator: ", ")
        if words.count == 1 { usageError("\(group) needs a subcommand: \(subcommands)") }
        usageError("\(group) has no subcommand '\(words[1])'; it has \(subcommands)")
    }
    usageError("unknown command '\(words.joined(separator: " "))'")
}

let args = Array(CommandLine.arguments.dropFirst())
switch args.first {
case nil:
    serve()
case "--version", "-V", "version":
    guard args.count == 1 else { usageError("--version takes no argument") }
    print("gatehouse \(Gatehouse.version)")
case "--help", "-h":
    guard args.count == 1 else { usageError("--help takes no argument; for a command's help: gatehouse help COMMAND") }
    print(usage)
case "help":
    let words = Array(args.dropFirst())
    if words.isEmpty || words == ["help"] {
        print(usage)
    } else if words.count == 1, ["--version", "-V", "version"].contains(words[0]) {
        print("Usage: gatehouse --version\n\nPrint the version (gatehouse \(Gatehouse.version)) and exit.")
    } else if let (command, rest) = command(for: words), rest.isEmpty {
        print(command.help)
    } else if words.count == 1, let help = groupHelp(words[0]) {
        print(help)
    } else {
        unknownCommand(words)
    }
default:
    if args.count == 2, ["--help", "-h"].contains(args[1]), let help = groupHelp(args[0]) {
        print(help)
        exit(0)
    }
    guard let (command, rest) = command(for: args) else { unknownCommand(args) }
    if rest.contains("--help") || rest.contains("-h") {
        print(command.help)
        exit(0)
    }
    command.run(parse(rest, for: command))
}
