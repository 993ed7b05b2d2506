import Foundation
import GatehouseCore
import GatehouseCrypto
import GatehouseTesting
import Testing

/// The migration guides' programs, run as a reader would run them, and what they make imported
/// through `POST /v1/admin/users/import` and signed in with: docs/firebase-migration.md's
/// converter on a `firebase auth:export` file, docs/import-from-your-database.md's Django and
/// Werkzeug functions on hashes Python made, docs/supabase-migration.md's query on an `auth`
/// schema shaped like Supabase's. The real server, both databases.
@Suite("Migration guides")
struct MigrationGuidesTests {
    /// github.com/firebase/scrypt's README example: its project parameters and one exported
    /// account, whose password is `user1password`.
    static let firebaseParameters: JSON = [
        "signer_key": "jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA==",
        "salt_separator": "Bw==", "rounds": 8, "mem_cost": 14,
    ]

    /// A `firebase auth:export --format=JSON` file: a password user, a Google user, an Apple user,
    /// a disabled user and a phone-only user.
    static let firebaseExport: JSON = [
        "users": [
            [
                "localId": "fbPassword1", "email": "user1@example.com", "emailVerified": true,
                "passwordHash": "lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ==",
                "salt": "42xEC+ixf3L2lw==", "displayName": "User One", "createdAt": "1486324027000",
                "customAttributes": "{\"role\":\"editor\"}",
                "providerUserInfo": [["providerId": "password", "rawId": "user1@example.com", "email": "user1@example.com"]],
            ],
            [
                "localId": "fbGoogle2", "email": "gabe@gmail.com", "emailVerified": true, "createdAt": "1600000000000",
                "providerUserInfo": [["providerId": "google.com", "rawId": "109876543210987654321", "email": "gabe@gmail.com"]],
            ],
            [
                "localId": "fbApple3", "email": "x7@privaterelay.appleid.com", "emailVerified": true,
                "providerUserInfo": [["providerId": "apple.com", "rawId": "001.apple.user", "email": "x7@privaterelay.appleid.com"]],
            ],
            ["localId": "fbDisabled4", "email": "gone@example.com", "disabled": true],
            ["localId": "fbPhone5", "phoneNumber": "+15555550100"],
        ]
    ]

    static func importLines(_ world: ProviderWorld, _ ndjson: String) throws -> TestResponse {
        try world.server.request(
            "POST", "/v1/admin/users/import", bearer: world.app.secretKey, headers: [("Content-Type", "application/x-ndjson")],
            body: Array(ndjson.utf8))
    }

    static func signIn(_ world: ProviderWorld, _ email: String, _ password: String) throws -> TestResponse {
        try world.server.request("POST", "/v1/auth/signin", appKey: world.app.appKey, json: ["email": .string(email), "password": .string(password)])
    }

    static func python(_ page: String) throws -> String {
        try #require(try GuidesTests.program("python", in: page), "no python block in \(page)")
    }

    @Test(arguments: TestDatabase.kinds)
    func theFirebaseGuideMovesPasswordGoogleAndAppleUsers(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind, settings: ["firebase": ["project_id": .string(ProviderWorld.project), "hash_config": Self.firebaseParameters]])
        defer { world.stop() }
        let script = NSTemporaryDirectory() + "firebase-to-gatehouse-\(UUID().uuidString).py"
        try Self.python("docs/firebase-migration.md").write(toFile: script, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: script) }
        let ndjson = try ExternalProgram.run(ExternalProgram.python, [script], stdin: Self.firebaseExport.serialized())
        let lines = ndjson.split(separator: "\n").map { try? JSON.parse(Array($0.utf8)) }
        #expect(lines.count == 3, "the disabled and the phone-only users are left behind: \(ndjson)")
        #expect(lines.first??["app_metadata"] == ["role": "editor", "firebase_uid": "fbPassword1"])

        let report = try Self.importLines(world, ndjson)
        #expect(report.status == 200, "\(report.text)")
        #expect(report.data?["imported"] == 3 && report.data?["skipped"] == 0 && report.data?["errors"] == [], "\(report.text)")
        // Importing the same file again skips every line (the guide says it is safe to rerun).
        #expect(try Self.importLines(world, ndjson).data?["skipped"] == 3)

        // The password user signs in with the Firebase password; the token carries the uid.
        #expect(try Self.signIn(world, "user1@example.com", "user1passwore").status == 400)
        let password = try Self.signIn(world, "user1@example.com", "user1password")
        #expect(password.status == 200, "\(password.text)")
        #expect(password.data?["user"]?["display_name"] == "User One")
        #expect(password.data?["user"]?["created_at"] == "2017-02-05T19:47:07Z")
        let claims = try JSON.parse(JWT.parse(try #require(password.data?["access_token"]?.stringValue)).payload)
        #expect(claims["app_metadata"]?["firebase_uid"] == "fbPassword1")

        // The Google user signs in with Google at once, on the imported account.
        let google = try world.server.request(
            "POST", "/v1/auth/oauth/google", appKey: world.app.appKey,
            json: ["id_token": .string(world.google.mintIDToken(sub: "109876543210987654321", aud: ProviderWorld.googleClient, email: "gabe@gmail.com", nonce: "n1")), "nonce": "n1"])
        #expect(google.status == 200, "\(google.text)")
        #expect(google.data?["user"]?["email"] == "gabe@gmail.com")
        // The Apple user, carried over by the Firebase ID token exchange (step 5).
        let exchange = try world.appleSignIn([
            "firebase_id_token": .string(world.firebase.mintIDToken(projectID: ProviderWorld.project, signInProvider: "apple.com", providerSubject: "001.apple.user", email: "x7@privaterelay.appleid.com"))
        ])
        #expect(exchange.status == 200, "\(exchange.text)")
        #expect(exchange.data?["user"]?["email"] == "x7@privaterelay.appleid.com")
    }

    /// Hashes made by Python the way Django and Werkzeug make them, converted by the guide's
    /// functions, imported and signed in with.
    @Test(arguments: TestDatabase.kinds)
    func theOwnDatabaseGuideConvertsDjangoAndWerkzeugHashes(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind)
        defer { world.stop() }
        let page = try GuidesTests.read("docs/import-from-your-database.md")
        let functions = Markdown.fencedBlocks(page).filter { $0.info == "python" }.map(\.text).joined(separator: "\n\n")
        let program = functions + """

            import hashlib, json
            def django_pbkdf2(password, salt, iterations):
                digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), iterations)
                return f"pbkdf2_sha256${iterations}${salt}${base64.b64encode(digest).decode()}"
            def werkzeug_scrypt(password, salt):
                digest = hashlib.scrypt(password.encode(), salt=salt.encode(), n=32768, r=8, p=1, maxmem=132 * 1024 * 1024, dklen=64)
                return f"scrypt:32768:8:1${salt}${digest.hex()}"
            def werkzeug_pbkdf2(password, salt):
                digest = hashlib.pbkdf2_hmac("sha512", password.encode(), salt.encode(), 1000)
                return f"pbkdf2:sha512:1000${salt}${digest.hex()}"
            users = [
                ("dj@example.com", django_password_hash(django_pbkdf2("django pass 1", "sAlTsAlT1234", 1000))),
                ("wz@example.com", werkzeug_password_hash(werkzeug_scrypt("werkzeug pass 2", "pepperpepper"))),
                ("wp@example.com", werkzeug_password_hash(werkzeug_pbkdf2("werkzeug pass 3", "saltysalty"))),
            ]
            for email, password_hash in users:
                print(json.dumps({"email": email, "password_hash": password_hash}))
            """
        let ndjson = try ExternalProgram.run(ExternalProgram.python, ["-c", program])
        let report = try Self.importLines(world, ndjson)
        #expect(report.data?["imported"] == 3, "\(report.text)")
        for (email, password) in [("dj@example.com", "django pass 1"), ("wz@example.com", "werkzeug pass 2"), ("wp@example.com", "werkzeug pass 3")] {
            #expect(try Self.signIn(world, email, password + "x").status == 400, "\(email): a wrong password")
            #expect(try Self.signIn(world, email, password).status == 200, "\(email)")
        }
    }

    /// The Supabase guide's query, run by `psql` as the guide says, on a database with an `auth`
    /// schema shaped like Supabase's (the columns the query reads): a bcrypt password user, a
    /// Google user, an anonymous user and a deleted one.
    @Test(arguments: TestDatabase.kinds)
    func theSupabaseGuidesQueryExportsPasswordAndGoogleUsers(_ kind: TestDatabaseKind) throws {
        guard TestDatabase.kinds.contains(.postgres) else { return }  // the query needs PostgreSQL as Supabase's
        let supabase = try TestDatabase.make(.postgres)
        defer { supabase.drop() }
        guard case .postgres(let url) = supabase.configuration else { return }
        let setup = """
            create schema auth;
            create table auth.users (id uuid primary key, email text, encrypted_password text, email_confirmed_at timestamptz,
                raw_user_meta_data jsonb, raw_app_meta_data jsonb, created_at timestamptz, deleted_at timestamptz, is_anonymous boolean);
            create table auth.identities (id uuid primary key, user_id uuid references auth.users, provider text, provider_id text, identity_data jsonb);
            insert into auth.users values
              ('00000000-0000-0000-0000-000000000001', 'ana@example.com', '$2a$05$abcdefghijklmnopqrstuu5s2v8.iXieOjg/.AySBTTZIIVFJeBui',
               '2024-01-02T03:04:05Z', '{"full_name": "Ana \\"Q\\" Lima"}', '{"provider": "email"}', '2024-01-02T03:04:05Z', null, false),
              ('00000000-0000-0000-0000-000000000002', 'gabe@gmail.com', '', '2024-02-02T00:00:00Z', '{}', '{}', '2024-02-02T00:00:00Z', null, false),
              ('00000000-0000-0000-0000-000000000003', null, null, null, '{}', '{}', '2024-03-02T00:00:00Z', null, true),
              ('00000000-0000-0000-0000-000000000004', 'gone@example.com', null, null, '{}', '{}', '2024-03-02T00:00:00Z', '2024-04-01T00:00:00Z', false);
            insert into auth.identities values
              ('00000000-0000-0000-0000-0000000000a1', '00000000-0000-0000-0000-000000000001', 'email', 'ana@example.com', '{}'),
              ('00000000-0000-0000-0000-0000000000a2', '00000000-0000-0000-0000-000000000002', 'google', '109876543210987654321', '{}');
            """
        _ = try ExternalProgram.run("/usr/bin/psql", [url, "--quiet", "-v", "ON_ERROR_STOP=1", "-c", setup])
        let page = try GuidesTests.read("docs/supabase-migration.md")
        let query = try #require(Markdown.fencedBlocks(page).first { $0.info == "sql" }?.text)
        let file = NSTemporaryDirectory() + "export-\(UUID().uuidString).sql"
        try query.write(toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let ndjson = try ExternalProgram.run("/usr/bin/psql", [url, "--no-align", "--tuples-only", "--quiet", "-v", "ON_ERROR_STOP=1", "-f", file])
        #expect(ndjson.split(separator: "\n").count == 2, "the anonymous and the deleted users are not exported: \(ndjson)")

        let world = try ProviderWorld(kind)
        defer { world.stop() }
        let report = try Self.importLines(world, ndjson)
        #expect(report.data?["imported"] == 2, "\(report.text)")
        let password = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
        #expect(try Self.signIn(world, "ana@example.com", String(password.dropLast())).status == 400)
        let ana = try Self.signIn(world, "ana@example.com", password)
        #expect(ana.status == 200, "\(ana.text)")
        #expect(ana.data?["user"]?["display_name"] == "Ana \"Q\" Lima")
        #expect(ana.data?["user"]?["email_verified"] == true)
        let google = try world.server.request(
            "POST", "/v1/auth/oauth/google", appKey: world.app.appKey,
            json: ["id_token": .string(world.google.mintIDToken(sub: "109876543210987654321", aud: ProviderWorld.googleClient, email: "gabe@gmail.com", nonce: "n1")), "nonce": "n1"])
        #expect(google.status == 200, "\(google.text)")
    }

    /// `GET /v1/admin/users/export?include_hashes=true` of one app imports into another as it is:
    /// Gatehouse's own argon2id hash, an imported bcrypt and Firebase hash not yet replaced, the
    /// locale, custom data and a Google identity; each user then signs in there.
    @Test(arguments: TestDatabase.kinds)
    func anExportImportsIntoAnotherApp(_ kind: TestDatabaseKind) throws {
        let firebase: JSON = ["project_id": .string(ProviderWorld.project), "hash_config": Self.firebaseParameters]
        let world = try ProviderWorld(kind, settings: ["firebase": firebase, "allow_hash_export": true])
        defer { world.stop() }
        let bcryptPassword = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
        let lines: [JSON] = [
            ["email": "bea@example.com", "email_verified": true, "locale": "ko", "display_name": "Bea", "user_metadata": ["theme": "dark"],
             "password_hash": ["algorithm": "bcrypt", "hash": "$2a$05$abcdefghijklmnopqrstuu5s2v8.iXieOjg/.AySBTTZIIVFJeBui"]],
            ["email": "user1@example.com", "app_metadata": ["plan": "pro"],
             "password_hash": ["algorithm": "firebase_scrypt", "salt": "42xEC+ixf3L2lw==",
                               "hash": "lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ=="]],
            ["email": "gabe@gmail.com", "email_verified": true, "identities": [["provider": "google", "subject": "g-77", "email": "gabe@gmail.com"]]],
        ]
        let imported = try Self.importLines(world, lines.map { String(decoding: $0.serialized(), as: UTF8.self) }.joined(separator: "\n"))
        #expect(imported.data?["imported"] == 3, "\(imported.text)")
        _ = try world.server.signUp(world.app, email: "native@example.com", password: "correct horse battery")

        let export = try world.server.request("GET", "/v1/admin/users/export?include_hashes=true", bearer: world.app.secretKey)
        #expect(export.status == 200, "\(export.text)")
        #expect(!export.text.contains(Self.firebaseParameters["signer_key"]?.stringValue ?? "-"), "the signer key is never exported")

        let other = try world.server.createApp([
            "name": "Second", "rate_limits": ["auth_per_minute_per_ip": 1000], "google": ["client_ids": [.string(ProviderWorld.googleClient)]],
            "firebase": ["hash_config": Self.firebaseParameters],
        ])
        let again = try world.server.request(
            "POST", "/v1/admin/users/import", bearer: other.secretKey, headers: [("Content-Type", "application/x-ndjson")], body: Array(export.text.utf8))
        #expect(again.data?["imported"] == 4 && again.data?["errors"] == [], "\(again.text)")
        func signIn(_ email: String, _ password: String) throws -> TestResponse {
            try world.server.request("POST", "/v1/auth/signin", appKey: other.appKey, json: ["email": .string(email), "password": .string(password)])
        }
        let bea = try signIn("bea@example.com", bcryptPassword)
        #expect(bea.status == 200, "\(bea.text)")
        #expect(bea.data?["user"]?["locale"] == "ko" && bea.data?["user"]?["user_metadata"] == ["theme": "dark"] && bea.data?["user"]?["display_name"] == "Bea")
        #expect(try signIn("user1@example.com", "user1password").data?["user"]?["app_metadata"] == ["plan": "pro"])
        #expect(try signIn("native@example.com", "correct horse battery").status == 200)
        #expect(try signIn("native@example.com", "correct horse batterx").status == 400)
        let google = try world.server.request(
            "POST", "/v1/auth/oauth/google", appKey: other.appKey,
            json: ["id_token": .string(world.google.mintIDToken(sub: "g-77", aud: ProviderWorld.googleClient, email: "gabe@gmail.com", nonce: "n1")), "nonce": "n1"])
        #expect(google.status == 200, "\(google.text)")
    }
}
