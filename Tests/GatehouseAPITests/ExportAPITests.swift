import Foundation
import GatehouseCrypto
import GatehouseTesting
import Testing

@testable import GatehouseCore

/// Exports (API.md, "Moving users in and out", 2026-12-05): `GET /v1/admin/users/export` (NDJSON
/// written to a spool file a page at a time, then streamed; hashes only with the app's
/// `allow_hash_export` and `include_hashes=true`), `GET /v1/me/export` (the user's own data, no
/// secret), `display_name` at sign-up and the admin's search by it. The real server, both databases.
@Suite("Exports")
struct ExportAPITests {
    final class World: Sendable {
        let server: TestServer
        let app: TestServer.CreatedApp
        /// The configured spool directory: the server makes its private folder inside it.
        let spoolParent: String

        init(_ kind: TestDatabaseKind, pageSize: Int = 2) throws {
            let parent = FileManager.default.temporaryDirectory.path + "/gh-export-spool-" + Digest.hex(SecureRandom.bytes(6))
            try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
            spoolParent = parent
            server = try TestServer(kind) { configuration in
                configuration.uploadSpoolDirectory = parent
                configuration.exportPageSize = pageSize
            }
            app = try server.createApp(["name": "Exports", "rate_limits": ["auth_per_minute_per_ip": 1000], "mfa": ["policy": "optional"]])
        }

        func stop() {
            server.stop()
            try? FileManager.default.removeItem(atPath: spoolParent)
        }

        func data(_ app: TestServer.CreatedApp? = nil) -> any AppScopedStore { server.gatehouse.store.app(AppID(unchecked: (app ?? self.app).id)) }

        func export(_ query: String = "", key: String? = nil) throws -> TestResponse {
            try server.request("GET", "/v1/admin/users/export\(query)", bearer: key ?? app.secretKey)
        }

        /// The lines of an NDJSON body, each parsed.
        func lines(_ response: TestResponse) throws -> [JSON] {
            #expect(response.body.last == 0x0A, "every line ends in a newline")
            return try response.text.split(separator: "\n").map { try JSON.parse(Array($0.utf8)) }
        }

        func signUp(_ email: String, _ extra: [String: JSON] = [:], app: TestServer.CreatedApp? = nil) throws -> TestResponse {
            var body: [String: JSON] = ["email": .string(email), "password": "correct horse battery"]
            for (key, value) in extra { body[key] = value }
            return try server.request("POST", "/v1/auth/signup", appKey: (app ?? self.app).appKey, json: .object(body))
        }

        func events(_ type: String) throws -> [JSON] {
            try server.request("GET", "/v1/admin/events?type=\(type)", bearer: app.secretKey).json?["data"]?.arrayValue ?? []
        }

        /// The files left in the server's spool folder, once the last response has been let go
        /// (libmicrohttpd frees a streamed body just after sending it).
        func spoolFiles() throws -> [String] {
            let folders = try FileManager.default.contentsOfDirectory(atPath: spoolParent).filter { $0.hasPrefix("gatehouse-spool-") }
            #expect(folders.count == 1)
            var files: [String] = []
            for _ in 0..<100 {
                files = try folders.flatMap { try FileManager.default.contentsOfDirectory(atPath: spoolParent + "/" + $0) }
                if files.isEmpty { break }
                Thread.sleep(forTimeInterval: 0.02)
            }
            return files
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func theExportHoldsEveryUserOfTheAppAcrossPagesWithEachField(_ kind: TestDatabaseKind) throws {
        let world = try World(kind, pageSize: 2)
        defer { world.stop() }
        let now = world.server.clock.nowMillis()
        // Five with passwords, one through Google alone; another app's user.
        var ids: [String] = []
        for name in ["ada", "ben", "cy", "dee", "eve"] {
            let response = try world.signUp("\(name)@example.com", ["first_name": .string(name.capitalized)])
            ids.append(try #require(response.data?["user"]?["id"]?.stringValue))
            #expect(response.status == 201)
        }
        let other = try world.server.createApp(["name": "Other"])
        #expect(try world.signUp("bob@elsewhere.example", app: other).status == 201)
        let googleUser = User(
            id: .generate(), email: "gus@gmail.example", emailVerified: true, firstName: nil, lastName: nil, createdAt: now, updatedAt: now, lastSignInAt: nil)
        try world.data().users.insertUser(
            googleUser, passwordHash: nil, identity: Identity(provider: .google, subject: "g-1234567890", email: "gus@gmail.example", createdAt: now),
            event: Event(type: .userSignedUp, userID: googleUser.id, sessionID: nil, ip: nil, userAgent: nil, data: ["method": "google"], createdAt: now))
        ids.append(googleUser.id.rawValue)
        // Custom data, a locale, an Apple identity, a ban.
        let patched = try world.server.request(
            "PATCH", "/v1/admin/users/\(ids[0])", bearer: world.app.secretKey,
            json: ["app_metadata": ["plan": "pro"], "user_metadata": ["theme": "dark"], "display_name": "Ada L."])
        #expect(patched.status == 200)
        try world.data().identities.addIdentity(
            UserID(unchecked: ids[0]), Identity(provider: .apple, subject: "001234.abcdef", email: "relay@privaterelay.appleid.com", createdAt: now))
        _ = try world.data().users.setLocale(UserID(unchecked: ids[0]), "ko", now: now)
        #expect(try world.server.request("POST", "/v1/admin/users/\(ids[1])/ban", bearer: world.app.secretKey, json: ["sanction_code": "spam"]).status == 200)

        let response = try world.export()
        #expect(response.status == 200, "\(response.text)")
        #expect(response.header("Content-Type") == "application/x-ndjson")
        #expect(response.header("Cache-Control") == "no-store")
        let lines = try world.lines(response)
        // Every user once, in id order (the keyset), across the pages of two; none of the other app's.
        #expect(lines.compactMap { $0["id"]?.stringValue } == ids.sorted())
        #expect(!response.text.contains("bob@elsewhere.example"))
        #expect(!response.text.contains("password_hash"), "no hash without include_hashes")
        let byID = Dictionary(uniqueKeysWithValues: lines.map { ($0["id"]?.stringValue ?? "", $0) })

        let ada = try #require(byID[ids[0]])
        #expect(ada["email"] == "ada@example.com" && ada["email_verified"] == false && ada["first_name"] == "Ada")
        #expect(ada["last_name"] == nil, "an absent value is left out, not null")
        #expect(ada["display_name"] == "Ada L." && ada["locale"] == "ko")
        #expect(ada["app_metadata"] == ["plan": "pro"] && ada["user_metadata"] == ["theme": "dark"])
        #expect(ada["identities"] == [["provider": "apple", "subject": "001234.abcdef", "email": "relay@privaterelay.appleid.com"]], "the password identity is implied")
        #expect(ada["created_at"]?.stringValue.flatMap { ExportedTime.millis($0) } != nil)
        #expect(ada["ban"] == nil)
        let ben = try #require(byID[ids[1]])
        #expect(ben["ban"] == ["sanction_code": "spam"])
        #expect(ben["app_metadata"] == nil && ben["user_metadata"] == nil, "empty custom data is left out")
        let gus = try #require(byID[googleUser.id.rawValue])
        #expect(gus["email"] == "gus@gmail.example" && gus["email_verified"] == true)
        #expect(gus["identities"] == [["provider": "google", "subject": "g-1234567890", "email": "gus@gmail.example"]])

        // Recorded (audit only): who, whether hashes went, how many.
        let exported = try #require(try world.events("users.exported").first)
        #expect(exported["data"] == ["by": "admin", "include_hashes": false, "count": 6])
        #expect(exported["user_id"] == .null)
        // The spool file went with the response.
        #expect(try world.spoolFiles() == [])

        // The other app's export holds its own user only.
        let theirs = try world.lines(try world.export(key: other.secretKey))
        #expect(theirs.count == 1 && theirs.first?["email"] == "bob@elsewhere.example")
        // A HEAD exports nothing (the export route answers no HEAD: it is the user route's, for a
        // user called "export"); the secret key is required.
        #expect(try world.server.request("HEAD", "/v1/admin/users/export", bearer: world.app.secretKey).status == 404)
        #expect(try world.events("users.exported").count == 1)
        #expect(try world.server.request("GET", "/v1/admin/users/export").status == 401)
        #expect(try world.server.request("GET", "/v1/admin/users/export", bearer: TestServer.adminToken).status == 401)
    }

    @Test(arguments: TestDatabase.kinds)
    func anAppWithNoUsersExportsAnEmptyBody(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let response = try world.export()
        #expect(response.status == 200 && response.body.isEmpty)
        #expect(try world.events("users.exported").first?["data"]?["count"] == 0)
        #expect(try world.spoolFiles() == [])
    }

    /// (password, the import's `password_hash`) of ImportedPasswordSignInTests' vectors.
    static let bcrypt: JSON = ["algorithm": "bcrypt", "hash": "$2b$05$CCCCCCCCCCCCCCCCCCCCC.VGOzA784oUp/Z0DY336zx7pLYAy0lwK"]
    static let firebase: JSON = [
        "algorithm": "firebase_scrypt", "salt": "42xEC+ixf3L2lw==", "salt_separator": "Bw==", "rounds": 8, "mem_cost": 14,
        "signer_key": "jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA==",
        "hash": "lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ==",
    ]
    static let pbkdf2: JSON = [
        "algorithm": "pbkdf2_sha256", "iterations": 1, "salt": "c2FsdA==",
        "hash": "VawEblbjCJ/sFpHCJUS2BflBhSFt3gRl5oudV8INrLxJypzM8Xm2RZkWZLOdd+8xfHG4RbHjC9UJESBB06GXgw==",
    ]

    @Test(arguments: TestDatabase.kinds)
    func hashesGoOnlyWithTheSettingAndTheFlag(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        var ids: [UserID] = []
        for name in ["ada", "ben", "cy", "dee"] {
            ids.append(UserID(unchecked: try #require(try world.signUp("\(name)@example.com").data?["user"]?["id"]?.stringValue)))
        }
        // Ben's, Cy's and Dee's hashes are as imported (the store's form), Ada's Gatehouse's own.
        for (id, json) in zip(ids.dropFirst(), [Self.bcrypt, Self.firebase, Self.pbkdf2]) {
            let data = world.data()
            let stored = try ImportedPasswordHash.decode(json, firebase: nil).storedForm(sealer: world.server.gatehouse.sealer, app: AppID(unchecked: world.app.id))
            #expect(try data.passwords.setPasswordHash(id, hash: stored, replacing: try data.passwords.passwordHash(id), addIdentity: nil, now: world.server.clock.nowMillis()))
        }

        // Asked for without the setting: 403, nothing written or recorded.
        let refused = try world.export("?include_hashes=true")
        #expect(refused.status == 403 && refused.problemCode == "admin/hash-export-disabled", "\(refused.text)")
        #expect(try world.events("users.exported").isEmpty)
        #expect(try world.spoolFiles() == [])
        let malformed = try world.export("?include_hashes=yes")
        #expect(malformed.status == 400 && malformed.json?["errors"]?.arrayValue?.first?["field"] == "include_hashes")

        // The setting alone exports none.
        let settings = try world.server.request("PATCH", "/v1/admin/app", bearer: world.app.secretKey, json: ["allow_hash_export": true])
        #expect(settings.status == 200 && settings.data?["allow_hash_export"] == true, "\(settings.text)")
        #expect(try world.server.request("PATCH", "/v1/admin/app", bearer: world.app.secretKey, json: ["allow_hash_export": "yes"]).status == 400)
        let without = try world.export()
        #expect(without.status == 200 && !without.text.contains("password_hash"))

        // Both: each hash in its import form.
        let response = try world.export("?include_hashes=true")
        #expect(response.status == 200, "\(response.text)")
        let byID = Dictionary(uniqueKeysWithValues: try world.lines(response).map { ($0["id"]?.stringValue ?? "", $0) })
        let own = try #require(byID[ids[0].rawValue]?["password_hash"])
        #expect(own["algorithm"] == "argon2id")
        let encoded = try #require(own["hash"]?.stringValue)
        #expect(encoded.hasPrefix("$argon2id$") && Argon2id.verify(password: Array("correct horse battery".utf8), encoded: encoded))
        #expect(own.objectValue?.count == 2)
        #expect(byID[ids[1].rawValue]?["password_hash"] == Self.bcrypt)
        // Firebase's: the hash and salt, never the project's signer key (nor its other parameters).
        #expect(byID[ids[2].rawValue]?["password_hash"] == ["algorithm": "firebase_scrypt", "hash": Self.firebase["hash"]!, "salt": Self.firebase["salt"]!])
        #expect(!response.text.contains(Self.firebase["signer_key"]?.stringValue ?? "?"))
        #expect(byID[ids[3].rawValue]?["password_hash"] == Self.pbkdf2)
        // What an import decodes back to the same stored form (Gatehouse's own as argon2id).
        for (id, json) in [(ids[1], Self.bcrypt), (ids[3], Self.pbkdf2)] {
            let exported = try #require(byID[id.rawValue]?["password_hash"])
            #expect(try ImportedPasswordHash.decode(exported, firebase: nil) == ImportedPasswordHash.decode(json, firebase: nil))
        }
        #expect(try ImportedPasswordHash.decode(own, firebase: nil) == .argon2(encoded, argon2i: false))
        let recorded = try world.events("users.exported").map { $0["data"] ?? .null }
        #expect(recorded == [["by": "admin", "include_hashes": true, "count": 4], ["by": "admin", "include_hashes": false, "count": 4]])
        #expect(try world.spoolFiles() == [])
    }

    @Test(arguments: TestDatabase.kinds)
    func theUsersOwnExportHoldsTheirDataAndNoSecret(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let signedUp = try world.signUp("ada@example.com", ["display_name": "Ada L.", "first_name": "Ada"])
        let session = try #require(signedUp.data)
        let token = try #require(session["access_token"]?.stringValue)
        let refreshToken = try #require(session["refresh_token"]?.stringValue)
        let userID = try #require(session["user"]?["id"]?.stringValue)
        // Someone else in the app, whose data must not show.
        #expect(try world.signUp("ben@example.com", ["display_name": "Benjamin"]).status == 201)
        // A file, and an authenticator app with its recovery codes.
        let uploaded = try world.server.request(
            "POST", "/v1/files", appKey: world.app.appKey, bearer: token,
            headers: [("Content-Type", "multipart/form-data; boundary=\(FilesAPITests.boundary)")],
            body: FilesAPITests.multipart(files: [("file", "notes.txt", Array("my notes".utf8))]))
        #expect(uploaded.status == 201, "\(uploaded.text)")
        let begun = try world.server.request("POST", "/v1/me/mfa/totp", appKey: world.app.appKey, bearer: token, json: ["name": "Phone"])
        let factorID = try #require(begun.data?["id"]?.stringValue, "\(begun.text)")
        let secretText = try #require(begun.data?["secret"]?.stringValue)
        let secret = try #require(Base32.decode(secretText))
        let confirmed = try world.server.request(
            "POST", "/v1/me/mfa/totp/\(factorID)/confirm", appKey: world.app.appKey, bearer: token,
            json: ["code": .string(TOTP.code(secret: secret, step: TOTP.step(at: world.server.clock.nowMillis() / 1000)))])
        #expect(confirmed.status == 200, "\(confirmed.text)")
        let recoveryCodes = try #require(confirmed.data?["recovery_codes"]?.arrayValue).compactMap(\.stringValue)

        let response = try world.server.request("GET", "/v1/me/export", appKey: world.app.appKey, bearer: token)
        #expect(response.status == 200, "\(response.text)")
        #expect(response.header("Cache-Control") == "no-store")
        let data = try #require(response.data)
        #expect(data["profile"]?["id"]?.stringValue == userID)
        #expect(data["profile"]?["display_name"] == "Ada L." && data["profile"]?["email"] == "ada@example.com")
        #expect(data["identities"]?.arrayValue?.map { $0["provider"] } == ["password"])
        let sessions = try #require(data["sessions"]?.arrayValue)
        #expect(sessions.count == 1 && sessions.first?["current"] == true)
        let files = try #require(data["files"]?.arrayValue)
        #expect(files.count == 1)
        #expect(files.first?["name"] == "notes.txt" && files.first?["size"] == 8 && files.first?["content_type"] == uploaded.data?["content_type"])
        #expect(files.first?["id"] == uploaded.data?["id"] && files.first?["url"] == nil, "metadata only: nothing that grants access")
        #expect(data["factors"]?.arrayValue?.map { $0["type"] } == ["totp"])
        let events = try #require(data["events"]?.arrayValue).compactMap { $0["type"]?.stringValue }
        // Newest first (events of one millisecond in any order), this export included.
        let times = try #require(data["events"]?.arrayValue).compactMap { $0["created_at"]?.stringValue.flatMap(ExportedTime.millis) }
        #expect(times.count == events.count && times == times.sorted(by: >))
        #expect(events.contains("user.exported") && events.contains("user.signed_up"))
        #expect(events.contains("mfa.enrolled") && events.contains("file.uploaded"))
        #expect(try #require(data["events"]?.arrayValue).allSatisfy { $0["user_id"]?.stringValue == userID })

        // No secret, by value.
        let stored = try #require(try world.data().passwords.passwordHash(UserID(unchecked: userID)))
        let refreshHashes = try world.server.gatehouse.database.query("SELECT token_hash FROM refresh_tokens").map { try $0.string("token_hash") }
        #expect(!refreshHashes.isEmpty)
        let body = response.text
        for secretValue in [secretText, refreshToken, stored, token] + recoveryCodes + refreshHashes {
            #expect(!body.contains(secretValue), "the export holds a secret")
        }
        #expect(!body.contains("Benjamin") && !body.contains("ben@example.com"))

        // A few an hour: the sixth is 429 with Retry-After.
        for _ in 1..<AccountExport.perHour {
            #expect(try world.server.request("GET", "/v1/me/export", appKey: world.app.appKey, bearer: token).status == 200)
        }
        let limited = try world.server.request("GET", "/v1/me/export", appKey: world.app.appKey, bearer: token)
        #expect(limited.status == 429 && limited.problemCode == "auth/too-many-requests")
        #expect(limited.header("Retry-After") != nil)
        #expect(try world.server.request("GET", "/v1/me/export", appKey: world.app.appKey).status == 401)
    }

    @Test(arguments: TestDatabase.kinds)
    func signUpTakesADisplayName(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let response = try world.signUp("ada@example.com", ["display_name": "  Ada L.  "])
        #expect(response.status == 201, "\(response.text)")
        #expect(response.data?["user"]?["display_name"] == "Ada L.", "trimmed, as PATCH /v1/me does")
        let token = try #require(response.data?["access_token"]?.stringValue)
        #expect(try world.server.request("GET", "/v1/me", appKey: world.app.appKey, bearer: token).data?["display_name"] == "Ada L.")
        #expect(try JSON.parse(JWT.parse(token).payload)["name"] == "Ada L.")
        #expect(try world.signUp("ben@example.com", ["display_name": "   "]).data?["user"]?["display_name"] == .null, "empty is none")
        // The rule of PATCH /v1/me: at most 100 characters, no control or formatting characters;
        // nothing is made when it is broken.
        for bad in [String(repeating: "x", count: 101), "Ada\u{202E}", "Ada\u{0007}"] {
            let refused = try world.signUp("cy@example.com", ["display_name": .string(bad)])
            #expect(refused.status == 400 && refused.json?["errors"]?.arrayValue?.first?["field"] == "display_name", "\(refused.text)")
        }
        #expect(try world.signUp("cy@example.com", ["display_name": 7]).status == 400)
        #expect(try world.signUp("cy@example.com").status == 201, "the refused sign-ups made no account")
    }

    @Test(arguments: TestDatabase.kinds)
    func theAdminSearchFindsUsersByDisplayName(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let ada = try #require(try world.signUp("ada@example.com", ["display_name": "Zebrafinch"]).data?["user"]?["id"]?.stringValue)
        #expect(try world.signUp("ben@example.com", ["first_name": "Ben"]).status == 201)
        let other = try world.server.createApp(["name": "Other"])
        #expect(try world.signUp("cy@example.com", ["display_name": "Zebrafinch"], app: other).status == 201)
        func search(_ query: String) throws -> [String] {
            let response = try world.server.request("GET", "/v1/admin/users?query=\(query)", bearer: world.app.secretKey)
            #expect(response.status == 200, "\(response.text)")
            return response.data?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
        }
        // Long enough for the trigram index, and too short for it (the walk); any case.
        #expect(try search("brafin") == [ada])
        #expect(try search("ZEBRA") == [ada])
        #expect(try search("eb") == [ada], "short: walked")
        // A changed display name is found by its new text only (the index follows).
        #expect(try world.server.request("PATCH", "/v1/admin/users/\(ada)", bearer: world.app.secretKey, json: ["display_name": "Okapi"]).status == 200)
        #expect(try search("brafin") == [])
        #expect(try search("okap") == [ada])
        #expect(try world.server.request("PATCH", "/v1/admin/users/\(ada)", bearer: world.app.secretKey, json: ["display_name": .null]).status == 200)
        #expect(try search("okap") == [])
    }
}

/// RFC 3339 times of the export, read back.
enum ExportedTime {
    static func millis(_ text: String) -> Int64? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return Int64(date.timeIntervalSince1970 * 1000) }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text).map { Int64($0.timeIntervalSince1970 * 1000) }
    }
}
