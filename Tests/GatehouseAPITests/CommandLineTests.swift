import Foundation
import GatehouseAPI
import GatehouseApp
import GatehouseCore
import GatehouseTesting
import Synchronization
import Testing

/// The commands an operator runs beside the server: usage errors that say what was wrong, help
/// per command, `--version`, `apps list` and `backup`.
extension ExecutableTests {
    struct Run {
        let status: Int32
        let output: String
        let errors: String
    }

    /// Runs the executable to its end (its output is small).
    func gatehouse(_ arguments: [String], environment: [String: String] = [:], in directory: String? = nil) throws -> Run {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        process.environment = environment
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        let errorPath = NSTemporaryDirectory() + "gatehouse-cli-stderr-\(UUID().uuidString)"
        _ = FileManager.default.createFile(atPath: errorPath, contents: nil)
        defer { try? FileManager.default.removeItem(atPath: errorPath) }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle(forWritingAtPath: errorPath)
        try process.run()
        let out = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Run(
            status: process.terminationStatus, output: String(decoding: out, as: UTF8.self),
            errors: String(decoding: FileManager.default.contents(atPath: errorPath) ?? Data(), as: UTF8.self))
    }

    /// The environment of a new SQLite database in a new folder, created as an operator creates
    /// one (`gatehouse migrate`; the other commands refuse to create it).
    func newDatabase() throws -> (folder: String, environment: [String: String]) {
        let folder = NSTemporaryDirectory() + "gatehouse-cli-\(UUID().uuidString)"
        let environment = ["GATEHOUSE_DATABASE_URL": "sqlite://\(folder)/gatehouse.db"]
        let migrated = try gatehouse(["migrate"], environment: environment)
        #expect(migrated.status == 0, "\(migrated.errors)")
        return (folder, environment)
    }

    @Test
    func usageErrorsSayWhatWasWrongAndExit2() throws {
        let cases: [([String], String)] = [
            (["frobnicate"], "unknown command 'frobnicate'"),
            (["apps"], "apps needs a subcommand: list, apply, create, secret-key, disable, enable"),
            (["apps", "crate"], "apps has no subcommand 'crate'"),
            (["apps", "create"], "apps create needs --name NAME or --settings FILE"),
            (["apps", "create", "--name", "A", "--settings", "f.json"], "apps create takes --name or --settings, not both"),
            (["apps", "create", "--nmae", "A"], "apps create has no option --nmae"),
            (["keys", "rotate", "--app"], "--app needs a value"),
            (["keys", "rotate", "--app", "a", "--app", "b"], "--app is given twice"),
            (["apps", "list", "extra"], "unexpected argument 'extra' after apps list"),
            (["backup"], "backup needs FILE"),
            (["--version", "now"], "--version takes no argument"),
            (["outbox"], "outbox needs a subcommand: list, retry"),
            (["outbox", "list"], "outbox list needs --state dead"),
            (["outbox", "list", "--state", "queued"], "outbox list lists dead items only: --state dead"),
            (["outbox", "retry"], "outbox retry needs ID"),
            (["users", "import", "users.ndjson"], "users import needs --app APP"),
            (["users", "import", "--app", "a"], "users import needs FILE --app APP"),
        ]
        for (arguments, message) in cases {
            let run = try gatehouse(arguments)
            #expect(run.status == 2, "\(arguments)")
            #expect(run.errors.contains("gatehouse: \(message)"), "\(arguments): \(run.errors)")
            #expect(run.output.isEmpty, "\(arguments)")
        }
        // A command's usage error shows that command's shape.
        #expect(try gatehouse(["keys", "rotate"]).errors.contains("Usage: gatehouse keys rotate --app APP [--revoke-previous]"))
    }

    @Test
    func everyCommandHasItsOwnHelpAndTheVersionIsPrinted() throws {
        let overview = try gatehouse(["--help"])
        #expect(overview.status == 0)
        for command in ["serve", "migrate", "backup FILE", "apps list", "apps apply DIR", "apps create", "apps secret-key", "apps disable APP", "apps enable APP", "keys rotate", "outbox list", "outbox retry ID", "users import FILE"] {
            #expect(overview.output.contains("gatehouse \(command)"), "\(command)")
            let words = command.split(separator: " ").map(String.init).filter { $0 == $0.lowercased() }
            let help = try gatehouse(["help"] + words)
            #expect(help.status == 0, "\(command)")
            #expect(help.output.hasPrefix("Usage: gatehouse \(words.joined(separator: " "))"), "\(command): \(help.output)")
            // `COMMAND --help` prints the same, without running the command (no database opened).
            #expect(try gatehouse(words + ["--help"]).output == help.output, "\(command)")
        }
        #expect(try gatehouse(["help", "nothing"]).status == 2)
        // A group's help lists its commands: every group the overview names (`help apps` among them).
        let listed = overview.output.split(separator: "\n").compactMap { line -> [String]? in
            let words = line.split(separator: " ").map(String.init)
            guard words.first == "gatehouse", words.count > 1 else { return nil }
            // The command's words: lowercase names, up to its first argument or option.
            return Array(words.dropFirst().prefix { $0.first?.isLetter == true && $0.allSatisfy { ("a"..."z").contains($0) || $0 == "-" } })
        }
        let groups = Set(listed.filter { $0.count > 1 }.map { $0[0] })
        #expect(groups == ["apps", "keys", "users", "outbox"], "\(groups.sorted())")
        for group in groups {
            let help = try gatehouse(["help", group])
            #expect(help.status == 0, "help \(group): \(help.errors)")
            for words in listed where words.first == group {
                #expect(help.output.contains("gatehouse \(words.joined(separator: " "))"), "help \(group) lacks \(words)")
            }
            #expect(try gatehouse([group, "--help"]).output == help.output, "\(group) --help")
        }
        let group = try gatehouse(["help", "outbox"])
        #expect(group.status == 0 && group.output.contains("gatehouse outbox list --state dead") && group.output.contains("gatehouse outbox retry ID"), "\(group.output)")
        // `help` and `--version` are commands of the overview too.
        #expect(try gatehouse(["help", "help"]).output == overview.output)
        let versionHelp = try gatehouse(["help", "--version"])
        #expect(versionHelp.status == 0 && versionHelp.output.hasPrefix("Usage: gatehouse --version"), "\(versionHelp.errors)")
        let version = try gatehouse(["--version"])
        #expect(version.status == 0)
        #expect(version.output == "gatehouse \(Gatehouse.version)\n")
    }

    /// Run from a folder that is not the server's, with no GATEHOUSE_DATABASE_URL, a command
    /// names ./data/gatehouse.db there: it refuses (exit 1, saying where it looked and what to
    /// do) and creates neither a database nor a master key. `migrate` creates them, and says so.
    @Test
    func aCommandRunElsewhereRefusesToCreateADatabase() throws {
        let folder = NSTemporaryDirectory() + "gatehouse-cli-elsewhere-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let here = URL(fileURLWithPath: folder).standardizedFileURL.path
        try Data("{}\n".utf8).write(to: URL(fileURLWithPath: folder + "/users.ndjson"))
        try FileManager.default.createDirectory(atPath: folder + "/tenants", withIntermediateDirectories: true)
        let commands: [[String]] = [
            ["apps", "list"], ["apps", "create", "--name", "Shop"], ["apps", "apply", "tenants"], ["apps", "secret-key", "--app", "pk_x"],
            ["apps", "disable", "pk_x"], ["apps", "enable", "pk_x"], ["keys", "rotate", "--app", "pk_x"],
            ["users", "import", "users.ndjson", "--app", "pk_x"], ["outbox", "list", "--state", "dead"], ["outbox", "retry", "obx_x"],
            ["backup", "copy.db"],
        ]
        for command in commands {
            let run = try gatehouse(command, in: folder)
            #expect(run.status == 1, "\(command): \(run.status) \(run.errors)")
            #expect(run.output.isEmpty, "\(command)")
            #expect(run.errors.contains("gatehouse: no database at \(here)/data/gatehouse.db"), "\(command): \(run.errors)")
            #expect(run.errors.contains("GATEHOUSE_DATABASE_URL is not set") && run.errors.contains("gatehouse migrate"), "\(command): \(run.errors)")
            #expect(!FileManager.default.fileExists(atPath: folder + "/data"), "\(command) created the data folder")
            #expect(!FileManager.default.fileExists(atPath: folder + "/copy.db"), "\(command)")
        }
        // A database named explicitly is not created either.
        let named = try gatehouse(["apps", "list"], environment: ["GATEHOUSE_DATABASE_URL": "sqlite://\(folder)/other/gatehouse.db"], in: folder)
        #expect(named.status == 1 && named.errors.contains("no database at \(here)/other/gatehouse.db (from GATEHOUSE_DATABASE_URL)"), "\(named.errors)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/other"))

        let migrated = try gatehouse(["migrate"], in: folder)
        #expect(migrated.status == 0 && migrated.output == "migrations applied\n")
        #expect(migrated.errors.contains("gatehouse: created a new database at \(here)/data/gatehouse.db"), "\(migrated.errors)")
        #expect(migrated.errors.contains("generated a master key"), "\(migrated.errors)")
        #expect(FileManager.default.fileExists(atPath: folder + "/data/gatehouse.db") && FileManager.default.fileExists(atPath: folder + "/data/master.key"))
        let listed = try gatehouse(["apps", "list"], in: folder)
        #expect(listed.status == 0 && listed.output.isEmpty && listed.errors.isEmpty, "\(listed.errors)")
        let again = try gatehouse(["migrate"], in: folder)
        #expect(again.status == 0 && !again.errors.contains("created"), "\(again.errors)")
    }

    @Test
    func appsListShowsEveryAppWithoutSecrets() throws {
        let (folder, environment) = try newDatabase()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        #expect(try gatehouse(["apps", "list"], environment: environment).output.isEmpty)
        let created = try gatehouse(["apps", "create", "--name", "Shop"], environment: environment)
        #expect(created.status == 0)
        let shop = try JSON.parse(Array(created.output.utf8))
        _ = try gatehouse(["apps", "create", "--name", "Blog"], environment: environment)
        let list = try gatehouse(["apps", "list"], environment: environment)
        #expect(list.status == 0)
        let lines = try list.output.split(separator: "\n").map { try JSON.parse(Array($0.utf8)) }
        #expect(lines.map { $0["name"]?.stringValue } == ["Shop", "Blog"])
        #expect(lines[0]["app_id"] == shop["app_id"])
        #expect(lines[0]["app_key"] == shop["app_key"])
        #expect(lines[0]["source"] == "api")
        #expect(!list.output.contains(try #require(shop["secret_key"]?.stringValue)))
    }

    /// `outbox list --state dead` shows every app's dead items (or one app's), without their
    /// payload; `outbox retry ID` queues one again, once.
    @Test
    func outboxListAndRetryShowAndQueueDeadItemsWithoutSecrets() throws {
        let (folder, environment) = try newDatabase()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let shop = try #require(try JSON.parse(Array(try gatehouse(["apps", "create", "--name", "Shop"], environment: environment).output.utf8))["app_id"]?.stringValue)
        let blog = try #require(try JSON.parse(Array(try gatehouse(["apps", "create", "--name", "Blog"], environment: environment).output.utf8))["app_id"]?.stringValue)
        // A dead item of each app, as the worker leaves one: Shop's payload sealed, with a secret in it.
        let opened = try Gatehouse.open(configuration: try Configuration.fromEnvironment(environment), log: Log(enabled: false))
        var dead: [String] = []
        for (index, (app, sealed)) in [(shop, true), (blog, false)].enumerated() {
            let now = Int64(Date().timeIntervalSince1970 * 1000) + Int64(index)
            let payload = sealed ? opened.sealer.seal(#"{"token":"s3cr3t-token"}"#, app: AppID(unchecked: app), field: "cli-test") : "{}"
            let item = NewOutboxItem(appID: AppID(unchecked: app), kind: .webhook, idempotencyKey: "cli-\(app)", payload: payload, sealed: sealed)
            #expect(try opened.store.outbox.enqueue(item, now: now))
            let claimed = try #require(try opened.store.outbox.claim(kinds: [.webhook], limit: 1, leaseMillis: 60_000, node: "cli", now: now).first)
            #expect(try opened.store.outbox.markDead(claimed.id, node: "cli", error: "the endpoint refused it", now: now, event: nil))
            dead.append(claimed.id)
        }
        opened.close()
        func listed(_ extra: [String] = []) throws -> [JSON] {
            let run = try gatehouse(["outbox", "list", "--state", "dead"] + extra, environment: environment)
            #expect(run.status == 0, "\(run.errors)")
            #expect(!run.output.contains("s3cr3t") && !run.output.contains("payload\""))
            return try run.output.split(separator: "\n").map { try JSON.parse(Array($0.utf8)) }
        }
        let all = try listed()
        #expect(all.map { $0["id"]?.stringValue } == [dead[1], dead[0]], "newest first")
        #expect(all.allSatisfy { $0["retryable"] == true && $0["last_error"] == "the endpoint refused it" && $0["state"] == "dead" })
        #expect(try listed(["--app", shop]).map { $0["id"]?.stringValue } == [dead[0]])

        let retried = try gatehouse(["outbox", "retry", dead[0]], environment: environment)
        #expect(retried.status == 0, "\(retried.errors)")
        let item = try JSON.parse(Array(retried.output.utf8))
        #expect(item["id"] == .string(dead[0]) && item["state"] == "queued" && item["attempts"] == 0 && item["retried_at"] != .null)
        #expect(try listed().map { $0["id"]?.stringValue } == [dead[1]])
        let again = try gatehouse(["outbox", "retry", dead[0]], environment: environment)
        #expect(again.status == 1 && again.errors.contains("not dead"), "\(again.errors)")
        #expect(try gatehouse(["outbox", "retry", "obx_0000"], environment: environment).errors.contains("No such outbox item"))
        #expect(try gatehouse(["outbox", "list", "--state", "dead", "--app", "app_aaaaaaaaaaaaaaaaaaaaaaaa"], environment: environment).status == 1)
    }

    /// `apps disable` and `apps enable` switch a tenant (by id or app key); `apps list` says which are off.
    @Test
    func appsDisableAndEnableSwitchATenantAndTheListSaysSo() throws {
        let (folder, environment) = try newDatabase()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let shop = try JSON.parse(Array(try gatehouse(["apps", "create", "--name", "Shop"], environment: environment).output.utf8))
        _ = try gatehouse(["apps", "create", "--name", "Blog"], environment: environment)
        let id = try #require(shop["app_id"]?.stringValue)
        func listed() throws -> [JSON?] {
            try gatehouse(["apps", "list"], environment: environment).output.split(separator: "\n").map { try JSON.parse(Array($0.utf8))["disabled"] }
        }
        #expect(try listed() == [false, false])

        let disabled = try gatehouse(["apps", "disable", id], environment: environment)
        #expect(disabled.status == 0, "\(disabled.errors)")
        #expect(try JSON.parse(Array(disabled.output.utf8)) == ["app_id": .string(id), "disabled": true])
        #expect(try listed() == [true, false])
        // A disabled app's key still names it for the operator.
        let byKey = try gatehouse(["apps", "enable", try #require(shop["app_key"]?.stringValue)], environment: environment)
        #expect(try JSON.parse(Array(byKey.output.utf8)) == ["app_id": .string(id), "disabled": false])
        #expect(try listed() == [false, false])

        let unknown = try gatehouse(["apps", "disable", "app_aaaaaaaaaaaaaaaaaaaaaaaa"], environment: environment)
        #expect(unknown.status == 1 && unknown.errors.contains("no app with id or key"))
        #expect(try gatehouse(["apps", "disable"], environment: environment).status == 2)
    }

    /// `users import FILE --app APP` streams a file of any length through the import's batches:
    /// a progress line a batch on standard error, the report (with line numbers) on standard
    /// output; the same file again skips every user.
    @Test
    func usersImportStreamsTheFileInBatchesWithProgressAndAReport() throws {
        let (folder, environment) = try newDatabase()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let app = try JSON.parse(Array(try gatehouse(["apps", "create", "--name", "Shop"], environment: environment).output.utf8))
        let key = try #require(app["app_key"]?.stringValue)
        var lines = (0..<1_200).map { index in
            index % 2 == 0
                ? #"{"email": "u\#(index)@example.com", "password_hash": {"algorithm": "bcrypt", "hash": "$2b$05$CCCCCCCCCCCCCCCCCCCCC.VGOzA784oUp/Z0DY336zx7pLYAy0lwK"}}"#
                : #"{"email": "u\#(index)@example.com", "identities": [{"provider": "google", "subject": "g-\#(index)"}]}"#
        }
        lines.insert("{not json", at: 10)
        lines.insert(#"{"email": "u0@example.com"}"#, at: 700)
        lines.append(#"{"email": "last@example.com", "nickname": "x"}"#)
        let file = folder + "/users.ndjson"
        try Data(lines.joined(separator: "\n").utf8).write(to: URL(fileURLWithPath: file))
        let run = try gatehouse(["users", "import", file, "--app", key], environment: environment)
        #expect(run.status == 0, "\(run.errors)")
        let report = try JSON.parse(Array(run.output.utf8))
        #expect(report["imported"] == 1_200)
        #expect(report["skipped"] == 1)
        #expect(report["failed"] == 2)
        #expect(report["errors"]?.arrayValue?.map { $0["line"] } == [11, 1_203])
        let progress = run.errors.split(separator: "\n").filter { $0.hasPrefix("imported ") }
        #expect(progress.count == 3, "\(run.errors)")
        #expect(progress.last == "imported 1200, skipped 1, errors 2")
        let again = try gatehouse(["users", "import", file, "--app", try #require(app["app_id"]?.stringValue)], environment: environment)
        #expect(try JSON.parse(Array(again.output.utf8))["skipped"] == 1_201)
        let missing = try gatehouse(["users", "import", folder + "/nothing.ndjson", "--app", key], environment: environment)
        #expect(missing.status == 1 && missing.errors.contains("cannot read"))
    }

    /// `gatehouse backup` copies the database while the server signs users up and rotates
    /// refresh tokens; a server started on the copy signs in every user whose sign-up was
    /// answered before the backup began, and the copy is sound.
    @Test
    func aBackupTakenWhileTheServerWritesRestoresAndSignsIn() throws {
        let server = try TestServer(.sqlite)
        defer { server.stop() }
        guard case .sqlite(let livePath) = server.database.configuration else { Issue.record("not SQLite"); return }
        let app = try server.createApp(["name": "Backed up", "rate_limits": ["auth_per_minute_per_ip": 1000]])
        _ = try server.signUp(app, email: "first@example.com", password: "first password 1")
        let firstRefreshToken = try #require(try server.signUp(app, email: "refresher@example.com")["refresh_token"]?.stringValue)

        let stop = Atomic(false)
        let answered = Mutex<[String]>([])
        let failures = Mutex<[String]>([])
        let refreshes = Atomic(0)
        let done = DispatchGroup()
        done.enter()
        Thread {
            var i = 0
            while !stop.load(ordering: .relaxed) {
                let email = "writer-\(i)@example.com"
                let response = try? server.request("POST", "/v1/auth/signup", appKey: app.appKey, json: ["email": .string(email), "password": "writer password 1"])
                if response?.status == 201 { answered.withLock { $0.append(email) } } else { failures.withLock { $0.append("sign-up \(response?.status ?? -1)") } }
                i += 1
                usleep(15_000)
            }
            done.leave()
        }.start()
        done.enter()
        Thread {
            var refreshToken = firstRefreshToken
            while !stop.load(ordering: .relaxed) {
                let response = try? server.request("POST", "/v1/auth/refresh", appKey: app.appKey, json: ["refresh_token": .string(refreshToken)])
                if response?.status == 200, let next = response?.data?["refresh_token"]?.stringValue {
                    refreshToken = next
                    refreshes.add(1, ordering: .relaxed)
                } else {
                    failures.withLock { $0.append("refresh \(response?.status ?? -1)") }
                }
                usleep(5_000)
            }
            done.leave()
        }.start()
        defer {
            stop.store(true, ordering: .relaxed)
            done.wait()
        }
        let warmUp = Date().addingTimeInterval(10)
        while (answered.withLock { $0.count } < 10 || refreshes.load(ordering: .relaxed) < 20) && Date() < warmUp { usleep(10_000) }

        let folder = NSTemporaryDirectory() + "gatehouse-backup-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let before = answered.withLock { $0 }
        let refreshesBefore = refreshes.load(ordering: .relaxed)
        let backup = try gatehouse(["backup", folder + "/copy.db"], environment: ["GATEHOUSE_DATABASE_URL": "sqlite://\(livePath)"])
        #expect(backup.status == 0, "\(backup.errors)")
        #expect(backup.errors.contains("master key is not in the backup"))
        let report = try JSON.parse(Array(backup.output.utf8))
        #expect(report["backup"]?.stringValue == folder + "/copy.db")
        guard case .int(let bytes) = report["bytes"] else { Issue.record("no bytes in \(backup.output)"); return }
        #expect(bytes > 0)
        // The server kept writing through the backup and after it.
        let answeredByTheEnd = answered.withLock { $0.count }
        let after = Date().addingTimeInterval(10)
        while (answered.withLock { $0.count } < answeredByTheEnd + 3 || refreshes.load(ordering: .relaxed) < refreshesBefore + 10) && Date() < after { usleep(10_000) }
        stop.store(true, ordering: .relaxed)
        done.wait()
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
        #expect(answered.withLock { $0.count } >= answeredByTheEnd + 3)

        // One self-contained file, private, and a second backup never overwrites it.
        #expect(!FileManager.default.fileExists(atPath: folder + "/copy.db-wal"))
        #expect((try FileManager.default.attributesOfItem(atPath: folder + "/copy.db")[.posixPermissions] as? Int) == 0o600)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["copy.db"])
        let again = try gatehouse(["backup", folder + "/copy.db"], environment: ["GATEHOUSE_DATABASE_URL": "sqlite://\(livePath)"])
        #expect(again.status == 1)
        #expect(again.errors.contains("already exists"))

        // Restore: the copy put in place of a data folder's database, and a server started on it.
        let restoredFolder = folder + "/restored"
        try FileManager.default.createDirectory(atPath: restoredFolder, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: folder + "/copy.db", toPath: restoredFolder + "/gatehouse.db")
        let restored = try TestServer(.sqlite) { $0.database = .sqlite(path: restoredFolder + "/gatehouse.db") }
        defer { restored.stop() }
        #expect(try restored.request("GET", "/v1/app", appKey: app.appKey).status == 200)
        let first = try restored.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "first@example.com", "password": "first password 1"])
        #expect(first.status == 200)
        #expect(first.data?["access_token"]?.stringValue != nil)
        for email in before {
            let signIn = try restored.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": .string(email), "password": "writer password 1"])
            #expect(signIn.status == 200, "\(email) was signed up before the backup")
        }
        // Nothing from after the backup is in it: the last sign-up answered after the backup ended is unknown there.
        let last = try #require(answered.withLock { $0.last })
        let late = try restored.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": .string(last), "password": "writer password 1"])
        #expect(late.problemCode == "auth/invalid-credential")
    }

    @Test
    func backupWithPostgreSQLExplainsPgDump() throws {
        let run = try gatehouse(
            ["backup", "/tmp/never-written.db"],
            environment: ["GATEHOUSE_DATABASE_URL": "postgres://nobody@127.0.0.1:1/none", "GATEHOUSE_MASTER_KEY": String(repeating: "ab", count: 32)])
        #expect(run.status == 1)
        #expect(run.errors.contains("pg_dump --format=custom"))
        #expect(run.errors.contains("pg_restore"))
        #expect(!FileManager.default.fileExists(atPath: "/tmp/never-written.db"))
    }
}
