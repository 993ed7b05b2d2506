import Foundation
import GatehouseCore
import GatehouseTesting
import Testing

/// API.md, "Tenants share one server safely": an admin's deletion is final, and erasure reaches
/// the audit log. Both databases.
extension AccountDeletionTests {
    /// `deletion_grace_days` protects users from their own mistake, not from an admin: the admin's
    /// `DELETE` erases at once, as if there were no grace period, and queues the Apple revocations.
    @Test(arguments: TestDatabase.kinds)
    func anAdminDeletionErasesAtOnceWhateverTheGracePeriod(_ kind: TestDatabaseKind) throws {
        let world = try world(kind, settings: ["deletion_grace_days": 7])
        defer { world.stop() }
        let ada = try world.server.signUp(world.app, email: "ada@example.com")
        let adaID = try #require(ada["user"]?["id"]?.stringValue)
        let pat = try appleUserWithStoredToken(world)
        let patID = try #require(pat["user"]?["id"]?.stringValue)
        for id in [adaID, patID] { #expect(try world.server.request("DELETE", "/v1/admin/users/\(id)", bearer: world.app.secretKey).status == 204) }

        // Gone at once: not pending, not restorable by a sign-in.
        for id in [adaID, patID] {
            #expect(try world.server.request("GET", "/v1/admin/users/\(id)", bearer: world.app.secretKey).status == 404)
            #expect(try world.server.request("DELETE", "/v1/admin/users/\(id)", bearer: world.app.secretKey).status == 404)
        }
        let signIn = try world.server.request("POST", "/v1/auth/signin", appKey: world.app.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"])
        #expect(signIn.status == 400 && signIn.problemCode == "auth/invalid-credential", "like an unknown account")
        let again = try world.server.request("POST", "/v1/auth/signup", appKey: world.app.appKey, json: ["email": "ada@example.com", "password": "another password 1"])
        #expect(again.status == 201 && again.data?["user"]?["id"]?.stringValue != adaID)
        let apple = try world.appleSignIn(["identity_token": .string(world.appleToken(nonce: "raw-nonce-7")), "nonce": "raw-nonce-7"])
        #expect(apple.status == 201 && apple.data?["user"]?["id"]?.stringValue != patID && apple.data?["is_restored"] == nil)

        // Pat's Apple token is queued for revocation as any erase does, and revoked by the outbox.
        let deleted = try events(world, type: "user.deleted").first { $0["user_id"]?.stringValue == patID }
        #expect(deleted?["data"]?["by"] == "admin" && deleted?["data"]?["purge_at"] == nil)
        #expect(deleted?["data"]?["apple_revocations"] == ["status": "queued", "count": 1])
        #expect(try world.server.gatehouse.database.query("SELECT 1 AS found FROM outbox WHERE kind = 'apple_revocation'").count == 1)
        while try world.server.gatehouse.outboxWorker.runOnce() > 0 {}
        #expect(world.apple.revokeCalls.count == 1 && world.apple.errors.isEmpty)
        // Nothing is left for the purge to erase (it only drops the tombstones).
        world.clock.advance(seconds: 8 * 86_400)
        _ = world.server.gatehouse.periodicJobs.runDue(force: true)
        #expect(try events(world, type: "user.purged").isEmpty)
    }

    /// An account its user asked to delete is pending; the admin's deletion of it erases it now
    /// (before, the admin's call left it pending, and the user could still come back).
    @Test(arguments: TestDatabase.kinds)
    func anAdminDeletionOfAnAccountPendingDeletionErasesIt(_ kind: TestDatabaseKind) throws {
        let world = try world(kind, settings: ["deletion_grace_days": 7])
        defer { world.stop() }
        let session = try world.server.signUp(world.app, email: "ada@example.com")
        let id = try #require(session["user"]?["id"]?.stringValue)
        #expect(try deleteMe(world, session).status == 204)
        #expect(try world.server.request("GET", "/v1/admin/users/\(id)", bearer: world.app.secretKey).data?["pending_deletion"] != nil)
        #expect(try world.server.request("DELETE", "/v1/admin/users/\(id)", bearer: world.app.secretKey).status == 204)
        #expect(try world.server.request("GET", "/v1/admin/users/\(id)", bearer: world.app.secretKey).status == 404)
        world.clock.advance(seconds: 86_400)
        let back = try world.server.request("POST", "/v1/auth/signin", appKey: world.app.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"])
        #expect(back.problemCode == "auth/invalid-credential")
    }

    /// The events of an erased account lose `ip`, `user_agent` and every email address in `data`,
    /// by whichever path it is erased; other accounts' events keep theirs.
    @Test(arguments: TestDatabase.kinds)
    func erasureReachesTheAuditLog(_ kind: TestDatabaseKind) throws {
        let world = try EmailFlowsAPITests.World(kind, settings: ["deletion_grace_days": 2])
        defer { world.stop() }
        let browser = [("User-Agent", "Erasure Test Browser/1.0")]
        func signUp(_ email: String) throws -> JSON {
            let response = try world.server.request(
                "POST", "/v1/auth/signup", appKey: world.app.appKey, headers: browser, json: ["email": .string(email), "password": "correct horse battery"])
            _ = try world.code(to: email)
            return try #require(response.data)
        }
        /// Changes the address, so that `user.email_changed` names the old and the new one.
        func changeEmail(_ session: JSON, to address: String) throws {
            let bearer = session["access_token"]?.stringValue
            #expect(try world.server.request("POST", "/v1/me/email", appKey: world.app.appKey, bearer: bearer, headers: browser, json: ["email": .string(address)]).status == 202)
            let code = try world.code(to: address).code
            let confirm = try world.server.request(
                "POST", "/v1/me/email/confirm", appKey: world.app.appKey, bearer: bearer, headers: browser, json: ["email": .string(address), "code": .string(code)])
            #expect(confirm.status == 200)
        }
        func events(of user: String) throws -> [JSON] {
            try world.server.request("GET", "/v1/admin/events?user_id=\(user)&limit=100", bearer: world.app.secretKey).json?["data"]?.arrayValue ?? []
        }
        func hasAnAddress(_ json: JSON) -> Bool { json.serializedString.contains("@") }

        let ada = try signUp("ada@example.com")
        let grace = try signUp("grace@example.com")
        let alan = try signUp("alan@example.com")
        try changeEmail(ada, to: "ada@new.example")
        try changeEmail(grace, to: "grace@new.example")
        try changeEmail(alan, to: "alan@new.example")
        let ids = try [ada, grace, alan].map { try #require($0["user"]?["id"]?.stringValue) }
        for id in ids {
            let before = try events(of: id)
            #expect(before.contains { $0["type"] == "user.email_changed" && hasAnAddress($0["data"] ?? .null) })
            #expect(before.contains { $0["ip"] != .null && $0["user_agent"] == "Erasure Test Browser/1.0" })
        }

        // Ada deletes her own account (pending, then purged); Grace is deleted by the admin.
        let reason: JSON = ["reason": "write to ada@new.example instead"]
        #expect(try world.server.request("DELETE", "/v1/me", appKey: world.app.appKey, bearer: ada["access_token"]?.stringValue, headers: browser, json: reason).status == 204)
        #expect(try events(of: ids[0]).contains { hasAnAddress($0["data"] ?? .null) }, "pending: not erased yet")
        world.clock.advance(seconds: 2 * 86_400 + 1)
        #expect(world.server.gatehouse.periodicJobs.runDue(force: true)["account_purge"] == 1)
        #expect(try world.server.request("DELETE", "/v1/admin/users/\(ids[1])", bearer: world.app.secretKey).status == 204)

        for id in ids[0...1] {
            let after = try events(of: id)
            #expect(after.contains { $0["type"] == "user.email_changed" }, "the events stay")
            #expect(after.contains { $0["type"] == "user.deleted" })
            for event in after {
                #expect(event["ip"] == .null && event["user_agent"] == .null, "\(event)")
                #expect(!hasAnAddress(event["data"] ?? .null), "\(event)")
            }
        }
        let adaDeleted = try #require(try events(of: ids[0]).first { $0["type"] == "user.deleted" })
        #expect(adaDeleted["data"]?["by"] == "user" && adaDeleted["data"]?["purge_at"] != nil && adaDeleted["data"]?["reason"] == nil)
        // Alan was not erased: his events keep everything.
        let alanChanged = try #require(try events(of: ids[2]).first { $0["type"] == "user.email_changed" })
        #expect(alanChanged["data"]?["email"] == "alan@new.example" && alanChanged["data"]?["previous_email"] == "alan@example.com")
        #expect(alanChanged["user_agent"] == "Erasure Test Browser/1.0" && alanChanged["ip"] != .null)
    }

    /// The rule for `data`, on shapes no event has yet: nested objects and arrays, address-like
    /// member names, `*_email` members whatever their value.
    @Test func erasedEventDataKeepsNoAddressAtAnyDepth() throws {
        let data: JSON = [
            "by": "admin", "count": 2, "email_verified": true, "purge_at": "2027-01-01T00:00:00Z",
            "email": "a@example.com", "old_email": "b@example.com", "new_email": ["masked": "c***"],
            "note": "mail d@example.com please", "at": "@ home", "nested": ["to": ["e@example.com", "kept"], "who": "f@example.com", "id": "usr_1"],
            "g@example.com": 1,
        ]
        let redacted = ErasedEventData.redacted(data)
        #expect(redacted == [
            "by": "admin", "count": 2, "email_verified": true, "purge_at": "2027-01-01T00:00:00Z", "at": "@ home",
            "nested": ["to": ["kept"], "id": "usr_1"],
        ])
    }
}
