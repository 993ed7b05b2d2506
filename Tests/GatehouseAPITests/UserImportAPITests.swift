import Foundation
import GatehouseCrypto
import GatehouseTesting
import Testing

@testable import GatehouseCore

/// `POST /v1/admin/users/import` (API.md, "Moving users in and out"; ADR 0031): an NDJSON body
/// spooled to disk, a report per line, hashes that sign in with the original password, identities
/// that sign in with their provider at once, skips, per-line errors, the limits and the app's
/// `firebase.hash_config`. The real server, both databases.
@Suite("Importing users")
struct UserImportAPITests {
    static let firebaseKey = "jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA=="
    static let firebaseConfig: JSON = ["signer_key": .string(firebaseKey), "salt_separator": "Bw==", "rounds": 8, "mem_cost": 14]
    static let bcrypt: JSON = ["algorithm": "bcrypt", "hash": "$2b$05$CCCCCCCCCCCCCCCCCCCCC.VGOzA784oUp/Z0DY336zx7pLYAy0lwK"]

    static func ndjson(_ lines: [JSON]) -> [UInt8] {
        Array(lines.map(\.serializedString).joined(separator: "\n").utf8) + [10]
    }

    static func importUsers(_ server: TestServer, key: String, _ body: [UInt8], contentType: String = "application/x-ndjson") throws -> TestResponse {
        try server.request("POST", "/v1/admin/users/import", bearer: key, headers: [("Content-Type", contentType)], body: body)
    }

    static func signIn(_ server: TestServer, _ app: TestServer.CreatedApp, _ email: String, _ password: String) throws -> TestResponse {
        try server.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": .string(email), "password": .string(password)])
    }

    static func userID(_ server: TestServer, _ app: TestServer.CreatedApp, email: String) throws -> UserID? {
        try server.gatehouse.database.query("SELECT id FROM users WHERE app_id = \(app.id) AND email = \(email)").first.map { UserID(unchecked: try $0.string("id")) }
    }

    /// Every algorithm, the Firebase one through the app's `firebase.hash_config`: each user signs
    /// in with the original password (and is rehashed), a wrong one is refused; the Firebase row
    /// holds no byte of the signer key.
    @Test(arguments: TestDatabase.kinds)
    func eachHashTypeSignsInWithTheOriginalPasswordAndAWrongOneIsRefused(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(["name": "Imports", "rate_limits": ["auth_per_minute_per_ip": 1000], "firebase": ["hash_config": Self.firebaseConfig]])
        var lines: [JSON] = []
        for (algorithm, _, hash) in ImportedPasswordSignInTests.imports {
            var hash = hash
            if algorithm == "firebase_scrypt", case .object(var fields) = hash {
                for key in ["signer_key", "salt_separator", "rounds", "mem_cost"] { fields[key] = nil }
                hash = .object(fields)
            }
            lines.append(["email": .string("\(algorithm)@example.com"), "password_hash": hash, "first_name": "Imported"])
        }
        let response = try Self.importUsers(server, key: app.secretKey, Self.ndjson(lines))
        #expect(response.status == 200, "\(response.text)")
        #expect(response.data == ["imported": 7, "skipped": 0, "failed": 0, "errors": []])
        let data = server.gatehouse.store.app(AppID(unchecked: app.id))
        // The Firebase row: the signer key sealed, in no form a reader of the row could use.
        let firebaseUser = try #require(try Self.userID(server, app, email: "firebase_scrypt@example.com"))
        let stored = try #require(try data.passwords.passwordHash(firebaseUser))
        let key = try #require(Data(base64Encoded: Self.firebaseKey))
        #expect(stored.hasPrefix("$gatehouse-import$v=1$firebase_scrypt$"))
        for form in [Self.firebaseKey, String(Self.firebaseKey.dropLast(2)), Base64URL.encode(Array(key)), Digest.hex(Array(key))] {
            #expect(!stored.contains(form))
        }
        let row = try #require(try server.gatehouse.database.query("SELECT * FROM users WHERE app_id = \(app.id) AND id = \(firebaseUser)").first)
        for column in ["password_hash", "app_metadata", "user_metadata", "email"] {
            let text = (try? row.optionalString(column)) ?? nil
            #expect(text.map { !$0.utf8.elementsEqual(key) && !$0.contains(Self.firebaseKey) } ?? true)
        }
        for (algorithm, password, _) in ImportedPasswordSignInTests.imports {
            let email = "\(algorithm)@example.com"
            #expect(try Self.signIn(server, app, email, password + "!").problemCode == "auth/invalid-credential", "\(algorithm)")
            let signedIn = try Self.signIn(server, app, email, password)
            #expect(signedIn.status == 200, "\(algorithm): \(signedIn.text)")
            #expect(signedIn.data?["user"]?["first_name"] == "Imported")
            #expect(signedIn.data?["is_new_user"] == false)
            let id = try #require(try Self.userID(server, app, email: email))
            let rehashed = try #require(try data.passwords.passwordHash(id))
            #expect(!ImportedPasswordHash.isStoredForm(rehashed) && Argon2id.verify(password: Array(password.utf8), encoded: rehashed), "\(algorithm)")
        }
        // One audit event for the whole import, with its counts; no sign-up event per user.
        let events = try server.request("GET", "/v1/admin/events?type=users.imported", bearer: app.secretKey).data?.arrayValue ?? []
        #expect(events.count == 1)
        #expect(events.first?["data"] == ["imported": 7, "skipped": 0, "failed": 0, "source": "api"])
        #expect(try server.gatehouse.database.query("SELECT id FROM events WHERE app_id = \(app.id) AND type = 'user.signed_up'").isEmpty)
    }

    /// An email or identity the app has, or that an earlier line took, is skipped and left as it was.
    @Test(arguments: TestDatabase.kinds)
    func existingEmailsAndIdentitiesAndDuplicatesInTheFileAreSkipped(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind)
        defer { world.stop() }
        let server = world.server
        _ = try server.signUp(world.app, email: "ada@example.com", password: "the real password")
        let google = try server.request(
            "POST", "/v1/auth/oauth/google", appKey: world.app.appKey,
            json: ["id_token": .string(world.google.mintIDToken(sub: "g-existing", aud: ProviderWorld.googleClient, email: "gabe@gmail.com", nonce: "n1")), "nonce": "n1"])
        #expect(google.status == 201)
        let lines: [JSON] = [
            ["email": "ADA@example.com", "password_hash": Self.bcrypt, "first_name": "Impostor"],  // the signed-up address
            ["identities": [["provider": "google", "subject": "g-existing"]], "first_name": "Impostor"],  // the Google user
            ["email": "new@example.com", "first_name": "First"],
            ["email": "new@example.com", "first_name": "Second"],  // the same address again
            ["email": "other@example.com", "identities": [["provider": "apple", "subject": "001.dup"]]],
            ["email": "third@example.com", "identities": [["provider": "apple", "subject": "001.dup"]]],  // the same Apple account again
        ]
        let response = try Self.importUsers(server, key: world.app.secretKey, Self.ndjson(lines))
        #expect(response.data == ["imported": 2, "skipped": 4, "failed": 0, "errors": []], "\(response.text)")
        #expect(try Self.signIn(server, world.app, "ada@example.com", "the real password").data?["user"]?["first_name"] == .null)
        #expect(try Self.signIn(server, world.app, "ada@example.com", "U*U*").problemCode == "auth/invalid-credential")
        let names = try server.gatehouse.database.query("SELECT first_name FROM users WHERE app_id = \(world.app.id) AND email = 'new@example.com'")
        #expect(try names.map { try $0.optionalString("first_name") } == ["First"])
        #expect(try Self.userID(server, world.app, email: "third@example.com") == nil)
        // The file again: everything is there already.
        #expect(try Self.importUsers(server, key: world.app.secretKey, Self.ndjson(lines)).data?["skipped"] == 6)
    }

    /// An imported Google or Apple identity signs its user in with the provider at once: the same
    /// user, not a new one.
    @Test(arguments: TestDatabase.kinds)
    func importedProviderIdentitiesSignInAtOnce(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind)
        defer { world.stop() }
        let lines: [JSON] = [
            ["email": "gabe@gmail.com", "email_verified": true, "identities": [["provider": "google", "subject": "g-imported"]], "display_name": "Gabe"],
            ["email": "pat@example.com", "identities": [["provider": "apple", "subject": "001.apple.imported"]], "app_metadata": ["plan": "pro"],
             "created_at": "2021-03-04T05:06:07Z"],
        ]
        #expect(try Self.importUsers(world.server, key: world.app.secretKey, Self.ndjson(lines)).data?["imported"] == 2)
        let google = try world.server.request(
            "POST", "/v1/auth/oauth/google", appKey: world.app.appKey,
            json: ["id_token": .string(world.google.mintIDToken(sub: "g-imported", aud: ProviderWorld.googleClient, email: "gabe@gmail.com", nonce: "n2")), "nonce": "n2"])
        #expect(google.status == 200, "\(google.text)")
        #expect(google.data?["is_new_user"] == false)
        #expect(google.data?["user"]?["display_name"] == "Gabe")
        #expect(google.data?["user"]?["email_verified"] == true)
        #expect(google.data?["user"]?["identities"] == ["google"])
        let apple = try world.appleSignIn(["identity_token": .string(world.appleToken(sub: "001.apple.imported")), "nonce": "raw-nonce-1"])
        #expect(apple.status == 200, "\(apple.text)")
        #expect(apple.data?["is_new_user"] == false)
        #expect(apple.data?["user"]?["created_at"] == "2021-03-04T05:06:07Z")
        #expect(apple.data?["user"]?["app_metadata"] == ["plan": "pro"])
        let token = try #require(apple.data?["access_token"]?.stringValue)
        #expect(try JSON.parse(JWT.parse(token).payload)["app_metadata"] == ["plan": "pro"])
    }

    /// Broken lines get an error each, with their line number; the good lines around them are
    /// imported; blank lines are ignored (but counted in the numbering).
    @Test(arguments: TestDatabase.kinds)
    func malformedLinesGetPerLineErrorsAndTheGoodLinesAreImported(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp()
        let lines = [
            #"{"email": "one@example.com"}"#,
            #"{"email": "two@example.com", "#,
            #"{"email": "three@example.com", "favourite_colour": "blue"}"#,
            "",
            #"{"email": "five@example.com", "password_hash": {"algorithm": "bcrypt", "hash": "$2b$05$short"}}"#,
            #"{"email": "not an email"}"#,
            #"{"email": "seven@example.com", "first_name": "\#(String(repeating: "n", count: 51))"}"#,
            #"{"email": "eight@example.com", "app_metadata": {"blob": "\#(String(repeating: "x", count: 5000))"}}"#,
            #"{"first_name": "Nobody"}"#,
            #"[1, 2]"#,
            #"{"email": "eleven@example.com", "password_hash": {"algorithm": "md5", "hash": "x"}}"#,
            #"{"password_hash": {"algorithm": "bcrypt", "hash": "$2b$05$CCCCCCCCCCCCCCCCCCCCC.VGOzA784oUp/Z0DY336zx7pLYAy0lwK"}, "identities": [{"provider": "google", "subject": "g"}]}"#,
            #"{"email": "thirteen@example.com", "identities": [{"provider": "firebase", "subject": "uid"}]}"#,
            #"{"email": "last@example.com", "email_verified": true}"#,
            "{" + (0..<200).map { #""unknown\#($0)-\#(String(repeating: "k", count: 100))": 1"# }.joined(separator: ", ") + "}",
        ]
        let response = try Self.importUsers(server, key: app.secretKey, Array(lines.joined(separator: "\r\n").utf8))
        #expect(response.status == 200)
        let data = try #require(response.data)
        #expect(data["imported"] == 2)
        #expect(data["failed"] == 12)
        let errors = data["errors"]?.arrayValue ?? []
        #expect(errors.compactMap { $0["line"] } == [2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 15].map { JSON.int($0) })
        func message(_ line: Int64) -> String { errors.first { $0["line"] == .int(line) }?["message"]?.stringValue ?? "" }
        func code(_ line: Int64) -> String? { errors.first { $0["line"] == .int(line) }?["code"]?.stringValue }
        #expect(code(2) == "request/malformed" && code(10) == "request/malformed")
        #expect(code(3) == "request/validation-failed")
        #expect(message(3) == "favourite_colour: Unknown field.")
        #expect(message(5).hasPrefix("password_hash.hash: "))
        #expect(message(6) == "email: Must be an email address.")
        #expect(message(7) == "first_name: Must be at most 50 characters.")
        #expect(message(8).hasPrefix("app_metadata: Must be at most 4096 bytes"))
        #expect(message(9).hasPrefix("email: Required"))
        #expect(message(11).hasPrefix("password_hash.algorithm: Must be one of"))
        #expect(message(12).hasPrefix("email: Required with password_hash"))
        #expect(message(13).hasPrefix("identities[0].provider: Must be one of apple, google"))
        // A message is bounded, however many unknown fields the line names.
        #expect(message(15).count == 500 && message(15).hasSuffix("…"))
        #expect(try Self.userID(server, app, email: "one@example.com") != nil)
        #expect(try Self.userID(server, app, email: "last@example.com") != nil)
        let counted = try server.gatehouse.database.query("SELECT COUNT(*) AS n FROM users WHERE app_id = \(app.id)").first?.int64("n")
        #expect(counted == 2)
    }

    @Test(arguments: TestDatabase.kinds)
    func theLimitsAreClearRefusals(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp()
        // 10,001 lines: refused before any is imported.
        let many = Array((0...10_000).map { #"{"email": "u\#($0)@example.com"}"# }.joined(separator: "\n").utf8)
        let tooMany = try Self.importUsers(server, key: app.secretKey, many)
        #expect(tooMany.status == 413)
        #expect(tooMany.problemCode == "request/payload-too-large")
        #expect(tooMany.json?["detail"]?.stringValue?.contains("10000 lines") == true)
        #expect(try server.gatehouse.database.query("SELECT id FROM users WHERE app_id = \(app.id)").isEmpty)
        // Exactly 10,000 (and blank lines besides) is fine.
        let enough = Array((0..<10_000).map { #"{"email": "u\#($0)@example.com"}"# }.joined(separator: "\n\n").utf8)
        #expect(try Self.importUsers(server, key: app.secretKey, enough).data?["imported"] == 10_000)
        // Another type: 415, before the body is read.
        let json = try Self.importUsers(server, key: app.secretKey, Array(#"{"email": "a@example.com"}"#.utf8), contentType: "application/json")
        #expect(json.status == 415)
        #expect(json.problemCode == "request/unsupported-media-type")
        // Over 16 MiB: 413.
        let big = [UInt8](repeating: 32, count: 16 * 1024 * 1024 + 1)
        let tooBig = try Self.importUsers(server, key: app.secretKey, big)
        #expect(tooBig.status == 413)
        #expect(tooBig.json?["detail"] == "The body may be at most 16 MiB.")
        // No secret key: 401 before the body is read.
        let anonymous = try server.request("POST", "/v1/admin/users/import", headers: [("Content-Type", "application/x-ndjson")], body: Array(#"{"email": "x@example.com"}"#.utf8))
        #expect(anonymous.status == 401)
    }

    /// Each app's users are its own: an address another app has is imported, and a secret key
    /// imports into its own app only.
    @Test(arguments: TestDatabase.kinds)
    func importsAreScopedToTheSecretKeysApp(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let first = try server.createApp(["name": "First"])
        let second = try server.createApp(["name": "Second"])
        _ = try server.signUp(second, email: "shared@example.com", password: "second app password")
        let lines: [JSON] = [["email": "shared@example.com", "password_hash": Self.bcrypt], ["email": "only-first@example.com"]]
        #expect(try Self.importUsers(server, key: first.secretKey, Self.ndjson(lines)).data?["imported"] == 2)
        #expect(try Self.signIn(server, first, "shared@example.com", "U*U*").status == 200)
        #expect(try Self.signIn(server, second, "shared@example.com", "U*U*").problemCode == "auth/invalid-credential")
        #expect(try Self.signIn(server, second, "shared@example.com", "second app password").status == 200)
        #expect(try Self.userID(server, second, email: "only-first@example.com") == nil)
        // The second app's key cannot reach the first: what it imports lands in its own app.
        #expect(try Self.importUsers(server, key: second.secretKey, Self.ndjson([["email": "only-first@example.com"]])).data?["imported"] == 1)
        #expect(try Self.userID(server, second, email: "only-first@example.com") != nil)
        let firstCount = try server.gatehouse.database.query("SELECT COUNT(*) AS n FROM users WHERE app_id = \(first.id)").first?.int64("n")
        #expect(firstCount == 2)
    }

    /// One import at a time per app: a second one while the first runs is 429; another app's runs.
    @Test(arguments: TestDatabase.kinds)
    func oneImportAtATimePerApp(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let first = try server.createApp(["name": "First"])
        let second = try server.createApp(["name": "Second"])
        let file = NSTemporaryDirectory() + "gatehouse-import-\(UUID().uuidString).ndjson"
        try Data(Self.ndjson((0..<3).map { ["email": .string("u\($0)@example.com")] })).write(to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        let importer = server.gatehouse.userImport
        let firstApp = try #require(try server.gatehouse.directory.current(id: AppID(unchecked: first.id)))
        let secondApp = try #require(try server.gatehouse.directory.current(id: AppID(unchecked: second.id)))
        var during: [String] = []
        let report = try importer.run(app: firstApp, path: file, source: .cli) { _ in
            do {
                _ = try importer.run(app: firstApp, path: file, source: .cli)
                during.append("same app ran")
            } catch let error as GatehouseError {
                during.append("same app: \(error.code.rawValue) \(error.code.status)")
            } catch {
                during.append("same app: \(error)")
            }
            let other = try? importer.run(app: secondApp, path: file, source: .cli)
            during.append("other app imported \(other?.imported ?? -1)")
            // Over HTTP, the same app's import meanwhile is a 429 with Retry-After.
            let http = try? Self.importUsers(server, key: first.secretKey, Self.ndjson([["email": "http@example.com"]]))
            during.append("http \(http?.status ?? 0) \(http?.problemCode ?? "-") retry-after \(http?.header("Retry-After") ?? "-")")
        }
        #expect(report.imported == 3)
        #expect(during == ["same app: auth/too-many-requests 429", "other app imported 3", "http 429 auth/too-many-requests retry-after 10"])
        #expect(try Self.userID(server, first, email: "http@example.com") == nil)
        // Once it has ended, the app imports again.
        let again = try importer.run(app: firstApp, path: file, source: .cli)
        #expect(again.skipped == 3)
    }

    /// `firebase.hash_config`: checked, its signer key sealed at rest and never shown back.
    @Test(arguments: TestDatabase.kinds)
    func theFirebaseHashConfigIsCheckedSealedAndNeverShown(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp()
        let bad = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: [
            "firebase": ["hash_config": ["signer_key": "not base64!", "salt_separator": "Bw==", "rounds": 99, "mem_cost": 14]],
        ])
        #expect(bad.status == 400)
        let fields = Set((bad.json?["errors"]?.arrayValue ?? []).compactMap { $0["field"]?.stringValue })
        #expect(fields == ["firebase.hash_config.signer_key", "firebase.hash_config.rounds"])
        let set = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["firebase": ["hash_config": Self.firebaseConfig]])
        #expect(set.status == 200, "\(set.text)")
        #expect(set.data?["firebase"]?["hash_config"] == ["signer_key": ["set": true], "salt_separator": "Bw==", "rounds": 8, "mem_cost": 14])
        let shown = try server.request("GET", "/v1/admin/app", bearer: app.secretKey)
        #expect(!shown.text.contains(Self.firebaseKey))
        let stored = try #require(try server.gatehouse.database.query("SELECT settings FROM apps WHERE id = \(app.id)").first?.string("settings"))
        #expect(!stored.contains(Self.firebaseKey) && stored.contains("sealed"))
        // `{"set": true}` keeps the key while another field changes; a line without parameters uses it.
        let kept = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: [
            "firebase": ["project_id": "photos-demo-123", "hash_config": ["signer_key": ["set": true], "salt_separator": "Bw==", "rounds": 8, "mem_cost": 14]],
        ])
        #expect(kept.status == 200, "\(kept.text)")
        let line: JSON = ["email": "fb@example.com", "password_hash": [
            "algorithm": "firebase_scrypt", "salt": "42xEC+ixf3L2lw==",
            "hash": "lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ==",
        ]]
        #expect(try Self.importUsers(server, key: app.secretKey, Self.ndjson([line])).data?["imported"] == 1)
        #expect(try Self.signIn(server, app, "fb@example.com", "user1password").status == 200)
        // Without the setting, such a line is an error of its own.
        #expect(try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["firebase": ["hash_config": .null]]).status == 200)
        var second = line
        if case .object(var fields) = line { fields["email"] = "fb2@example.com"; second = .object(fields) }
        let without = try Self.importUsers(server, key: app.secretKey, Self.ndjson([second]))
        #expect(without.data?["failed"] == 1)
        #expect(without.data?["errors"]?[0]?["message"]?.stringValue?.contains("neither in the line nor in the app's settings") == true)
    }
}

extension JSON {
    fileprivate subscript(index: Int) -> JSON? {
        guard case .array(let items) = self, items.indices.contains(index) else { return nil }
        return items[index]
    }
}
