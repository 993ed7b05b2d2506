import Foundation
import GatehouseCore
import GatehouseTesting
import Synchronization
import Testing

@Suite("Apps through the admin API")
struct AppsAPITests {
    @Test(arguments: TestDatabase.kinds)
    func anAppCreatedThroughTheAdminAPIAnswersGetApp(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(["name": "Photos", "password_min_length": 10, "sign_in_methods": ["password", "apple"]])
        #expect(app.appKey.hasPrefix("pk_"))
        #expect(app.secretKey.hasPrefix("sk_"))
        #expect(app.id.hasPrefix("app_"))
        #expect(app.response.header("Cache-Control") == "no-store")

        let response = try server.request("GET", "/v1/app", appKey: app.appKey)
        #expect(response.status == 200)
        #expect(response.header("Content-Type") == "application/json")
        let data = try #require(response.data)
        #expect(data == [
            "id": .string(app.id), "name": "Photos", "require_verified_email": false, "sign_in_methods": ["password", "apple"],
            "password_min_length": 10, "allow_anonymous": false, "files": ["max_bytes": 5_242_880, "photo_types": ["image/jpeg", "image/png", "image/webp", "image/gif"]],
        ])
    }

    @Test(arguments: TestDatabase.kinds)
    func appKeyIsRequiredAndChecked(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let missing = try server.request("GET", "/v1/app")
        #expect(missing.status == 401)
        #expect(missing.problemCode == "app/missing-key")
        #expect(missing.header("Content-Type") == "application/problem+json")
        let unknown = try server.request("GET", "/v1/app", appKey: "pk_doesnotexist")
        #expect(unknown.status == 401)
        #expect(unknown.problemCode == "app/invalid-key")
        let huge = try server.request("GET", "/v1/app", appKey: String(repeating: "k", count: 4000))
        #expect(huge.problemCode == "app/invalid-key")
    }

    @Test(arguments: TestDatabase.kinds)
    func creatingAnAppNeedsThePlatformToken(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let none = try server.request("POST", "/v1/admin/apps", json: ["name": "X"])
        #expect(none.status == 401)
        #expect(none.problemCode == "auth/missing-token")
        let wrong = try server.request("POST", "/v1/admin/apps", bearer: "not-the-token", json: ["name": "X"])
        #expect(wrong.status == 401)
        #expect(wrong.problemCode == "auth/invalid-token")
        // A secret key of an app is not a platform token.
        let app = try server.createApp()
        let bySecretKey = try server.request("POST", "/v1/admin/apps", bearer: app.secretKey, json: ["name": "X"])
        #expect(bySecretKey.problemCode == "auth/invalid-token")
    }

    @Test(arguments: TestDatabase.kinds)
    func settingsAreReadAndPatchedWithTheSecretKeyAndSecretsAreWriteOnly(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(["name": "Shop", "webhooks": [["url": "https://hooks.example.com/a", "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "events": ["user.created"]]]])

        let read = try server.request("GET", "/v1/admin/app", bearer: app.secretKey)
        #expect(read.status == 200)
        let settings = try #require(read.data)
        #expect(settings["id"] == .string(app.id))
        #expect(settings["app_key"] == .string(app.appKey))
        #expect(settings["webhooks"] == [["url": "https://hooks.example.com/a", "secret": ["set": true], "events": ["user.created"]]])
        #expect(!read.text.contains("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"))

        let patched = try server.request(
            "PATCH", "/v1/admin/app", bearer: app.secretKey,
            json: ["name": "Shop 2", "allowed_origins": ["https://shop.example.com"], "email": ["smtp_password": "hunter2hunter2", "from": "Shop <no-reply@shop.example.com>"],
                   "files": ["max_bytes": 2048]])
        #expect(patched.status == 200)
        let after = try #require(patched.data)
        #expect(after["name"] == "Shop 2")
        #expect(after["files"]?["max_bytes"] == 2048)
        // Merge patch: the nested object keeps its other members.
        #expect(after["files"]?["photo_types"] == ["image/jpeg", "image/png", "image/webp", "image/gif"])
        #expect(after["email"]?["smtp_password"] == ["set": true])
        #expect(!patched.text.contains("hunter2"))

        // GET → PATCH round trip: the redacted secrets and read-only members are accepted unchanged.
        let roundTrip = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: after)
        #expect(roundTrip.status == 200)
        #expect(roundTrip.data == after)

        // null removes (RFC 7396).
        let cleared = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["email": ["smtp_password": nil]])
        #expect(cleared.data?["email"]?["smtp_password"] == .null)

        // The public view follows at once on this node.
        let publicView = try server.request("GET", "/v1/app", appKey: app.appKey)
        #expect(publicView.data?["name"] == "Shop 2")
    }

    /// The stored SMTP password goes only to the server it was stored for: a PATCH that points
    /// `smtp_url` at another host or port must send the password again (or null); the same server
    /// under another field's change keeps it.
    @Test(arguments: TestDatabase.kinds)
    func theStoredSMTPPasswordIsNotKeptForAnotherServer(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp([
            "name": "Mailer", "email": ["smtp_url": "smtp://mail.example.com:587", "smtp_username": "shop", "smtp_password": "stored-smtp-password"],
        ])
        let kept = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["email": ["smtp_url": "smtp://MAIL.example.com:587", "from": "Shop <shop@example.com>"]])
        #expect(kept.status == 200 && kept.data?["email"]?["smtp_password"] == ["set": true], "\(kept.text)")

        for url in ["smtp://attacker.example.net:587", "smtp://mail.example.com:2525", "smtps://mail.example.com"] {
            for body: JSON in [["email": ["smtp_url": .string(url)]], ["email": ["smtp_url": .string(url), "smtp_password": ["set": true]]]] {
                let moved = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: body)
                #expect(moved.status == 400 && moved.text.contains("email.smtp_password"), "\(url): \(moved.text)")
            }
        }
        let stored = try server.request("GET", "/v1/admin/app", bearer: app.secretKey)
        #expect(stored.data?["email"]?["smtp_url"] == "smtp://MAIL.example.com:587" && stored.data?["email"]?["smtp_password"] == ["set": true])

        let resent = try server.request(
            "PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["email": ["smtp_url": "smtp://relay.example.net:587", "smtp_password": "new-smtp-password"]])
        #expect(resent.status == 200 && resent.data?["email"]?["smtp_password"] == ["set": true], "\(resent.text)")
        let cleared = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["email": ["smtp_url": "smtp://other.example.net", "smtp_password": nil]])
        #expect(cleared.status == 200 && cleared.data?["email"]?["smtp_password"] == .null, "\(cleared.text)")
    }

    @Test(arguments: TestDatabase.kinds)
    func secretsAreSealedInTheDatabase(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(["name": "Vault", "email": ["smtp_password": "very-secret-smtp-password"]])
        let rows = try server.gatehouse.database.query("SELECT settings FROM apps")
        let stored = try rows[0].string("settings")
        #expect(!stored.contains("very-secret-smtp-password"))
        #expect(stored.contains("sealed"))
        let keys = try server.gatehouse.database.query("SELECT key_hash FROM app_secret_keys")
        #expect(try keys[0].string("key_hash") != app.secretKey)
        let signing = try server.gatehouse.database.query("SELECT private_key FROM signing_keys")
        #expect(try signing.allSatisfy { try !$0.string("private_key").contains("PRIVATE KEY") })
    }

    @Test(arguments: TestDatabase.kinds)
    func invalidSettingsAreRejectedFieldByFieldAndNothingIsWritten(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(["name": "Strict"])
        let response = try server.request(
            "PATCH", "/v1/admin/app", bearer: app.secretKey,
            json: [
                "name": "Renamed", "colour": "blue", "access_token_ttl_seconds": 5, "recent_login_seconds": "300",
                "allowed_origins": ["https://ok.example.com", "https://bad.example.com/path"], "apple": ["team_id": "lower", "extra": 1],
                "email_collision": "merge", "redirect_uris": ["http://evil.example.com/cb"],
            ])
        #expect(response.status == 400)
        #expect(response.problemCode == "request/validation-failed")
        let fields = Set((response.json?["errors"]?.arrayValue ?? []).compactMap { $0["field"]?.stringValue })
        #expect(fields == ["colour", "access_token_ttl_seconds", "recent_login_seconds", "allowed_origins[1]", "apple.team_id", "apple.extra", "email_collision", "redirect_uris[0]"])
        let unchanged = try server.request("GET", "/v1/admin/app", bearer: app.secretKey)
        #expect(unchanged.data?["name"] == "Strict")
    }

    @Test(arguments: TestDatabase.kinds)
    func concurrentPatchesOfDifferentFieldsAllLandOnEveryNode(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let other = try TestServer(anotherNodeOf: server)
        defer { other.stop() }
        let app = try server.createApp(["name": "Busy"])
        // Both nodes have the app cached before the changes.
        #expect(try other.request("GET", "/v1/admin/app", bearer: app.secretKey).status == 200)
        let patches: [JSON] = [
            ["recent_login_seconds": 600], ["access_token_ttl_seconds": 1200], ["password_min_length": 12], ["refresh_cookie": true],
            ["allow_signup": false], ["deletion_grace_days": 7], ["name": "Renamed"], ["email_collision": "separate"],
        ]
        let statuses = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: patches.count) { i in
            let response = try? (i.isMultiple(of: 2) ? server : other).request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: patches[i])
            statuses.withLock { $0.append("\(response?.status ?? 0) \(response?.problemCode ?? "")") }
        }
        #expect(statuses.withLock { $0 }.allSatisfy { $0 == "200 " }, "\(statuses.withLock { $0 })")
        let stored = try #require(try server.request("GET", "/v1/admin/app", bearer: app.secretKey).data)
        for patch in patches {
            guard case .object(let fields) = patch, let (field, value) = fields.first else { continue }
            #expect(stored[field] == value, "\(field)")
        }
        #expect(try server.gatehouse.database.query("SELECT 1 AS one FROM events WHERE type = 'app.settings_changed'").count == patches.count)
    }

    @Test(arguments: TestDatabase.kinds)
    func adminSecretsCannotComeFromServerFilesOrEnvironment(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp()
        for body: JSON in [["apple": ["private_key_file": "/etc/shadow"]], ["email": ["smtp_password_env": "GATEHOUSE_MASTER_KEY"]]] {
            let response = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: body)
            #expect(response.status == 400)
            #expect(response.problemCode == "request/validation-failed")
        }
    }

    /// API.md: unknown fields are rejected, not ignored; a null (a removal in a merge patch) too,
    /// so that a mistyped name does not pass as a no-op.
    @Test(arguments: TestDatabase.kinds)
    func removingAnUnknownFieldIsRefused(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(["name": "Nulls", "recent_login_seconds": 600])
        for (body, field): (JSON, String) in [
            (["recent_login_secs": nil], "recent_login_secs"), (["apple": ["servcies_id": nil]], "apple.servcies_id"),
            (["rate_limits": ["auth_per_minute": nil], "name": "Renamed"], "rate_limits.auth_per_minute"),
        ] {
            let response = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: body)
            #expect(response.status == 400, "\(field)")
            #expect(response.json?["errors"] == [["field": .string(field), "message": "Unknown field."]])
        }
        // The file and environment variants of a secret are Tenants/ fields: named in the admin
        // API, even as null, they are refused with the reason.
        let fromFile = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["apple": ["private_key_file": nil]])
        #expect(fromFile.status == 400)
        #expect(fromFile.json?["errors"]?.arrayValue?.first?["field"] == "apple.private_key_file")
        #expect(fromFile.json?["errors"]?.arrayValue?.first?["message"]?.stringValue?.hasPrefix("Only files under Tenants/") == true)
        // Nothing was written; removing a known field still works.
        #expect(try server.request("GET", "/v1/admin/app", bearer: app.secretKey).data?["name"] == "Nulls")
        let reset = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["recent_login_seconds": nil, "apple": ["services_id": nil]])
        #expect(reset.status == 200)
        #expect(reset.data?["recent_login_seconds"] == 300)
    }

    @Test(arguments: TestDatabase.kinds)
    func readOnlyMembersCannotBeChanged(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp()
        let response = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["app_key": "pk_mine_now_0000000000"])
        #expect(response.status == 400)
        #expect(response.json?["errors"] == [["field": "app_key", "message": "Read-only."]])
    }

    @Test(arguments: TestDatabase.kinds)
    func aRotatedSecretKeyIsShownOnceAndThePreviousOneWorksFor24Hours(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock()
        let server = try TestServer(kind, clock: clock)
        defer { server.stop() }
        let app = try server.createApp()
        let rotated = try server.request("POST", "/v1/admin/app/secret-keys", bearer: app.secretKey)
        #expect(rotated.status == 201)
        let newKey = try #require(rotated.data?["secret_key"]?.stringValue)
        #expect(newKey != app.secretKey)
        #expect(try server.request("GET", "/v1/admin/app", bearer: app.secretKey).status == 200)
        #expect(try server.request("GET", "/v1/admin/app", bearer: newKey).status == 200)
        clock.advance(seconds: 86400 + 1)
        let old = try server.request("GET", "/v1/admin/app", bearer: app.secretKey)
        #expect(old.status == 401)
        #expect(old.problemCode == "auth/invalid-token")
        #expect(try server.request("GET", "/v1/admin/app", bearer: newKey).status == 200)

        // A key that leaked is revoked at once, with every other key but the new one.
        let third = try server.request("POST", "/v1/admin/app/secret-keys?revoke_others=true", bearer: newKey)
        let thirdKey = try #require(third.data?["secret_key"]?.stringValue)
        #expect(try server.request("GET", "/v1/admin/app", bearer: newKey).problemCode == "auth/invalid-token")
        #expect(try server.request("GET", "/v1/admin/app", bearer: thirdKey).status == 200)
        #expect(try server.request("POST", "/v1/admin/app/secret-keys?revoke_others=maybe", bearer: thirdKey).problemCode == "request/validation-failed")
        let rotations = try server.gatehouse.database.query("SELECT data FROM events WHERE type = 'app.secret_key_rotated' ORDER BY created_at, data")
        #expect(rotations.count == 2)
    }

    @Test(arguments: TestDatabase.kinds)
    func oneAppsSecretKeySeesOnlyItsOwnApp(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let a = try server.createApp(["name": "A"])
        let b = try server.createApp(["name": "B"])
        #expect(try server.request("GET", "/v1/admin/app", bearer: a.secretKey).data?["id"] == .string(a.id))
        #expect(try server.request("GET", "/v1/admin/app", bearer: b.secretKey).data?["id"] == .string(b.id))
        _ = try server.request("PATCH", "/v1/admin/app", bearer: a.secretKey, json: ["name": "A2"])
        #expect(try server.request("GET", "/v1/app", appKey: b.appKey).data?["name"] == "B")
    }
}
