import Foundation
import GatehouseCore
import GatehouseCrypto
import GatehouseTesting
import Testing

/// Dead outbox items kept and retried (API.md, "Apple, to the end"): an Apple revocation that
/// Apple refused for its whole give-up window is listed for the app's admin (and the platform
/// operator) with its reason and no secret, queued again once the key is fixed, and delivered;
/// 30 days after it died its payload is erased and a retry says why it cannot be. Both databases.
@Suite("Dead outbox items: listed and retried")
struct DeadLettersTests {
    static let day: Int64 = 86_400

    /// A user who linked Apple (one kept token) and unlinked it while Apple refuses the app's key
    /// (revoked in Apple's portal, say): the revocation dies at the end of its 30 days. Returns the token.
    func deadRevocation(_ world: RevocationWorld) throws -> String {
        let session = try world.server.signUp(world.app, email: "pat@example.com")
        let access = try #require(session["access_token"]?.stringValue)
        try world.deliverAll()  // the address's verification mail
        #expect(try world.request("POST", "/v1/me/identities/apple", bearer: access, json: world.appleProof(sub: "001.pat", email: "pat@example.com", nonce: "n1")).status == 200)
        let token = try #require(world.apple.issuedRefreshTokens.last)
        #expect(try world.request("DELETE", "/v1/me/identities/apple", bearer: access).status == 200)
        // Apple no longer knows the app's key: every client secret it signs is invalid_client.
        world.apple.registerClient(teamID: RevocationWorld.teamID, keyID: "KEY1234567", publicKey: try SigningKey.generate(.es256).verificationKey)
        let worker = world.server.gatehouse.outboxWorker
        #expect(try worker.runOnce() == 1)
        #expect(try world.count("SELECT 1 AS found FROM outbox WHERE dead_at IS NOT NULL") == 0, "retried, not dead")
        world.clock.advance(seconds: 30 * Self.day)
        #expect(try worker.runOnce() == 1)
        #expect(try world.count("SELECT 1 AS found FROM outbox WHERE dead_at IS NOT NULL AND kind = 'apple_revocation'") == 1, "dead after 30 days")
        #expect(world.apple.revokeCalls.count == 2 && world.apple.revokeCalls.allSatisfy { $0["token"] == token })
        return token
    }

    func list(_ world: RevocationWorld, bearer: String, query: String = "state=dead") throws -> TestResponse {
        try world.server.request("GET", "/v1/admin/outbox?\(query)", bearer: bearer)
    }

    func retry(_ world: RevocationWorld, _ id: String, bearer: String) throws -> TestResponse {
        try world.server.request("POST", "/v1/admin/outbox/\(id)/retry", bearer: bearer)
    }

    @Test(arguments: TestDatabase.kinds)
    func aDeadRevocationIsListedWithoutSecretsRetriedAfterTheFixAndDelivered(_ kind: TestDatabaseKind) throws {
        let world = try RevocationWorld(kind)
        defer { world.stop() }
        let token = try deadRevocation(world)
        let sealed = try world.server.gatehouse.database.query("SELECT payload FROM outbox WHERE kind = 'apple_revocation'")[0].string("payload")
        #expect(!sealed.isEmpty, "the sealed payload is kept")

        // The app's admin sees it: what, why, whether it can be retried; no token, no payload.
        let listed = try list(world, bearer: world.app.secretKey)
        #expect(listed.status == 200, "\(listed.text)")
        let items = try #require(listed.json?["data"]?.arrayValue)
        #expect(items.count == 1)
        let item = try #require(items.first)
        let id = try #require(item["id"]?.stringValue)
        #expect(item["kind"] == "apple_revocation" && item["app_id"] == .string(world.app.id) && item["state"] == "dead")
        #expect(item["attempts"] == 2 && item["retryable"] == true)
        #expect(item["last_error"]?.stringValue?.contains("gave up after 2 attempts") == true, "\(item)")
        #expect(item["destination"]?.stringValue?.hasPrefix("127.0.0.1:") == true)
        #expect(item["dead_at"] == .string(rfc3339(millis: world.clock.nowMillis())))
        #expect(item["payload_kept_until"] == .string(rfc3339(millis: world.clock.nowMillis() + 30 * Self.day * 1000)))
        #expect(item["payload"] == nil && !listed.text.contains(token) && !listed.text.contains(sealed))
        #expect(listed.json?["next_cursor"] == .null)

        // Only `dead` is a state to list.
        for query in ["state=queued", "", "state=dead&limit=0", "state=dead&cursor=bm9wZQ"] {
            let bad = try list(world, bearer: world.app.secretKey, query: query)
            #expect(bad.status == 400 && bad.problemCode == "request/validation-failed", "\(query): \(bad.text)")
        }
        #expect(try list(world, bearer: "sk_not_a_key").status == 401)

        // Another app's admin neither sees nor retries it; the platform operator sees every app's.
        let other = try world.server.createApp(try RevocationWorld.settings(world.apple, name: "Other", keyID: "KEY0000002"))
        #expect(try list(world, bearer: other.secretKey).json?["data"] == [])
        #expect(try list(world, bearer: other.secretKey, query: "state=dead&app_id=\(world.app.id)").status == 400)
        let foreign = try retry(world, id, bearer: other.secretKey)
        #expect(foreign.status == 404 && foreign.problemCode == "request/not-found")
        let platform = try list(world, bearer: TestServer.adminToken)
        #expect(platform.json?["data"]?.arrayValue?.map { $0["id"] } == [.string(id)])
        #expect(try list(world, bearer: TestServer.adminToken, query: "state=dead&app_id=\(other.id)").json?["data"] == [])
        #expect(try list(world, bearer: TestServer.adminToken, query: "state=dead&app_id=\(world.app.id)").json?["data"]?.arrayValue?.count == 1)

        // The fix: a new key, registered at Apple. The retry queues it at once, anew.
        let fresh = try world.apple.makeCredentials(teamID: RevocationWorld.teamID, keyID: "KEY7654321")
        let patched = try world.server.request(
            "PATCH", "/v1/admin/app", bearer: world.app.secretKey,
            json: ["apple": ["client_ids": [.string(RevocationWorld.bundleID)], "team_id": .string(fresh.teamID), "key_id": .string(fresh.keyID), "private_key": .string(fresh.privateKeyPEM)]])
        #expect(patched.status == 200, "\(patched.text)")
        world.clock.advance(seconds: 60)
        let retried = try retry(world, id, bearer: world.app.secretKey)
        #expect(retried.status == 200, "\(retried.text)")
        #expect(retried.data?["state"] == "queued" && retried.data?["attempts"] == 0 && retried.data?["retryable"] == false)
        #expect(retried.data?["retried_at"] == .string(rfc3339(millis: world.clock.nowMillis())))
        #expect(try list(world, bearer: world.app.secretKey).json?["data"] == [])
        let again = try retry(world, id, bearer: world.app.secretKey)
        #expect(again.status == 409 && again.problemCode == "outbox/not-dead")
        let audit = try #require(try world.events("outbox.retried").first)
        #expect(audit["data"]?["item_id"] == .string(id) && audit["data"]?["by"] == "admin" && audit["data"]?["previous_attempts"] == 2)
        #expect(audit["data"]?["previous_error"]?.stringValue?.contains("gave up") == true)

        #expect(try world.server.gatehouse.outboxWorker.runOnce() == 1)
        #expect(world.apple.revokeCalls.count == 3)
        #expect(world.revoked.last == "\(RevocationWorld.bundleID)|\(token)")
        #expect(world.apple.errors.isEmpty)
        let row = try world.server.gatehouse.database.query("SELECT delivered_at, payload FROM outbox WHERE id = \(id)")[0]
        #expect(try row.optionalInt64("delivered_at") != nil && row.string("payload") == "")
        let delivered = try retry(world, id, bearer: TestServer.adminToken)
        #expect(delivered.status == 409 && delivered.problemCode == "outbox/not-dead")
        #expect(try retry(world, "obx_0123456789abcdef0123456789", bearer: TestServer.adminToken).status == 404)
        #expect(try retry(world, "not-an-id", bearer: world.app.secretKey).status == 404)
    }

    /// A dead item is retried in a window of its own: a first failure after the retry does not kill it again.
    @Test(arguments: TestDatabase.kinds)
    func aRetriedItemHasAWholeGiveUpWindowAgainAndThePlatformMayRetryAnyAppsItem(_ kind: TestDatabaseKind) throws {
        let world = try RevocationWorld(kind)
        defer { world.stop() }
        _ = try deadRevocation(world)
        let id = try #require(try list(world, bearer: TestServer.adminToken).json?["data"]?.arrayValue?.first?["id"]?.stringValue)
        world.clock.advance(seconds: Self.day)
        let retried = try retry(world, id, bearer: TestServer.adminToken)
        #expect(retried.status == 200, "\(retried.text)")
        #expect(try world.events("outbox.retried").first?["data"]?["by"] == "platform")
        // Apple still refuses the key: retried with back-off from 5 s, not dead again.
        #expect(try world.server.gatehouse.outboxWorker.runOnce() == 1)
        let row = try world.server.gatehouse.database.query("SELECT attempts, dead_at, next_attempt_at FROM outbox WHERE id = \(id)")[0]
        #expect(try row.int64("attempts") == 1 && row.optionalInt64("dead_at") == nil)
        #expect(try row.int64("next_attempt_at") == world.clock.nowMillis() + 5_000)
    }

    @Test(arguments: TestDatabase.kinds)
    func thirtyDaysAfterItDiedItsPayloadIsErasedAndARetrySaysWhy(_ kind: TestDatabaseKind) throws {
        let world = try RevocationWorld(kind)
        defer { world.stop() }
        _ = try deadRevocation(world)
        let died = world.clock.nowMillis()
        let maintenance = world.server.gatehouse.maintenance
        #expect(try maintenance.run(now: died + 30 * Self.day * 1000 - 1)?.deleted[.deadOutboxPayloads] == 0)
        #expect(try list(world, bearer: world.app.secretKey).json?["data"]?.arrayValue?.first?["retryable"] == true)
        #expect(try maintenance.run(now: died + 30 * Self.day * 1000 + 1)?.deleted[.deadOutboxPayloads] == 1)
        let item = try #require(try list(world, bearer: world.app.secretKey).json?["data"]?.arrayValue?.first)
        #expect(item["retryable"] == false && item["payload_kept_until"] == .null && item["state"] == "dead")
        let refused = try retry(world, try #require(item["id"]?.stringValue), bearer: world.app.secretKey)
        #expect(refused.status == 410 && refused.problemCode == "outbox/payload-erased")
        #expect(refused.json?["detail"]?.stringValue?.contains("erased 30 days after it died") == true)
        #expect(try world.count("SELECT 1 AS found FROM outbox WHERE dead_at IS NOT NULL AND payload = ''") == 1, "the row stays")
        #expect(try world.events("outbox.retried").isEmpty)
    }

    /// Pages are cursor-paged, newest first, and stable.
    @Test(arguments: TestDatabase.kinds)
    func deadItemsArePagedNewestFirst(_ kind: TestDatabaseKind) throws {
        let world = try RevocationWorld(kind)
        defer { world.stop() }
        let outbox = world.server.gatehouse.store.outbox
        let app = AppID(unchecked: world.app.id)
        for n in 0..<3 {
            let item = NewOutboxItem(appID: app, kind: .webhook, idempotencyKey: "dead-\(n)", payload: "{}", sealed: false)
            #expect(try outbox.enqueue(item, now: world.clock.nowMillis()))
            let claimed = try #require(try outbox.claim(kinds: [.webhook], limit: 1, leaseMillis: 60_000, node: "n", now: world.clock.nowMillis()).first)
            #expect(try outbox.markDead(claimed.id, node: "n", error: "refused \(n)", now: world.clock.nowMillis(), event: nil))
            world.clock.advance(seconds: 1)
        }
        let first = try list(world, bearer: world.app.secretKey, query: "state=dead&limit=2")
        #expect(first.json?["data"]?.arrayValue?.map { $0["last_error"] } == ["refused 2", "refused 1"])
        let cursor = try #require(first.json?["next_cursor"]?.stringValue)
        let second = try list(world, bearer: world.app.secretKey, query: "state=dead&limit=2&cursor=\(cursor)")
        #expect(second.json?["data"]?.arrayValue?.map { $0["last_error"] } == ["refused 0"])
        #expect(second.json?["next_cursor"] == .null)
        // An unsealed payload is never erased: retryable, with no end date.
        #expect(second.json?["data"]?.arrayValue?.first?["retryable"] == true && second.json?["data"]?.arrayValue?.first?["payload_kept_until"] == .null)
    }
}
