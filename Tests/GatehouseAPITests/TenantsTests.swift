import Foundation
import GatehouseAPI
import GatehouseApp
import GatehouseCore
import GatehouseTesting
import Testing

@Suite("Apps from Tenants/ files")
struct TenantsTests {
    let folder: String

    init() throws {
        folder = NSTemporaryDirectory() + "gatehouse-tenants-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        _ = try ExternalProgram.run("/usr/bin/openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", folder + "/apple.p8"])
    }

    func write(_ name: String, _ json: JSON) throws {
        try Data(json.serialized()).write(to: URL(fileURLWithPath: folder + "/" + name))
    }

    static let demo: JSON = [
        "app_key": "pk_tenant_demo_0123456789", "name": "Tenant Demo", "allowed_origins": ["http://localhost:3000"],
        "apple": ["client_ids": ["com.example.demo"], "team_id": "ABCDE12345", "key_id": "KEY1234567", "private_key_file": "apple.p8"],
        "email": ["smtp_url": "smtp://127.0.0.1:2525", "smtp_password_env": "DEMO_SMTP_PASSWORD"],
    ]

    @Test(arguments: TestDatabase.kinds)
    func aTenantsAppAnswersAndPublishesItsKeys(_ kind: TestDatabaseKind) throws {
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try write("demo.json", Self.demo)
        let server = try TestServer(kind, environment: ["DEMO_SMTP_PASSWORD": "smtp-secret-from-env"]) { $0.tenantsDirectory = folder }
        defer { server.stop() }

        let app = try server.request("GET", "/v1/app", appKey: "pk_tenant_demo_0123456789")
        #expect(app.status == 200)
        #expect(app.data?["name"] == "Tenant Demo")
        let id = try #require(app.data?["id"]?.stringValue)
        #expect(try server.request("GET", "/v1/apps/\(id)/jwks.json").status == 200)

        // Secrets read from the file and the environment are sealed like any other.
        let stored = try server.gatehouse.database.query("SELECT settings FROM apps")[0].string("settings")
        #expect(!stored.contains("smtp-secret-from-env"))
        #expect(!stored.contains("PRIVATE KEY"))
        let context = try #require(try server.gatehouse.directory.app(key: "pk_tenant_demo_0123456789"))
        #expect(context.settings.email.smtpPassword == "smtp-secret-from-env")
        #expect(context.settings.apple.privateKey?.contains("BEGIN PRIVATE KEY") == true)

        // Applying again changes nothing; a changed file updates the same app.
        let environment = ["DEMO_SMTP_PASSWORD": "smtp-secret-from-env"]
        #expect(try server.gatehouse.apps.applyTenants(folder: folder, environment: environment) == ["demo.json: unchanged \(id)"])
        var changed = Self.demo
        if case .object(var o) = changed { o["name"] = "Renamed Demo"; changed = .object(o) }
        try write("demo.json", changed)
        #expect(try server.gatehouse.apps.applyTenants(folder: folder, environment: environment) == ["demo.json: updated \(id)"])
        #expect(try server.request("GET", "/v1/app", appKey: "pk_tenant_demo_0123456789").data?["name"] == "Renamed Demo")
    }

    /// `firebase.hash_config` in a Tenants file takes its signer key from the environment
    /// (`signer_key_env`), sealed like any other secret.
    @Test(arguments: TestDatabase.kinds)
    func aTenantsFileGivesTheFirebaseSignerKeyFromTheEnvironment(_ kind: TestDatabaseKind) throws {
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let key = "jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA=="
        try write("fb.json", [
            "app_key": "pk_tenant_firebase_012345", "name": "Firebase",
            "firebase": ["hash_config": ["signer_key_env": "FIREBASE_SIGNER_KEY", "salt_separator": "Bw==", "rounds": 8, "mem_cost": 14]],
        ])
        let server = try TestServer(kind, environment: ["FIREBASE_SIGNER_KEY": key]) { $0.tenantsDirectory = folder }
        defer { server.stop() }
        let context = try #require(try server.gatehouse.directory.app(key: "pk_tenant_firebase_012345"))
        #expect(context.settings.firebase.hashConfig?.signerKey == Array(try #require(Data(base64Encoded: key))))
        #expect(context.settings.firebase.hashConfig?.rounds == 8)
        let stored = try server.gatehouse.database.query("SELECT settings FROM apps")[0].string("settings")
        #expect(!stored.contains(key) && !stored.contains("FIREBASE_SIGNER_KEY"))
    }

    /// A provider the app defines takes its client secret from the environment in a Tenants file
    /// (`client_secret_env`), sealed like any other secret; applying the file again changes nothing.
    @Test(arguments: TestDatabase.kinds)
    func aTenantsFileGivesAProvidersClientSecretFromTheEnvironment(_ kind: TestDatabaseKind) throws {
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let secret = "line-channel-secret-from-env-42"
        try write("line.json", [
            "app_key": "pk_tenant_line_0123456789", "name": "Line", "sign_in_methods": ["password", "line"],
            "oidc_providers": [["id": "line", "kind": "line", "client_ids": ["1650000000"], "client_secret_env": "LINE_CHANNEL_SECRET"]],
        ])
        let server = try TestServer(kind, environment: ["LINE_CHANNEL_SECRET": secret]) { $0.tenantsDirectory = folder }
        defer { server.stop() }
        let context = try #require(try server.gatehouse.directory.app(key: "pk_tenant_line_0123456789"))
        #expect(context.settings.oidcProviders.first?.clientSecret == secret)
        #expect(context.settings.signInProviders == ["line"])
        let stored = try server.gatehouse.database.query("SELECT settings FROM apps")[0].string("settings")
        #expect(!stored.contains(secret) && !stored.contains("LINE_CHANNEL_SECRET"))
        #expect(try server.gatehouse.apps.applyTenants(folder: folder, environment: ["LINE_CHANNEL_SECRET": secret]) == ["line.json: unchanged \(context.id.rawValue)"])
    }

    /// A Tenants file is held to the rule the admin API keeps: a provider id with users keeps its
    /// kind and issuer (another issuer could name an existing user's subject) and stays defined.
    @Test(arguments: TestDatabase.kinds)
    func aTenantsFileCannotRepointAProviderThatHasUsers(_ kind: TestDatabaseKind) throws {
        defer { try? FileManager.default.removeItem(atPath: folder) }
        func file(_ provider: JSON?) -> JSON {
            var json: JSON = ["app_key": "pk_tenant_social_0123456789", "name": "Social", "sign_in_methods": ["password"]]
            if let provider { json = json.merging(patch: ["oidc_providers": [provider]]) }
            return json
        }
        let kakao: JSON = ["id": "social", "kind": "kakao", "client_ids": ["kakao-key"]]
        try write("social.json", file(kakao))
        let server = try TestServer(kind) { $0.tenantsDirectory = folder }
        defer { server.stop() }
        let context = try #require(try server.gatehouse.directory.app(key: "pk_tenant_social_0123456789"))
        let lines = folder + "/users.ndjson"
        try Data(#"{"email": "k@example.com", "identities": [{"provider": "social", "subject": "k-1"}]}"#.utf8).write(to: URL(fileURLWithPath: lines))
        #expect(try server.gatehouse.userImport.run(app: context, path: lines, source: .cli).imported == 1)
        try FileManager.default.removeItem(atPath: lines)
        for changed in [file(["id": "social", "kind": "oidc", "client_ids": ["c"], "issuer": "https://issuer.example"]), file(nil)] {
            try write("social.json", changed)
            let refused = #expect(throws: TenantFileError.self) { try server.gatehouse.apps.applyTenants(folder: folder, environment: [:]) }
            #expect(refused?.problems.first?.contains("The provider social has users") == true, "\(String(describing: refused))")
        }
        let now = try #require(try server.gatehouse.directory.app(key: "pk_tenant_social_0123456789"))
        #expect(now.settings.oidcProviders.first?.kind == .kakao)
        // Its client ids may change.
        try write("social.json", file(["id": "social", "kind": "kakao", "client_ids": ["kakao-key", "kakao-rest-key"]]))
        #expect(try server.gatehouse.apps.applyTenants(folder: folder, environment: [:]) == ["social.json: updated \(context.id.rawValue)"])
    }

    /// A webhook secret changed in a Tenants file keeps the replaced one for 24 hours of double
    /// signatures, as a change through the admin API does.
    @Test(arguments: TestDatabase.kinds)
    func aWebhookSecretChangedInATenantsFileSignsWithBothFor24Hours(_ kind: TestDatabaseKind) throws {
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let old = "whsec_" + Data(repeating: 0x11, count: 32).base64EncodedString()
        let new = "whsec_" + Data(repeating: 0x22, count: 32).base64EncodedString()
        func file(_ secret: String) -> JSON {
            ["app_key": "pk_tenant_hooks_0123456789", "name": "Hooks",
             "webhooks": [["url": "https://hooks.example.com/in", "secret": .string(secret), "events": ["user.created"]]]]
        }
        try write("hooks.json", file(old))
        let clock = ManualClock()
        let server = try TestServer(kind, clock: clock) { $0.tenantsDirectory = folder }
        defer { server.stop() }
        let first = try #require(try server.gatehouse.directory.app(key: "pk_tenant_hooks_0123456789"))
        #expect(first.settings.webhooks[0].signingKeys(now: clock.nowMillis()).count == 1)
        try write("hooks.json", file(new))
        #expect(try server.gatehouse.apps.applyTenants(folder: folder, environment: [:]) == ["hooks.json: updated \(first.id.rawValue)"])
        let changed = try #require(try server.gatehouse.directory.app(key: "pk_tenant_hooks_0123456789"))
        let hook = changed.settings.webhooks[0]
        #expect(hook.signingKeys(now: clock.nowMillis()) == [AppSettings.Webhook.key(ofSecret: new)!, AppSettings.Webhook.key(ofSecret: old)!])
        #expect(hook.signingKeys(now: clock.nowMillis() + 24 * 3600 * 1000) == [AppSettings.Webhook.key(ofSecret: new)!])
    }

    @Test(arguments: TestDatabase.kinds)
    func aBadTenantsFileStopsTheStartWithEveryProblem(_ kind: TestDatabaseKind) throws {
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // A bad app_key too: it is one problem among the others, not the only one reported.
        try write("bad.json", ["app_key": "short", "name": "", "unknown": true, "email": ["smtp_password_env": "NOT_SET_ANYWHERE"]])
        #expect {
            try TestServer(kind) { $0.tenantsDirectory = folder }
        } throws: { error in
            let text = String(describing: error)
            return text.contains("bad.json") && text.contains("app_key") && text.contains("name") && text.contains("unknown") && text.contains("NOT_SET_ANYWHERE")
        }
    }

    @Test
    func theShippedDemoTenantIsValid() throws {
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let server = try TestServer(.sqlite) { $0.tenantsDirectory = root.appendingPathComponent("Tenants").path }
        defer { server.stop() }
        let app = try server.request("GET", "/v1/app", appKey: "pk_demo_gatehouse_local_only")
        #expect(app.status == 200)
    }
}
