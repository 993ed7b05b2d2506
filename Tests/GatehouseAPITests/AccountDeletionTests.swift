import Foundation
import GatehouseCore
import GatehouseCrypto
import GatehouseTesting
import Synchronization
import Testing

/// `DELETE /v1/me` and `DELETE /v1/admin/users/{id}`: sessions end, the account is erased (or
/// waits out the app's grace period), and its Apple tokens are revoked at the fake Apple through
/// the outbox — after outages and node deaths too. Both databases.
@Suite("Account deletion and Apple token revocation")
struct AccountDeletionTests {
    /// A provider world whose outbox and periodic jobs the test steps by hand.
    func world(_ kind: TestDatabaseKind, settings: [String: JSON] = [:]) throws -> ProviderWorld {
        let world = try ProviderWorld(kind, settings: settings)
        world.server.gatehouse.stopBackgroundWork()
        return world
    }

    /// Signs in with Apple natively with an authorization code, so that Apple's refresh token is kept.
    func appleUserWithStoredToken(_ world: ProviderWorld, sub: String = "001.apple.user", email: String = "pat@example.com", nonce: String = "raw-nonce-1") throws -> JSON {
        let code = world.apple.issueCode(for: FakeAppleUser(sub: sub, email: email, nonce: ProviderWorld.hash(nonce)), clientID: ProviderWorld.bundleID)
        let response = try world.appleSignIn([
            "identity_token": .string(world.appleToken(sub: sub, email: email, nonce: nonce)), "nonce": .string(nonce), "authorization_code": .string(code),
        ])
        #expect(response.status == 201 || response.status == 200, "\(response.text)")
        return try #require(response.data)
    }

    func deleteMe(_ world: ProviderWorld, _ session: JSON, json: JSON? = nil) throws -> TestResponse {
        try world.server.request("DELETE", "/v1/me", appKey: world.app.appKey, bearer: session["access_token"]?.stringValue, json: json)
    }

    func events(_ world: ProviderWorld, type: String) throws -> [JSON] {
        try world.server.request("GET", "/v1/admin/events?type=\(type)", bearer: world.app.secretKey).json?["data"]?.arrayValue ?? []
    }

    /// Apple's `/auth/revoke` calls made so far, as (client_id, token).
    func revocations(_ world: ProviderWorld) -> [String] {
        world.apple.revokeCalls.map { "\($0["client_id"] ?? "")|\($0["token"] ?? "")|\($0["token_type_hint"] ?? "")" }.sorted()
    }

    @Test(arguments: TestDatabase.kinds)
    func deletingRevokesEveryStoredAppleTokenWithItsClientIDAndAValidClientSecret(_ kind: TestDatabaseKind) throws {
        let world = try world(kind)
        defer { world.stop() }
        let session = try appleUserWithStoredToken(world)
        let userID = try #require(session["user"]?["id"]?.stringValue)
        // A second token, for the Services ID (as the web flow keeps one).
        let app = AppID(unchecked: world.app.id)
        let sealer = world.server.gatehouse.sealer
        try world.server.gatehouse.store.app(app).identities.saveProviderToken(
            UserID(unchecked: userID), provider: .apple, clientID: ProviderWorld.servicesID,
            sealedToken: sealer.seal("rt-web-1", app: app, field: StoredProviderToken.appleFieldName(user: UserID(unchecked: userID), clientID: ProviderWorld.servicesID)),
            now: world.clock.nowMillis())
        let nativeToken = try #require(world.apple.issuedRefreshTokens.first)

        let deleted = try deleteMe(world, session, json: ["reason": "moving away"])
        #expect(deleted.status == 204)
        #expect(try world.server.request("GET", "/v1/me", appKey: world.app.appKey, bearer: session["access_token"]?.stringValue).problemCode == "auth/session-revoked")
        #expect(try world.server.request("POST", "/v1/auth/refresh", appKey: world.app.appKey, json: ["refresh_token": session["refresh_token"]!]).status == 401)
        #expect(try deleteMe(world, session).status == 401, "a deletion retried after success")
        #expect(try world.server.gatehouse.database.query("SELECT 1 AS found FROM provider_tokens").isEmpty)
        #expect(try world.server.gatehouse.database.query("SELECT 1 AS found FROM identities").isEmpty)
        let tombstone = try world.server.gatehouse.database.query("SELECT email, first_name, deleted_at FROM users WHERE id = \(userID)")
        #expect(try tombstone.first?.optionalString("email") == nil && tombstone.first?.optionalInt64("deleted_at") != nil)
        #expect(try world.server.request("GET", "/v1/admin/users/\(userID)", bearer: world.app.secretKey).status == 404)
        let event = try #require(try events(world, type: "user.deleted").first)
        #expect(event["user_id"]?.stringValue == userID && event["data"]?["reason"] == "moving away" && event["data"]?["by"] == "user")
        #expect(event["data"]?["apple_revocations"] == ["status": "queued", "count": 2])
        #expect(try events(world, type: "session.revoked").first?["data"]?["reason"] == "deleted")
        let queued = try world.server.gatehouse.database.query("SELECT payload FROM outbox WHERE kind = 'apple_revocation'")
        #expect(queued.count == 2)
        #expect(try queued.allSatisfy { try !$0.string("payload").contains(nativeToken) && !$0.string("payload").contains("rt-web-1") }, "sealed")
        #expect(world.apple.revokeCalls.isEmpty, "nothing is sent inside the request")

        #expect(try world.server.gatehouse.outboxWorker.runOnce() == 2)
        #expect(revocations(world) == ["\(ProviderWorld.bundleID)|\(nativeToken)|refresh_token", "\(ProviderWorld.servicesID)|rt-web-1|refresh_token"].sorted())
        // The fake checks each client secret like Apple: ES256 by the app's key, sub = client_id.
        #expect(world.apple.errors.isEmpty)
        #expect(try world.server.gatehouse.database.query("SELECT 1 AS found FROM outbox WHERE delivered_at IS NOT NULL").count == 2)

        // The Apple account and its email can sign up again at once: a new account.
        let again = try world.appleSignIn(["identity_token": .string(world.appleToken(nonce: "raw-nonce-9")), "nonce": "raw-nonce-9"])
        #expect(again.status == 201 && again.data?["user"]?["id"]?.stringValue != userID && again.data?["user"]?["email"] == "pat@example.com")
    }

    @Test(arguments: TestDatabase.kinds)
    func appleFailingTwiceThenAcceptingIsTriedThreeTimesBackedOff(_ kind: TestDatabaseKind) throws {
        let world = try world(kind)
        defer { world.stop() }
        let session = try appleUserWithStoredToken(world)
        #expect(try deleteMe(world, session).status == 204)
        let worker = world.server.gatehouse.outboxWorker
        world.apple.failNextRequests(2)
        #expect(try worker.runOnce() == 1)
        #expect(try worker.runOnce() == 0, "backed off")
        world.clock.advance(seconds: 5)
        #expect(try worker.runOnce() == 1)
        world.clock.advance(seconds: 5)
        #expect(try worker.runOnce() == 0, "the second back-off is 10 s")
        world.clock.advance(seconds: 5)
        #expect(try worker.runOnce() == 1)
        let row = try #require(try world.server.gatehouse.database.query("SELECT attempts, delivered_at FROM outbox WHERE kind = 'apple_revocation'").first)
        #expect(try row.int64("attempts") == 3 && row.optionalInt64("delivered_at") != nil)
        #expect(world.apple.revokeCalls.count == 1, "two refused before reaching the endpoint, the third accepted")
    }

    @Test(arguments: TestDatabase.kinds)
    func aRevocationLeasedByANodeThatDiedIsDeliveredByAnother(_ kind: TestDatabaseKind) throws {
        let world = try world(kind)
        defer { world.stop() }
        let session = try appleUserWithStoredToken(world)
        #expect(try deleteMe(world, session).status == 204)
        // The first node takes the item and dies before delivering it.
        let taken = try world.server.gatehouse.store.outbox.claim(kinds: [.appleRevocation], limit: 10, leaseMillis: 60_000, node: "node_dead", now: world.clock.nowMillis())
        #expect(taken.count == 1)
        let other = try TestServer(anotherNodeOf: world.server, clock: world.clock) { $0.appleURL = world.apple.baseURL }
        defer { other.stop() }
        other.gatehouse.stopBackgroundWork()
        #expect(try other.gatehouse.outboxWorker.runOnce() == 0, "leased by the dead node")
        world.clock.advance(seconds: 61)
        #expect(try other.gatehouse.outboxWorker.runOnce() == 1)
        #expect(world.apple.revokeCalls.count == 1 && world.apple.errors.isEmpty)
    }

    @Test(arguments: TestDatabase.kinds)
    func anAuthorizationCodeIsRedeemedAndRevokedWhenNoTokenIsStored(_ kind: TestDatabaseKind) throws {
        let world = try world(kind)
        defer { world.stop() }
        let session = try #require(try world.appleSignIn(["identity_token": .string(world.appleToken()), "nonce": "raw-nonce-1"]).data)
        #expect(try world.server.gatehouse.database.query("SELECT 1 AS found FROM provider_tokens").isEmpty)
        let code = world.apple.issueCode(for: FakeAppleUser(sub: "001.apple.user", email: "pat@example.com"), clientID: ProviderWorld.bundleID)
        #expect(try deleteMe(world, session, json: ["apple_authorization_code": .string(code)]).status == 204)
        #expect(try events(world, type: "user.deleted").first?["data"]?["apple_authorization_code"] == "queued")
        #expect(try world.server.gatehouse.outboxWorker.runOnce() == 1)
        let issued = try #require(world.apple.issuedRefreshTokens.last)
        #expect(world.apple.tokenCalls.last?["code"] == code && world.apple.tokenCalls.last?["client_id"] == ProviderWorld.bundleID)
        #expect(revocations(world) == ["\(ProviderWorld.bundleID)|\(issued)|refresh_token"])
        #expect(world.apple.errors.isEmpty)
    }

    @Test(arguments: TestDatabase.kinds)
    func withoutAnAppleKeyTheDeletionSucceedsAndSaysNothingCouldBeRevoked(_ kind: TestDatabaseKind) throws {
        let world = try world(kind)
        defer { world.stop() }
        let session = try appleUserWithStoredToken(world)
        #expect(try world.server.request("PATCH", "/v1/admin/app", bearer: world.app.secretKey, json: ["apple": ["private_key": .null, "key_id": .null, "team_id": .null]]).status == 200)
        #expect(try deleteMe(world, session).status == 204)
        #expect(try events(world, type: "user.deleted").first?["data"]?["apple_revocations"] == ["status": "not_configured", "count": 1])
        #expect(try world.server.gatehouse.database.query("SELECT 1 AS found FROM outbox WHERE kind = 'apple_revocation'").isEmpty)
        #expect(try world.server.gatehouse.database.query("SELECT 1 AS found FROM provider_tokens").isEmpty)
    }

    @Test(arguments: TestDatabase.kinds)
    func badDeletionsAreRefusedAndChangeNothing(_ kind: TestDatabaseKind) throws {
        let world = try world(kind)
        defer { world.stop() }
        let session = try world.server.signUp(world.app, email: "ada@example.com")
        for long in [String(repeating: "x", count: 501), String(repeating: "x", count: 10_000)] {
            #expect(try deleteMe(world, session, json: ["reason": .string(long)]).problemCode == "request/validation-failed")
        }
        #expect(try deleteMe(world, session, json: ["reason": "fine", "surprise": true]).problemCode == "request/validation-failed")
        #expect(try deleteMe(world, session, json: ["apple_authorization_code": ""]).problemCode == "request/validation-failed")
        #expect(try world.server.request("DELETE", "/v1/me", appKey: world.app.appKey).problemCode == "auth/missing-token")
        world.clock.advance(seconds: 301)
        #expect(try deleteMe(world, session).problemCode == "auth/requires-recent-login")
        #expect(try world.server.request("GET", "/v1/me", appKey: world.app.appKey, bearer: session["access_token"]?.stringValue).status == 200, "still there")
        #expect(try events(world, type: "user.deleted").isEmpty)
    }

    @Test(arguments: TestDatabase.kinds)
    func aTenantAdminDeletesOnlyItsOwnUsers(_ kind: TestDatabaseKind) throws {
        let world = try world(kind)
        defer { world.stop() }
        let other = try world.server.createApp(["name": "Other"])
        let theirs = try #require(try world.server.signUp(other, email: "ada@example.com")["user"]?["id"]?.stringValue)
        let session = try world.server.signUp(world.app, email: "ada@example.com")
        let ours = try #require(session["user"]?["id"]?.stringValue)
        for id in [theirs, "usr_unknown", "not-an-id", String(repeating: "u", count: 300)] {
            #expect(try world.server.request("DELETE", "/v1/admin/users/\(id)", bearer: world.app.secretKey).status == 404)
        }
        #expect(try world.server.request("GET", "/v1/admin/users/\(theirs)", bearer: other.secretKey).status == 200, "untouched")
        #expect(try world.server.request("DELETE", "/v1/admin/users/\(ours)", bearer: world.app.secretKey).status == 204)
        #expect(try world.server.request("GET", "/v1/me", appKey: world.app.appKey, bearer: session["access_token"]?.stringValue).problemCode == "auth/session-revoked")
        #expect(try world.server.request("DELETE", "/v1/admin/users/\(ours)", bearer: world.app.secretKey).status == 404, "retried after success")
        #expect(try events(world, type: "user.deleted").first?["data"]?["by"] == "admin")
        // A 10 KB search is refused with a clear answer, not a 500.
        let huge = try world.server.request("GET", "/v1/admin/users?query=" + String(repeating: "a", count: 10_240), bearer: world.app.secretKey)
        #expect([400, 414].contains(huge.status) && huge.problemCode != nil)
    }

    @Test(arguments: TestDatabase.kinds)
    func withAGracePeriodAPasswordSignInRestoresAndThePurgeErasesAfterIt(_ kind: TestDatabaseKind) throws {
        let world = try world(kind, settings: ["deletion_grace_days": 7])
        defer { world.stop() }
        let session = try world.server.signUp(world.app, email: "ada@example.com")
        let id = try #require(session["user"]?["id"]?.stringValue)
        #expect(try deleteMe(world, session).status == 204)
        #expect(try world.server.request("GET", "/v1/me", appKey: world.app.appKey, bearer: session["access_token"]?.stringValue).problemCode == "auth/session-revoked")
        let pending = try world.server.request("GET", "/v1/admin/users/\(id)", bearer: world.app.secretKey)
        #expect(pending.data?["pending_deletion"]?["purge_at"]?.stringValue == rfc3339(millis: world.clock.nowMillis() + 7 * 86_400_000))
        #expect(try events(world, type: "user.deleted").first?["data"]?["purge_at"] != nil)
        // The address stays reserved for whoever may come back.
        #expect(try world.server.request("POST", "/v1/auth/signup", appKey: world.app.appKey, json: ["email": "ada@example.com", "password": "another password 1"]).problemCode == "auth/email-already-in-use")

        world.clock.advance(seconds: 3 * 86_400)
        let back = try world.server.request("POST", "/v1/auth/signin", appKey: world.app.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"])
        #expect(back.status == 200 && back.data?["is_restored"] == true && back.data?["user"]?["id"]?.stringValue == id)
        #expect(try world.server.request("GET", "/v1/admin/users/\(id)", bearer: world.app.secretKey).data?["pending_deletion"] == .null)
        #expect(try events(world, type: "user.restored").first?["data"]?["method"] == "password")
        let plain = try world.server.request("POST", "/v1/auth/signin", appKey: world.app.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"])
        #expect(plain.status == 200 && plain.data?["is_restored"] == nil, "only the sign-in that restored says so")

        // Deleted again, and left: the purge takes it once its grace has passed, not before.
        #expect(try deleteMe(world, try #require(plain.data)).status == 204)
        world.clock.advance(seconds: 7 * 86_400 - 60)
        #expect(world.server.gatehouse.periodicJobs.runDue(force: true)["account_purge"] == 0)
        world.clock.advance(seconds: 61)
        #expect(world.server.gatehouse.periodicJobs.runDue(force: true)["account_purge"] == 1)
        #expect(try world.server.request("GET", "/v1/admin/users/\(id)", bearer: world.app.secretKey).status == 404)
        #expect(try world.server.request("POST", "/v1/auth/signin", appKey: world.app.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"]).status == 400)
        #expect(try events(world, type: "user.purged").count == 1)
        #expect(try world.server.request("POST", "/v1/auth/signup", appKey: world.app.appKey, json: ["email": "ada@example.com", "password": "another password 1"]).status == 201)
        // Two days on, the tombstone (and its ended sessions) goes too.
        world.clock.advance(seconds: 2 * 86_400 + 60)
        #expect(world.server.gatehouse.periodicJobs.runDue(force: true)["account_purge"] == 1)
        #expect(try world.server.gatehouse.database.query("SELECT 1 AS found FROM users WHERE id = \(id)").isEmpty)
    }

    /// Every provider path restores: Apple native, Google, Firebase and the Apple web flow; the
    /// purge queues the stored Apple token's revocation when it erases.
    @Test(arguments: TestDatabase.kinds)
    func everyProviderSignInRestoresAndThePurgeRevokesAtApple(_ kind: TestDatabaseKind) throws {
        let world = try world(kind, settings: ["deletion_grace_days": 1])
        defer { world.stop() }
        let first = try appleUserWithStoredToken(world)
        let id = try #require(first["user"]?["id"]?.stringValue)
        let google = try world.server.request(
            "POST", "/v1/auth/oauth/google", appKey: world.app.appKey,
            json: ["id_token": .string(world.google.mintIDToken(sub: "g-1", aud: ProviderWorld.googleClient, email: "gabe@gmail.com", nonce: "g0")), "nonce": "g0"])
        let googleID = try #require(google.data?["user"]?["id"]?.stringValue)
        var nonce = 0
        func signIns() -> [(String, () throws -> TestResponse)] {
            [
                ("apple", {
                    nonce += 1
                    return try world.appleSignIn(["identity_token": .string(world.appleToken(nonce: "n\(nonce)")), "nonce": .string("n\(nonce)")])
                }),
                ("firebase", {
                    try world.appleSignIn(["firebase_id_token": .string(world.firebase.mintIDToken(projectID: ProviderWorld.project, signInProvider: "apple.com", providerSubject: "001.apple.user", email: "pat@example.com"))])
                }),
                ("web flow", {
                    let flows = AppleWebFlowTests()
                    let (_, started) = try flows.start(world)
                    let code = world.apple.issueCode(
                        for: FakeAppleUser(sub: "001.apple.user", email: "pat@example.com", nonce: started!.nonce), clientID: ProviderWorld.servicesID,
                        redirectURI: "\(TestServer.publicURL)/v1/auth/oauth/apple/callback")
                    let back = try flows.callback(world, [("state", started!.state), ("code", code)], cookie: started!.cookie)
                    let login = URLComponents(string: back.header("Location") ?? "")?.queryItems?.first { $0.name == "login_code" }?.value ?? ""
                    return try world.server.request("POST", "/v1/auth/exchange", appKey: world.app.appKey, json: ["login_code": .string(login), "code_verifier": .string(AppleWebFlowTests.verifier)])
                }),
            ]
        }
        var session = first
        for (name, signIn) in signIns() {
            #expect(try deleteMe(world, session).status == 204, "\(name)")
            let back = try signIn()
            #expect(back.status == 200 && back.data?["is_restored"] == true && back.data?["user"]?["id"]?.stringValue == id, "\(name): \(back.text)")
            session = try #require(back.data)
        }
        let googleSession = try #require(google.data)
        #expect(try deleteMe(world, googleSession).status == 204)
        let googleBack = try world.server.request(
            "POST", "/v1/auth/oauth/google", appKey: world.app.appKey,
            json: ["id_token": .string(world.google.mintIDToken(sub: "g-1", aud: ProviderWorld.googleClient, email: "gabe@gmail.com", nonce: "g1")), "nonce": "g1"])
        #expect(googleBack.data?["is_restored"] == true && googleBack.data?["user"]?["id"]?.stringValue == googleID)
        #expect(try events(world, type: "user.restored").count == 4)

        // Left for good: nothing goes to Apple before the purge; after it, the revocation of the
        // tokens kept by the native sign-in and by the web flow.
        #expect(try deleteMe(world, session).status == 204)
        #expect(try world.server.gatehouse.outboxWorker.runOnce() == 0)
        world.clock.advance(seconds: 86_400 + 1)
        #expect(world.server.gatehouse.periodicJobs.runDue(force: true)["account_purge"] == 1)
        #expect(try events(world, type: "user.purged").first?["data"]?["apple_revocations"] == ["status": "queued", "count": 2])
        #expect(try world.server.gatehouse.outboxWorker.runOnce() == 2)
        #expect(world.apple.revokeCalls.compactMap { $0["client_id"] }.sorted() == [ProviderWorld.bundleID, ProviderWorld.servicesID])
        #expect(world.apple.errors.isEmpty)
    }

    /// Two nodes purging at once erase each account once and queue its revocation once.
    @Test(arguments: TestDatabase.kinds)
    func twoNodesPurgingAtOnceEraseEachAccountOnce(_ kind: TestDatabaseKind) throws {
        let world = try world(kind, settings: ["deletion_grace_days": 1])
        defer { world.stop() }
        var sessions: [JSON] = []
        for i in 0..<6 { sessions.append(try appleUserWithStoredToken(world, sub: "00\(i).apple", email: "user\(i)@example.com", nonce: "nonce-\(i)")) }
        for session in sessions { #expect(try deleteMe(world, session).status == 204) }
        let other = try TestServer(anotherNodeOf: world.server, clock: world.clock) { $0.appleURL = world.apple.baseURL }
        defer { other.stop() }
        other.gatehouse.stopBackgroundWork()
        world.clock.advance(seconds: 86_400 + 1)
        let nodes = [world.server.gatehouse, other.gatehouse]
        let now = world.clock.nowMillis()
        let counts = Mutex<[Result<Int, any Error>]>([])
        DispatchQueue.concurrentPerform(iterations: 2) { i in
            let erased = Result { try nodes[i].deletion.purge(now: now) }
            counts.withLock { $0.append(erased) }
        }
        let erased = try counts.withLock { $0 }.map { try $0.get() }
        #expect(erased.reduce(0, +) == 6, "each account erased by one node")
        #expect(try world.server.gatehouse.database.query("SELECT 1 AS found FROM outbox WHERE kind = 'apple_revocation'").count == 6)
        #expect(try events(world, type: "user.purged").count == 6)
    }
}

/// A ban refuses every way in, each path on its own: password, emailed code, Apple, Google,
/// Firebase and refresh (the web flow's redirect is in ``AppleWebFlowTests``).
@Suite("Bans on every sign-in path")
struct BanPathTests {
    @Test(arguments: TestDatabase.kinds)
    func everyProviderPathAndRefreshAnswerUserDisabled(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind)
        defer { world.stop() }
        let google = { (nonce: String) in
            try world.server.request(
                "POST", "/v1/auth/oauth/google", appKey: world.app.appKey,
                json: ["id_token": .string(world.google.mintIDToken(sub: "g-1", aud: ProviderWorld.googleClient, email: "pat@example.com", nonce: nonce)), "nonce": .string(nonce)])
        }
        let firebase = {
            try world.appleSignIn(["firebase_id_token": .string(world.firebase.mintIDToken(projectID: ProviderWorld.project, signInProvider: "apple.com", providerSubject: "001.apple.user", email: "pat@example.com"))])
        }
        let first = try world.appleSignIn(["identity_token": .string(world.appleToken()), "nonce": "raw-nonce-1"])
        let id = try #require(first.data?["user"]?["id"]?.stringValue)
        let access = try #require(first.data?["access_token"]?.stringValue)
        #expect(try world.server.request("POST", "/v1/me/identities/google", appKey: world.app.appKey, bearer: access,
            json: ["id_token": .string(world.google.mintIDToken(sub: "g-1", aud: ProviderWorld.googleClient, email: "pat@example.com", nonce: "g0")), "nonce": "g0"]).status == 200)
        let until = rfc3339(millis: world.clock.nowMillis() + 3_600_000)
        #expect(try world.server.request("POST", "/v1/admin/users/\(id)/ban", bearer: world.app.secretKey, json: ["sanction_code": "fraud", "suspended_until": .string(until)]).status == 200)

        let refused = [
            ("apple", try world.appleSignIn(["identity_token": .string(world.appleToken(nonce: "n2")), "nonce": "n2"])),
            ("google", try google("g1")),
            ("firebase", try firebase()),
            ("refresh", try world.server.request("POST", "/v1/auth/refresh", appKey: world.app.appKey, json: ["refresh_token": first.data!["refresh_token"]!])),
        ]
        for (path, response) in refused where path != "refresh" {
            #expect(response.status == 403 && response.problemCode == "auth/user-disabled", "\(path)")
            #expect(response.json?["sanction_code"] == "fraud" && response.json?["suspended_until"]?.stringValue == until, "\(path)")
        }
        // The ban ended the session itself: its refresh token is dead.
        #expect(refused[3].1.status == 401)
        // The suspension ends by itself.
        world.clock.advance(seconds: 3_601)
        #expect(try google("g2").status == 200)
        #expect(try firebase().status == 200)
    }
}

extension EmailFlowsAPITests {
    @Test(arguments: TestDatabase.kinds)
    func anEmailedCodeIsRefusedToABannedUserAndRestoresAnAccountPendingDeletion(_ kind: TestDatabaseKind) throws {
        let world = try World(kind, settings: ["deletion_grace_days": 30])
        defer { world.stop() }
        let session = try world.server.signUp(world.app, email: "ada@example.com")
        let id = try #require(session["user"]?["id"]?.stringValue)
        _ = try world.deliver()
        world.seen = try world.sink.messages().count

        #expect(try world.server.request("POST", "/v1/admin/users/\(id)/ban", bearer: world.app.secretKey, json: ["sanction_code": "spam"]).status == 200)
        #expect(try world.post("/v1/auth/email-code/send", ["email": "ada@example.com"]).status == 202)
        let banned = try world.post("/v1/auth/email-code/verify", ["email": "ada@example.com", "code": .string(try world.code(to: "ada@example.com").code)])
        #expect(banned.status == 403 && banned.problemCode == "auth/user-disabled" && banned.json?["suspended_until"] == .null)
        #expect(try world.server.request("DELETE", "/v1/admin/users/\(id)/ban", bearer: world.app.secretKey).status == 200)

        let fresh = try #require(try world.post("/v1/auth/signin", ["email": "ada@example.com", "password": "correct horse battery"]).data)
        #expect(try world.server.request("DELETE", "/v1/me", appKey: world.app.appKey, bearer: fresh["access_token"]?.stringValue).status == 204)
        world.clock.advance(seconds: 61)
        #expect(try world.post("/v1/auth/email-code/send", ["email": "ada@example.com"]).status == 202)
        let restored = try world.post("/v1/auth/email-code/verify", ["email": "ada@example.com", "code": .string(try world.code(to: "ada@example.com").code)])
        #expect(restored.status == 200 && restored.data?["is_restored"] == true && restored.data?["user"]?["id"]?.stringValue == id)
    }
}

extension AccountDeletionTests {
    /// A sign-in that read the account before a deletion and starts its session after gets none:
    /// the deletion holds the user's row, and a session needs a live account that is not pending.
    @Test(arguments: TestDatabase.kinds)
    func aSignInThatRacedADeletionGetsNoSession(_ kind: TestDatabaseKind) throws {
        for grace in [0, 3] {
            let world = try world(kind, settings: ["deletion_grace_days": .int(Int64(grace))])
            defer { world.stop() }
            let session = try world.server.signUp(world.app, email: "ada@example.com")
            let id = UserID(unchecked: try #require(session["user"]?["id"]?.stringValue))
            let gatehouse = world.server.gatehouse
            let data = gatehouse.store.app(AppID(unchecked: world.app.id))
            let stale = try #require(try data.users.user(id))
            #expect(try deleteMe(world, session).status == 204)
            let app = try #require(try gatehouse.directory.app(id: AppID(unchecked: world.app.id)))
            #expect(throws: GatehouseError.self) {
                try gatehouse.sessions.startSession(app: app, data, user: stale, method: .password, isNewUser: false, origin: RequestOrigin(ip: nil, userAgent: nil))
            }
            #expect(try gatehouse.database.query("SELECT 1 AS found FROM sessions WHERE ended_at IS NULL").isEmpty, "grace \(grace)")
            // A provider token is kept for a pending account (revoked at its purge), never for an erased one.
            let kept = try data.identities.saveProviderToken(id, provider: .apple, clientID: "x", sealedToken: "y", now: world.clock.nowMillis())
            #expect(kept == (grace > 0))
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func anErasedAccountCannotBeBannedOrChanged(_ kind: TestDatabaseKind) throws {
        let world = try world(kind)
        defer { world.stop() }
        let session = try world.server.signUp(world.app, email: "ada@example.com")
        let id = try #require(session["user"]?["id"]?.stringValue)
        #expect(try deleteMe(world, session).status == 204)
        #expect(try world.server.request("POST", "/v1/admin/users/\(id)/ban", bearer: world.app.secretKey, json: ["sanction_code": "spam"]).status == 404)
        #expect(try world.server.request("DELETE", "/v1/admin/users/\(id)/ban", bearer: world.app.secretKey).status == 404)
        #expect(try world.server.request("DELETE", "/v1/admin/users/\(id)/sessions", bearer: world.app.secretKey).status == 404)
        let data = world.server.gatehouse.store.app(AppID(unchecked: world.app.id))
        #expect(try data.users.updateProfile(UserID(unchecked: id), firstName: "Back", lastName: nil, photoURL: nil, now: world.clock.nowMillis()) == nil)
        #expect(try events(world, type: "user.banned").isEmpty)
    }

    /// With a grace period, a code is still redeemed at once (it would not outlive the wait); a
    /// code of another Apple account revokes nothing.
    @Test(arguments: TestDatabase.kinds)
    func codesAreRedeemedAtOnceAndOnlyForTheUsersOwnAppleAccount(_ kind: TestDatabaseKind) throws {
        let world = try world(kind, settings: ["deletion_grace_days": 5])
        defer { world.stop() }
        let first = try #require(try world.appleSignIn(["identity_token": .string(world.appleToken()), "nonce": "raw-nonce-1"]).data)
        let someoneElse = world.apple.issueCode(for: FakeAppleUser(sub: "999.someone.else"), clientID: ProviderWorld.bundleID)
        #expect(try deleteMe(world, first, json: ["apple_authorization_code": .string(someoneElse)]).status == 204)
        #expect(try world.server.gatehouse.outboxWorker.runOnce() == 1)
        #expect(world.apple.revokeCalls.isEmpty, "another account's token is not revoked")
        let dead = try world.server.gatehouse.database.query("SELECT last_error FROM outbox WHERE dead_at IS NOT NULL")
        #expect(try dead.first?.optionalString("last_error")?.contains("not of the user's Apple account") == true)

        // Restored, deleted again with the user's own code: a new item, redeemed and revoked now.
        let back = try #require(try world.appleSignIn(["identity_token": .string(world.appleToken(nonce: "n2")), "nonce": "n2"]).data)
        #expect(back["is_restored"] == true)
        let own = world.apple.issueCode(for: FakeAppleUser(sub: "001.apple.user"), clientID: ProviderWorld.bundleID)
        #expect(try deleteMe(world, back, json: ["apple_authorization_code": .string(own)]).status == 204)
        #expect(try events(world, type: "user.deleted").first?["data"]?["apple_authorization_code"] == "queued")
        #expect(try world.server.gatehouse.outboxWorker.runOnce() == 1)
        #expect(world.apple.revokeCalls.count == 1 && world.apple.errors.isEmpty)
    }
}
