import Foundation
import Synchronization
import GatehouseCore
import GatehouseCrypto
import GatehouseTesting
import Testing

/// What the outside audit found (issue 10), each as the audit's own probe: every test here failed
/// before its fix.
@Suite("Hardening after the audit")
struct HardeningAPITests {
    static let verifier = "a-long-enough-code-verifier-0123456789-abcdefghijklmnop"
    static let challenge = Base64URL.encode(Digest.sha256(Array(verifier.utf8)))

    func authorize(_ world: ProviderWorld, redirect: String = ProviderWorld.redirect, pkce: Bool = true, headers: [(String, String)] = []) throws -> TestResponse {
        var query = "app_key=\(world.app.appKey)&redirect_uri=\(redirect.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)"
        if pkce { query += "&code_challenge=\(Self.challenge)&code_challenge_method=S256" }
        return try world.server.request("GET", "/v1/auth/oauth/apple/authorize?\(query)", headers: headers)
    }

    /// The login code a finished web flow hands to the page.
    func loginCode(_ world: ProviderWorld, after authorized: TestResponse, sub: String) throws -> String {
        let items = try #require(authorized.header("Location").flatMap { URLComponents(string: $0) }?.queryItems)
        let state = try #require(items.first { $0.name == "state" }?.value)
        let nonce = try #require(items.first { $0.name == "nonce" }?.value)
        let cookie = try #require(authorized.header("Set-Cookie")).prefix { $0 != ";" }
        let code = world.apple.issueCode(for: FakeAppleUser(sub: sub, email: "\(sub)@example.com", nonce: nonce), clientID: ProviderWorld.servicesID)
        let body = "state=\(state)&code=\(code.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)"
        let back = try world.server.request(
            "POST", "/v1/auth/oauth/apple/callback", headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Cookie", String(cookie))],
            body: Array(body.utf8))
        return try #require(back.header("Location").flatMap { URLComponents(string: $0) }?.queryItems?.first { $0.name == "login_code" }?.value)
    }

    // MARK: - Must fix 1: PKCE

    @Test(arguments: TestDatabase.kinds)
    func theWebFlowRequiresPKCEUnlessAnHTTPSAppOptsOut(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind)
        defer { world.stop() }
        let refused = try authorize(world, pkce: false)
        #expect(refused.status == 400)
        #expect(refused.problemCode == "request/validation-failed")
        #expect(refused.json?["errors"]?.arrayValue?.first?["field"] == "code_challenge")
        #expect(try authorize(world).status == 302)

        // Opting out works for https redirect URIs only: an app scheme or a loopback page can be
        // received by another program on the device.
        let local = "http://localhost:3000/auth/callback"
        let patched = try world.server.request(
            "PATCH", "/v1/admin/app", bearer: world.app.secretKey, json: ["require_pkce": false, "redirect_uris": [.string(ProviderWorld.redirect), .string(local)]])
        #expect(patched.data?["require_pkce"] == false)
        #expect(try authorize(world, pkce: false).status == 302)
        let loopback = try authorize(world, redirect: local, pkce: false)
        #expect(loopback.problemCode == "request/validation-failed")
        #expect(try authorize(world, redirect: local).status == 302)
    }

    /// RFC 9700 §4.8.2: an attacker's login code (from a flow without PKCE) swapped into a victim's
    /// page, which sends its own verifier, must not sign the victim in as the attacker.
    @Test(arguments: TestDatabase.kinds)
    func aVerifierForAFlowThatHadNoChallengeIsRefused(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind, settings: ["require_pkce": false])
        defer { world.stop() }
        let attackersCode = try loginCode(world, after: try authorize(world, pkce: false), sub: "attacker.1")
        let swapped = try world.server.request(
            "POST", "/v1/auth/exchange", appKey: world.app.appKey, json: ["login_code": .string(attackersCode), "code_verifier": .string(Self.verifier)])
        #expect(swapped.status == 400)
        #expect(swapped.problemCode == "auth/invalid-login-code")
        // Without a verifier such a code still works, for an app that chose no PKCE.
        let plain = try loginCode(world, after: try authorize(world, pkce: false), sub: "plain.1")
        #expect(try world.server.request("POST", "/v1/auth/exchange", appKey: world.app.appKey, json: ["login_code": .string(plain)]).status == 201)
    }

    // MARK: - Must fix 2: stale and replayed provider tokens

    @Test(arguments: TestDatabase.kinds)
    func reauthenticationNeedsARecentNonceBoundProviderToken(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind)
        defer { world.stop() }
        let token = try #require(try world.server.signUp(world.app, email: "pat@example.com")["access_token"]?.stringValue)
        func google(_ nonce: String?, issuedAgo: Int64 = 0) -> String {
            world.google.mintIDToken(
                sub: "g-pat", aud: ProviderWorld.googleClient, email: "pat@example.com", nonce: nonce, issuedAt: world.clock.nowSeconds - issuedAgo,
                expiresAt: world.clock.nowSeconds - issuedAgo + 3600)
        }
        func reauthenticate(_ body: JSON) throws -> TestResponse {
            try world.server.request("POST", "/v1/auth/reauthenticate", appKey: world.app.appKey, bearer: token, json: body)
        }
        let linked = try world.server.request(
            "POST", "/v1/me/identities/google", appKey: world.app.appKey, bearer: token, json: ["id_token": .string(google("n1")), "nonce": "n1"])
        #expect(linked.status == 200)

        // The audit's probe: a token issued 55 minutes ago, without a nonce.
        let noNonce = try reauthenticate(["provider": "google", "id_token": .string(google(nil, issuedAgo: 3300))])
        #expect(noNonce.status == 400)
        #expect(noNonce.json?["errors"]?.arrayValue?.first?["field"] == "nonce")
        let stale = try reauthenticate(["provider": "google", "id_token": .string(google("n2", issuedAgo: 3300)), "nonce": "n2"])
        #expect(stale.status == 401)
        #expect(stale.problemCode == "auth/invalid-credential")
        // Within recent_login_seconds (300) and the 60 s leeway: accepted, once.
        let recent = google("n3", issuedAgo: 350)
        #expect(try reauthenticate(["provider": "google", "id_token": .string(recent), "nonce": "n3"]).status == 200)
        let replayed = try reauthenticate(["provider": "google", "id_token": .string(recent), "nonce": "n3"])
        #expect(replayed.status == 401)
        #expect(replayed.problemCode == "auth/invalid-credential")
    }

    @Test(arguments: TestDatabase.kinds)
    func aProviderTokenWithANonceSignsInOnceOnEveryNode(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind)
        defer { world.stop() }
        let googleURL = world.google.keysURL
        let other = try TestServer(anotherNodeOf: world.server, clock: world.clock) { $0.googleJWKSURL = googleURL }
        defer { other.stop() }
        // The second node verifies tokens like the first (so its 401 below is the replay, not its keys).
        let itsOwn = world.google.mintIDToken(sub: "g-other-node", aud: ProviderWorld.googleClient, email: "node@example.com", nonce: "own")
        #expect(try other.request("POST", "/v1/auth/oauth/google", appKey: world.app.appKey, json: ["id_token": .string(itsOwn), "nonce": "own"]).status == 201)
        let googleToken = world.google.mintIDToken(sub: "g-once", aud: ProviderWorld.googleClient, email: "once@example.com", nonce: "once")
        let body: JSON = ["id_token": .string(googleToken), "nonce": "once"]
        #expect(try world.server.request("POST", "/v1/auth/oauth/google", appKey: world.app.appKey, json: body).status == 201)
        for node in [world.server, other] {
            let replay = try node.request("POST", "/v1/auth/oauth/google", appKey: world.app.appKey, json: body)
            #expect(replay.status == 401)
            #expect(replay.problemCode == "auth/invalid-credential")
        }
        let apple: JSON = ["identity_token": .string(world.appleToken(sub: "001.once", nonce: "apple-once")), "nonce": "apple-once"]
        #expect(try world.appleSignIn(apple).status == 201)
        #expect(try world.appleSignIn(apple).problemCode == "auth/invalid-credential")
        // A sign-in that Apple's token endpoint could not finish (503, "retry later") gives its
        // token back: the retry with the same token and nonce is not a replay.
        let code = world.apple.issueCode(for: FakeAppleUser(sub: "001.retry", nonce: ProviderWorld.hash("retry")), clientID: ProviderWorld.bundleID)
        let withCode: JSON = [
            "identity_token": .string(world.appleToken(sub: "001.retry", email: "retry@example.com", nonce: "retry")), "nonce": "retry",
            "authorization_code": .string(code),
        ]
        // Apple's keys are cached by now (the sign-in above): the next request to the fake is /auth/token.
        world.apple.failNextRequests(1)
        #expect(try world.appleSignIn(withCode).problemCode == "provider/unavailable")
        #expect(try world.appleSignIn(withCode).status == 201)
        #expect(try world.appleSignIn(withCode).problemCode == "auth/invalid-credential")
        // The same nonce in another user's token is another token.
        let second = world.google.mintIDToken(sub: "g-twice", aud: ProviderWorld.googleClient, email: "twice@example.com", nonce: "once")
        #expect(try world.server.request("POST", "/v1/auth/oauth/google", appKey: world.app.appKey, json: ["id_token": .string(second), "nonce": "once"]).status == 201)
    }

    // MARK: - Must fix 3: unauthenticated writes of the web flow

    @Test(arguments: TestDatabase.kinds)
    func theWebFlowIsLimitedPerIPAndExpiredFlowsAreDeleted(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind, settings: ["rate_limits": ["auth_per_minute_per_ip": 1000, "web_flow_per_minute_per_ip": 3]])
        defer { world.stop() }
        // Start a minute with room for three.
        world.clock.advance(seconds: 60 - world.clock.nowSeconds % 60)
        for _ in 0..<3 { #expect(try authorize(world).status == 302) }
        let limited = try authorize(world)
        #expect(limited.status == 429)
        #expect(limited.problemCode == "auth/too-many-requests")
        #expect(limited.header("Retry-After").flatMap(Int.init).map { (1...60).contains($0) } == true)
        func flows() throws -> Int { try world.server.gatehouse.database.query("SELECT id FROM web_flows").count }
        #expect(try flows() == 3)
        // Ten minutes on, the next flow stored clears the expired ones.
        world.clock.advance(seconds: 11 * 60)
        #expect(try authorize(world).status == 302)
        #expect(try flows() == 1)
    }

    /// The callback counts in the same bucket; one it refuses leaves the flow for a retry.
    @Test(arguments: TestDatabase.kinds)
    func aCallbackOverTheLimitLeavesItsFlowForARetry(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind, settings: ["rate_limits": ["auth_per_minute_per_ip": 1000, "web_flow_per_minute_per_ip": 2]])
        defer { world.stop() }
        world.clock.advance(seconds: 60 - world.clock.nowSeconds % 60)
        let first = try authorize(world)
        #expect(try authorize(world).status == 302)
        let items = try #require(first.header("Location").flatMap { URLComponents(string: $0) }?.queryItems)
        let state = try #require(items.first { $0.name == "state" }?.value)
        let nonce = try #require(items.first { $0.name == "nonce" }?.value)
        let cookie = String(try #require(first.header("Set-Cookie")).prefix { $0 != ";" })
        func callback() throws -> TestResponse {
            let code = world.apple.issueCode(for: FakeAppleUser(sub: "limited.1", email: "limited@example.com", nonce: nonce), clientID: ProviderWorld.servicesID)
            return try world.server.request(
                "POST", "/v1/auth/oauth/apple/callback", headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Cookie", cookie)],
                body: Array("state=\(state)&code=\(code.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)".utf8))
        }
        let limited = try callback()
        #expect(limited.status == 429)
        #expect(limited.problemCode == "auth/too-many-requests")
        world.clock.advance(seconds: 60)
        let finished = try callback()
        #expect(finished.status == 303)
        #expect(finished.header("Location")?.contains("login_code=") == true)
    }

    // MARK: - Must fix 4: guessing one account's password

    @Test(arguments: TestDatabase.kinds)
    func passwordGuessesAreLimitedPerAccountWhateverTheAddress(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock()
        let server = try TestServer(kind, clock: clock) { $0.trustedProxies = ["127.0.0.1/32"] }
        defer { server.stop() }
        let app = try server.createApp(["name": "Guarded", "rate_limits": ["auth_per_minute_per_ip": 1000]])
        _ = try server.signUp(app, email: "ada@example.com", password: "correct horse battery")
        clock.advance(seconds: (900 - clock.nowSeconds % 900) % 900)
        var address = 0
        func signIn(_ email: String, _ password: String) throws -> TestResponse {
            // A botnet: every guess from another address.
            address += 1
            return try server.request(
                "POST", "/v1/auth/signin", appKey: app.appKey, headers: [("X-Forwarded-For", "203.0.113.\(address % 250)")],
                json: ["email": .string(email), "password": .string(password)])
        }
        for email in ["ada@example.com", "nobody@example.com"] {
            for _ in 0..<10 { #expect(try signIn(email, "wrong password").problemCode == "auth/invalid-credential") }
            // The 11th try in 15 minutes is refused whatever it holds, for a known and an unknown email alike.
            let limited = try signIn(email, "correct horse battery")
            #expect(limited.status == 429)
            #expect(limited.problemCode == "auth/too-many-requests")
            #expect(limited.header("Retry-After").flatMap(Int.init).map { (1...900).contains($0) } == true)
        }
        // Email case does not make another account.
        #expect(try signIn("ADA@example.com", "correct horse battery").status == 429)
        clock.advance(seconds: 900)
        #expect(try signIn("ada@example.com", "correct horse battery").status == 200)
        // A success forgets the typos before it.
        for _ in 0..<5 { _ = try signIn("ada@example.com", "wrong password") }
        #expect(try signIn("ada@example.com", "correct horse battery").status == 200)
        for _ in 0..<10 { #expect(try signIn("ada@example.com", "wrong password").status == 400) }
        // Failures count, not tries: however many right passwords arrive at once, none is refused.
        clock.advance(seconds: 900)
        let statuses = Mutex<[Int]>([])
        DispatchQueue.concurrentPerform(iterations: 24) { i in
            let status = (try? server.request(
                "POST", "/v1/auth/signin", appKey: app.appKey, headers: [("X-Forwarded-For", "198.51.100.\(i)")],
                json: ["email": "ada@example.com", "password": "correct horse battery"]).status) ?? 0
            statuses.withLock { $0.append(status) }
        }
        // 503 server/busy is the hasher's queue, not the limiter.
        #expect(statuses.withLock { $0.allSatisfy { $0 == 200 || $0 == 503 } && $0.contains(200) })
    }

    @Test(arguments: TestDatabase.kinds)
    func reauthenticationAndPasswordChangesAreLimitedPerUser(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock()
        let server = try TestServer(kind, clock: clock)
        defer { server.stop() }
        let app = try server.createApp(["name": "Guarded", "rate_limits": ["auth_per_minute_per_ip": 1000]])
        let token = try #require(try server.signUp(app)["access_token"]?.stringValue)
        let otherToken = try #require(try server.signUp(app, email: "bea@example.com")["access_token"]?.stringValue)
        // To the start of a 15-minute window; not a whole 900 s when already there, which would
        // expire the 15-minute access tokens just issued.
        clock.advance(seconds: (900 - clock.nowSeconds % 900) % 900)
        func reauthenticate(_ password: String, as bearer: String? = nil) throws -> TestResponse {
            try server.request("POST", "/v1/auth/reauthenticate", appKey: app.appKey, bearer: bearer ?? token, json: ["password": .string(password)])
        }
        // A success forgets the failures before it.
        for _ in 0..<9 { #expect(try reauthenticate("wrong password").problemCode == "auth/invalid-credential") }
        #expect(try reauthenticate("correct horse battery").status == 200)
        // A stolen access token guesses the current password at reauthentication and at password change alike.
        for _ in 0..<5 { #expect(try reauthenticate("wrong password").problemCode == "auth/invalid-credential") }
        for _ in 0..<5 {
            let change = try server.request(
                "PUT", "/v1/me/password", appKey: app.appKey, bearer: token, json: ["current_password": "wrong password", "password": "a new password"])
            #expect(change.problemCode == "auth/invalid-credential")
        }
        #expect(try reauthenticate("correct horse battery").problemCode == "auth/too-many-requests")
        // Per user: another user of the app is not held back.
        #expect(try reauthenticate("correct horse battery", as: otherToken).status == 200)
    }

    // MARK: - Must fix 5: secrets and the Tenants/ checksum

    @Test(arguments: TestDatabase.kinds)
    func theTenantsChecksumIsKeyedAndSecretsAreSealedUnderADerivedKey(_ kind: TestDatabaseKind) throws {
        let folder = NSTemporaryDirectory() + "gatehouse-tenants-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let file: JSON = [
            "app_key": "pk_checksum_test_0123456789", "name": "Checksum", "email": ["smtp_url": "smtp://127.0.0.1:2525", "smtp_password": "hunter2"],
        ]
        try Data(file.serialized()).write(to: URL(fileURLWithPath: folder + "/app.json"))
        let server = try TestServer(kind) { $0.tenantsDirectory = folder }
        defer { server.stop() }
        let database = server.gatehouse.database
        let row = try database.query("SELECT id, settings, source_checksum FROM apps")[0]
        let checksum = try #require(try row.optionalString("source_checksum"))
        // The audit recovered `hunter2` by hashing guesses of the settings: the plain SHA-256 of
        // the settings is no longer what is stored.
        let context = try #require(try server.gatehouse.directory.app(key: "pk_checksum_test_0123456789"))
        #expect(checksum != Digest.hex(Digest.sha256(context.settings.json(secrets: .plain).serialized())))
        #expect(checksum.utf8.count == 64)
        #expect(try row.string("settings").contains(#"{"sealed":"v2."#))

        // Migration 0006 moved the old, unkeyed checksum aside. An admin edit made since (here after
        // the upgrade) survives the next apply of the unchanged file, which stores the keyed
        // checksum, drops the old one and records no settings change.
        func settingsChanges() throws -> Int { try database.query("SELECT id FROM events WHERE type = 'app.settings_changed'").count }
        let unkeyed = Digest.hex(Digest.sha256(context.settings.json(secrets: .plain).serialized()))
        try database.execute("UPDATE apps SET legacy_source_checksum = \(unkeyed), source_checksum = NULL")
        let id = try row.string("id")
        let admin = try server.gatehouse.apps.rotateSecretKey(try #require(try server.gatehouse.directory.app(id: AppID(unchecked: id))))
        #expect(try server.request("PATCH", "/v1/admin/app", bearer: admin, json: ["allow_signup": false]).status == 200)
        let eventsBefore = try settingsChanges()
        #expect(try server.gatehouse.apps.applyTenants(folder: folder, environment: [:]) == ["app.json: unchanged \(id)"])
        let after = try database.query("SELECT source_checksum, legacy_source_checksum FROM apps")[0]
        #expect(try after.optionalString("source_checksum") == checksum)
        #expect(try after.optionalString("legacy_source_checksum") == nil)
        #expect(try settingsChanges() == eventsBefore)
        #expect(try server.request("GET", "/v1/admin/app", bearer: admin).data?["allow_signup"] == false)
        // A file changed meanwhile replaces the settings, as any changed file does.
        try database.execute("UPDATE apps SET legacy_source_checksum = \(unkeyed), source_checksum = NULL")
        try Data(JSON.object(["app_key": "pk_checksum_test_0123456789", "name": "Renamed"]).serialized()).write(to: URL(fileURLWithPath: folder + "/app.json"))
        #expect(try server.gatehouse.apps.applyTenants(folder: folder, environment: [:]) == ["app.json: updated \(id)"])
        #expect(try database.query("SELECT legacy_source_checksum FROM apps")[0].optionalString("legacy_source_checksum") == nil)
    }

    /// An app named before format characters were refused keeps working; a change mends the name.
    @Test(arguments: TestDatabase.kinds)
    func anAppNamedWithAFormatCharacterBeforeStillWorks(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(["name": "Shalom"])
        let database = server.gatehouse.database
        try database.execute("UPDATE apps SET settings = replace(settings, '\"name\":\"Shalom\"', \("\"name\":\"Shalom\u{200F}\"")), version = version + 1")
        #expect(try database.query("SELECT settings FROM apps")[0].string("settings").contains("\u{200F}"))
        server.gatehouse.directory.invalidate(AppID(unchecked: app.id))
        #expect(try server.request("GET", "/v1/app", appKey: app.appKey).status == 200)
        let unmended = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["allow_signup": false])
        #expect(unmended.json?["errors"]?.arrayValue?.first?["field"] == "name")
        #expect(try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["name": "Shalom", "allow_signup": false]).status == 200)
    }

    /// A sender and webhook events stored under an earlier version's looser rules still load.
    @Test(arguments: TestDatabase.kinds)
    func anAppSavedUnderLooserMailAndWebhookRulesStillWorks(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp([
            "name": "Older", "email": ["from": "no-reply@older.example"],
            "webhooks": [["url": "https://hooks.example.com/a", "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "events": ["user.deleted"]]],
        ])
        let database = server.gatehouse.database
        try database.execute("""
            UPDATE apps SET settings = replace(replace(settings, '"no-reply@older.example"', '"support@older.example (Older)"'), '"user.deleted"', '"user.signed_up"'),
                            version = version + 1
            """)
        #expect(try database.query("SELECT settings FROM apps")[0].string("settings").contains("user.signed_up"))
        server.gatehouse.directory.invalidate(AppID(unchecked: app.id))
        #expect(try server.request("GET", "/v1/app", appKey: app.appKey).status == 200)
        let unmended = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["allow_signup": false])
        #expect(unmended.status == 400)
    }

    /// An address stored before emails were put in NFC still signs in, typed as it was then.
    @Test(arguments: TestDatabase.kinds)
    func anAccountStoredBeforeNFCStillSignsIn(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(["name": "Old accounts", "rate_limits": ["auth_per_minute_per_ip": 1000]])
        _ = try server.signUp(app, email: "renee@example.com")
        let decomposed = "rene\u{0301}e@example.com"
        try server.gatehouse.database.execute("UPDATE users SET email = \(decomposed)")
        try server.gatehouse.database.execute("UPDATE identities SET subject = \(decomposed), email = \(decomposed)")
        let signedIn = try server.request(
            "POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": .string(decomposed), "password": "correct horse battery"])
        #expect(signedIn.status == 200)
    }

    /// Settings stored before the ceiling of 1000 (up to 10000 was allowed) still load, as 1000.
    @Test(arguments: TestDatabase.kinds)
    func anAppStoredAboveTheNewCeilingStillWorks(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(["name": "Old", "rate_limits": ["auth_per_minute_per_ip": 1000]])
        let database = server.gatehouse.database
        try database.execute("UPDATE apps SET settings = replace(settings, '\"auth_per_minute_per_ip\":1000', '\"auth_per_minute_per_ip\":5000'), version = version + 1")
        #expect(try database.query("SELECT settings FROM apps")[0].string("settings").contains("5000"))
        server.gatehouse.directory.invalidate(AppID(unchecked: app.id))
        #expect(try server.request("GET", "/v1/app", appKey: app.appKey).status == 200)
        #expect(try server.request("GET", "/v1/admin/app", bearer: app.secretKey).data?["rate_limits"]?["auth_per_minute_per_ip"] == 1000)
    }

    // MARK: - Also fix: Gatehouse's own access tokens

    @Test(arguments: TestDatabase.kinds)
    func tokensSignedWithTheAppsKeyButNotAsGatehouseSignsThemAreRefused(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(["name": "Keys"])
        let issued = try #require(try server.signUp(app)["access_token"]?.stringValue)
        let claims = try #require(try JSON.parse(JWT.parse(issued).payload).objectValue)
        let keyRow = try server.gatehouse.database.query("SELECT kid, private_key FROM signing_keys WHERE app_id = \(app.id) AND state = 'current'")[0]
        let kid = try keyRow.string("kid")
        let pem = try SecretSealer(masterKey: Array(repeating: 7, count: 32)).open(
            try keyRow.string("private_key"), app: AppID(unchecked: app.id), field: "signing_key/\(kid)")
        let key = try SigningKey(pem: pem, algorithm: .rs256)
        func forged(iat: Int64, exp: Int64) throws -> TestResponse {
            var forgedClaims = claims
            (forgedClaims["iat"], forgedClaims["exp"]) = (.int(iat), .int(exp))
            let token = try JWT.sign(payload: JSON.object(forgedClaims).serialized(), key: key, kid: kid, type: "at+jwt")
            return try server.request("GET", "/v1/me", appKey: app.appKey, bearer: token)
        }
        let now = Int64(Date().timeIntervalSince1970)
        // The same key and claims with honest times: accepted (so the two below fail for their times).
        #expect(try forged(iat: now, exp: now + 900).status == 200)
        let future = try forged(iat: now + 120, exp: now + 1000)
        #expect(future.status == 401)
        #expect(future.problemCode == "auth/invalid-token")
        let tooLong = try forged(iat: now - 10, exp: now - 10 + 86401)
        #expect(tooLong.problemCode == "auth/invalid-token")
    }

    @Test(arguments: TestDatabase.kinds)
    func aLeakedSigningKeyIsRevokedAtOnceAndRotationIsBounded(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock()
        let server = try TestServer(kind, clock: clock)
        defer { server.stop() }
        let app = try server.createApp(["name": "Keys"])
        let oldToken = try #require(try server.signUp(app)["access_token"]?.stringValue)
        let oldKid = try #require(try JWT.parse(oldToken).header.kid)
        func rotate(_ query: String = "") throws -> TestResponse {
            try server.request("POST", "/v1/admin/app/signing-keys/rotate\(query)", bearer: app.secretKey)
        }
        func kids() throws -> [String] {
            try server.request("GET", "/v1/apps/\(app.id)/jwks.json").json?["keys"]?.arrayValue?.compactMap { $0["kid"]?.stringValue } ?? []
        }
        let tooSoon = try rotate()
        #expect(tooSoon.status == 429)
        #expect(tooSoon.problemCode == "auth/too-many-requests")
        #expect(tooSoon.header("Retry-After").flatMap(Int.init).map { (1...60).contains($0) } == true)
        #expect(try rotate("?revoke_previous=maybe").problemCode == "request/validation-failed")

        clock.advance(seconds: 61)
        #expect(try rotate("?revoke_previous=true").status == 200)
        #expect(try !kids().contains(oldKid))
        let refused = try server.request("GET", "/v1/me", appKey: app.appKey, bearer: oldToken)
        #expect(refused.status == 401)
        #expect(refused.problemCode == "auth/invalid-token")

        // However often an admin rotates, the JWKS holds the signing key, the next one and at most three retired.
        for _ in 0..<5 {
            clock.advance(seconds: 61)
            #expect(try rotate().status == 200)
        }
        #expect(try kids().count == 5)
    }

    // MARK: - Also fix: unverified provider emails

    @Test(arguments: TestDatabase.kinds)
    func unverifiedProviderEmailsNeitherCollideNorBecomePasswordEmails(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind)
        defer { world.stop() }
        func google(_ sub: String, verified: Bool, nonce: String) throws -> TestResponse {
            let token = world.google.mintIDToken(sub: sub, aud: ProviderWorld.googleClient, email: "pat@example.com", emailVerified: .bool(verified), nonce: nonce)
            return try world.server.request("POST", "/v1/auth/oauth/google", appKey: world.app.appKey, json: ["id_token": .string(token), "nonce": .string(nonce)])
        }
        // Pre-account takeover: whoever typed pat's address into a provider does not own it here.
        let squatter = try google("g-squatter", verified: false, nonce: "s1")
        #expect(squatter.status == 201)
        #expect(squatter.data?["user"]?["email_verified"] == false)
        #expect(try world.server.request("POST", "/v1/auth/signup", appKey: world.app.appKey, json: ["email": "pat@example.com", "password": "correct horse battery"]).status == 201)
        let squatterToken = try #require(squatter.data?["access_token"]?.stringValue)
        let addPassword = try world.server.request(
            "POST", "/v1/me/identities/password", appKey: world.app.appKey, bearer: squatterToken, json: ["password": "another long password"])
        #expect(addPassword.status == 400)
        #expect(addPassword.json?["errors"]?.arrayValue?.first?["field"] == "email")
        // Pat's own password account is no reason to refuse another unverified claim either; a verified one collides.
        #expect(try google("g-other", verified: false, nonce: "s2").status == 201)
        #expect(try google("g-verified", verified: true, nonce: "s3").problemCode == "auth/account-exists-with-different-credential")
    }

    // MARK: - Also fix: settings limits and what is advertised

    @Test(arguments: TestDatabase.kinds)
    func perIPLimitsHaveADocumentedCeiling(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        for field in ["auth_per_minute_per_ip", "web_flow_per_minute_per_ip"] {
            let over = try server.request("POST", "/v1/admin/apps", bearer: TestServer.adminToken, json: ["name": "Busy", "rate_limits": [field: 1001]])
            #expect(over.status == 400)
            #expect(over.json?["errors"]?.arrayValue?.first?["field"] == .string("rate_limits.\(field)"))
            #expect(try server.request("POST", "/v1/admin/apps", bearer: TestServer.adminToken, json: ["name": "Busy", "rate_limits": [field: 1000]]).status == 201)
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func theAppsMethodsAndIssuedClaimsAreAdvertised(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let plain = try server.createApp(["name": "Defaults"])
        #expect(try server.request("GET", "/v1/app", appKey: plain.appKey).data?["sign_in_methods"] == ["password", "apple", "google"])
        let ahead = try server.createApp(["name": "Ahead", "sign_in_methods": ["password", "email_code"]])
        #expect(try server.request("GET", "/v1/app", appKey: ahead.appKey).data?["sign_in_methods"] == ["password", "email_code"])
        let discovery = try server.request("GET", "/v1/apps/\(plain.id)/.well-known/openid-configuration").json
        // Exactly the claims tokens carry (`picture` too, now that users have photos); that a token
        // carries no other is checked in StandardTokensAPITests.
        #expect(discovery?["claims_supported"] == .array(TokenService.accessTokenClaims.map(JSON.string)))
    }
}

/// HKDF and the sealer's key versions, without a server.
@Suite("Keys derived from the master key")
struct MasterKeyDerivationTests {
    @Test func hkdfMatchesRFC5869() {
        // RFC 5869 appendix A, test cases 1 and 3.
        let ikm = [UInt8](repeating: 0x0b, count: 22)
        let one = HKDF.sha256(key: ikm, salt: Array(0x00...0x0c), info: Array(0xf0...0xf9), length: 42)
        #expect(Digest.hex(one) == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865")
        let three = HKDF.sha256(key: ikm, info: [], length: 42)
        #expect(Digest.hex(three) == "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8")
    }

    @Test func everyPurposeHasItsOwnKeyAndNoneIsTheMasterKey() {
        let master = [UInt8](repeating: 7, count: 32)
        let keys = MasterKeyDerivation.Purpose.allCases.map { MasterKeyDerivation.key(for: $0, from: master) }
        #expect(Set(keys.map(Digest.hex)).count == keys.count)
        #expect(!keys.contains(master))
    }

    @Test func secretsSealedUnderTheMasterKeyItselfStillOpen() throws {
        let master = [UInt8](repeating: 7, count: 32)
        let sealer = try SecretSealer(masterKey: master)
        let app = AppID(unchecked: "app_test")
        let sealed = sealer.seal("hunter2", app: app, field: "email.smtp_password")
        #expect(sealed.hasPrefix("v2."))
        #expect(try sealer.open(sealed, app: app, field: "email.smtp_password") == "hunter2")
        // What an earlier version wrote: AES-GCM under the master key, prefixed v1.
        let legacy = "v1." + Base64URL.encode(try AESGCM(key: master).seal(Array("hunter2".utf8), associatedData: Array("gatehouse/app_test/email.smtp_password".utf8)))
        #expect(try sealer.open(legacy, app: app, field: "email.smtp_password") == "hunter2")
        // A v2 value is not a v1 value: the master key itself does not open it.
        #expect(throws: CryptoError.self) { try sealer.open("v1." + sealed.dropFirst(3), app: app, field: "email.smtp_password") }
    }
}
