import Foundation
import GatehouseCore
import GatehouseCrypto
import GatehouseTesting
import Testing

/// Custom data on the user (API.md, "Moving users in and out", 2026-12-05): `user_metadata` and
/// `display_name` through `PATCH /v1/me`, `app_metadata` (and the others) through `PATCH
/// /v1/admin/users/{id}`, the access token's `app_metadata` claim (never `user_metadata`), the
/// checks, tenant isolation and `user.updated`. The real server, both databases.
@Suite("Custom data on the user")
struct CustomDataAPITests {
    final class World: Sendable {
        let hooks: WebhookSink
        let server: TestServer
        let app: TestServer.CreatedApp

        init(_ kind: TestDatabaseKind) throws {
            hooks = try WebhookSink()
            server = try TestServer(kind) { $0.allowPrivateOutbound = true }
            server.gatehouse.stopBackgroundWork()
            app = try server.createApp([
                "name": "Custom", "rate_limits": ["auth_per_minute_per_ip": 1000],
                "webhooks": [["url": .string(hooks.url()), "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "events": ["user.updated"]]],
            ])
        }

        func stop() {
            server.stop()
            hooks.stop()
        }

        func patchMe(_ token: String, _ body: JSON) throws -> TestResponse {
            try server.request("PATCH", "/v1/me", appKey: app.appKey, bearer: token, json: body)
        }

        func patchUser(_ id: String, _ body: JSON, key: String? = nil) throws -> TestResponse {
            try server.request("PATCH", "/v1/admin/users/\(id)", bearer: key ?? app.secretKey, json: body)
        }

        func updatedEvents(_ user: String) throws -> [JSON] {
            try server.request("GET", "/v1/admin/events?type=user.updated&user_id=\(user)", bearer: app.secretKey).json?["data"]?.arrayValue ?? []
        }

        func deliverWebhooks() throws -> [String] {
            while try server.gatehouse.outboxWorker.runOnce() > 0 {}
            return hooks.deliveries.compactMap { $0.json?["type"]?.stringValue }
        }
    }

    static func claims(_ token: String) throws -> JSON { try JSON.parse(JWT.parse(token).payload) }

    static func fieldErrors(_ response: TestResponse) -> Set<String> {
        Set((response.json?["errors"]?.arrayValue ?? []).compactMap { $0["field"]?.stringValue })
    }

    @Test(arguments: TestDatabase.kinds)
    func theUserSetsUserMetadataAndDisplayNameThroughPatchMe(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let session = try world.server.signUp(world.app)
        let token = try #require(session["access_token"]?.stringValue)
        let userID = try #require(session["user"]?["id"]?.stringValue)
        // A new user has empty custom data and no display name.
        #expect(session["user"]?["app_metadata"] == [:])
        #expect(session["user"]?["user_metadata"] == [:])
        #expect(session["user"]?["display_name"] == .null)

        let preferences: JSON = ["theme": "dark", "pinned": [1, 2, ["deep": true]], "ratio": .double(0.5)]
        let patched = try world.patchMe(token, ["display_name": "  Ada L.  ", "user_metadata": preferences])
        #expect(patched.status == 200, "\(patched.json ?? .null)")
        #expect(patched.data?["display_name"] == "Ada L.", "trimmed")
        #expect(patched.data?["user_metadata"] == preferences)
        #expect(patched.data?["app_metadata"] == [:])
        let me = try world.server.request("GET", "/v1/me", appKey: world.app.appKey, bearer: token)
        #expect(me.data?["display_name"] == "Ada L." && me.data?["user_metadata"] == preferences)
        // The sign-in response's user object carries them too.
        let signIn = try world.server.request(
            "POST", "/v1/auth/signin", appKey: world.app.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"])
        #expect(signIn.data?["user"]?["display_name"] == "Ada L." && signIn.data?["user"]?["user_metadata"] == preferences)
        // The token names the user by the display name, and never carries user_metadata.
        let claims = try Self.claims(try #require(signIn.data?["access_token"]?.stringValue))
        #expect(claims["name"] == "Ada L.")
        #expect(claims["user_metadata"] == nil)
        #expect(claims["app_metadata"] == nil, "empty app_metadata is left out")

        // An object replaces the whole; absent keeps; null empties and clears.
        #expect(try world.patchMe(token, ["user_metadata": ["theme": "light"]]).data?["user_metadata"] == ["theme": "light"])
        #expect(try world.patchMe(token, ["first_name": "Ada"]).data?["display_name"] == "Ada L.")
        let cleared = try world.patchMe(token, ["user_metadata": .null, "display_name": .null])
        #expect(cleared.status == 200)
        #expect(cleared.data?["user_metadata"] == [:] && cleared.data?["display_name"] == .null)
        #expect(try world.patchMe(token, ["display_name": "Ada"]).data?["display_name"] == "Ada")
        #expect(try world.patchMe(token, ["display_name": "   "]).data?["display_name"] == .null, "empty clears, as for names")

        // Each change is one user.updated naming what changed; no change, no event.
        #expect(try world.patchMe(token, ["user_metadata": [:], "display_name": .null]).status == 200)
        let fields = try world.updatedEvents(userID).map { $0["data"]?["fields"] ?? .null }
        #expect(fields.count == 6, "\(fields)")
        #expect(fields.last == ["display_name", "user_metadata"], "oldest last: the first change named both")
        #expect(fields.first == ["display_name"])
        #expect(try world.deliverWebhooks().filter { $0 == "user.updated" }.count == 6)

        // The user cannot set app_metadata.
        let refused = try world.patchMe(token, ["app_metadata": ["role": "admin"]])
        #expect(refused.status == 400 && Self.fieldErrors(refused) == ["app_metadata"])
    }

    @Test(arguments: TestDatabase.kinds)
    func badCustomDataIs400NamingEveryField(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let session = try world.server.signUp(world.app)
        let token = try #require(session["access_token"]?.stringValue)
        let userID = try #require(session["user"]?["id"]?.stringValue)
        var deep: JSON = ["e": 1]
        for key in ["d", "c", "b", "a"] { deep = [key: deep] }
        var tooDeep: JSON = [deep]
        tooDeep = ["f": tooDeep]
        let big: JSON = ["blob": .string(String(repeating: "x", count: UserMetadata.maxBytes))]
        for bad: JSON in ["a string", [1, 2], 7, tooDeep, big] {
            let response = try world.patchMe(token, ["user_metadata": bad])
            #expect(response.status == 400 && response.json?["code"] == "request/validation-failed", "\(bad)")
            #expect(Self.fieldErrors(response) == ["user_metadata"], "\(bad)")
            let admin = try world.patchUser(userID, ["app_metadata": bad])
            #expect(admin.status == 400 && Self.fieldErrors(admin) == ["app_metadata"], "\(bad)")
        }
        // Five levels are allowed; so is exactly 4096 bytes.
        #expect(try world.patchMe(token, ["user_metadata": deep]).status == 200)
        let padding = UserMetadata.maxBytes - JSON.object(["blob": ""]).serialized().count
        let full: JSON = ["blob": .string(String(repeating: "x", count: padding))]
        #expect(try world.patchUser(userID, ["app_metadata": full]).status == 200)

        for bad in [String(repeating: "n", count: 101), "Ada\u{202E}", "A\u{200B}da"] {
            let response = try world.patchMe(token, ["display_name": .string(bad)])
            #expect(response.status == 400 && Self.fieldErrors(response) == ["display_name"], "\(bad)")
        }
        #expect(try world.patchMe(token, ["display_name": .string(String(repeating: "n", count: 100))]).status == 200)
        // Every field at once, and nothing written.
        let both = try world.patchMe(token, ["display_name": .string(String(repeating: "n", count: 101)), "user_metadata": [1], "first_name": "Ada"])
        #expect(Self.fieldErrors(both) == ["display_name", "user_metadata"])
        let me = try world.server.request("GET", "/v1/me", appKey: world.app.appKey, bearer: token)
        #expect(me.data?["first_name"] == .null && me.data?["user_metadata"] == deep)
        let admin = try world.patchUser(userID, ["app_metadata": "x", "user_metadata": [1], "display_name": .string(String(repeating: "n", count: 101))])
        #expect(Self.fieldErrors(admin) == ["app_metadata", "user_metadata", "display_name"])
        let typed = try world.patchUser(userID, ["display_name": 5])
        #expect(typed.status == 400 && Self.fieldErrors(typed) == ["display_name"])
    }

    /// The largest token there can be (full app_metadata, an email and a display name of 4-byte
    /// characters) is over 8 KiB, and the server still takes it.
    @Test(arguments: TestDatabase.kinds)
    func theLargestAccessTokenIsStillAccepted(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let email = String(repeating: "\u{20000}", count: 240) + "@example.com"
        let session = try world.server.signUp(world.app, email: email)
        let userID = try #require(session["user"]?["id"]?.stringValue)
        let padding = UserMetadata.maxBytes - JSON.object(["blob": ""]).serialized().count
        let full: JSON = ["blob": .string(String(repeating: "x", count: padding))]
        let name = String(repeating: "\u{1D49C}", count: 100)
        let patched = try world.patchUser(userID, ["app_metadata": full, "display_name": .string(name)])
        #expect(patched.status == 200, "\(patched.json ?? .null)")
        let refreshed = try world.server.request(
            "POST", "/v1/auth/refresh", appKey: world.app.appKey, json: ["refresh_token": .string(try #require(session["refresh_token"]?.stringValue))])
        let token = try #require(refreshed.data?["access_token"]?.stringValue)
        #expect(token.utf8.count > 8192, "\(token.utf8.count)")
        #expect(try Self.claims(token)["app_metadata"] == full)
        let me = try world.server.request("GET", "/v1/me", appKey: world.app.appKey, bearer: token)
        #expect(me.status == 200, "\(me.json ?? .null)")
    }

    @Test(arguments: TestDatabase.kinds)
    func theAdminSetsAppMetadataAndTheNextAccessTokenCarriesIt(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let session = try world.server.signUp(world.app)
        let token = try #require(session["access_token"]?.stringValue)
        let refresh = try #require(session["refresh_token"]?.stringValue)
        let userID = try #require(session["user"]?["id"]?.stringValue)
        _ = try world.deliverWebhooks()

        let roles: JSON = ["roles": ["editor"], "plan": "pro"]
        let patched = try world.patchUser(userID, ["app_metadata": roles, "user_metadata": ["seen_tour": true], "display_name": "Countess"])
        #expect(patched.status == 200, "\(patched.json ?? .null)")
        #expect(patched.data?["app_metadata"] == roles && patched.data?["user_metadata"] == ["seen_tour": true])
        #expect(patched.data?["display_name"] == "Countess" && patched.data?["id"] == .string(userID))
        #expect(patched.data?["factors"] == [], "the admin's user object")
        let read = try world.server.request("GET", "/v1/admin/users/\(userID)", bearer: world.app.secretKey)
        #expect(read.data?["app_metadata"] == roles)
        let listed = try world.server.request("GET", "/v1/admin/users", bearer: world.app.secretKey)
        #expect(listed.data?.arrayValue?.first?["app_metadata"] == roles)
        // The user sees it at once: the account cache learned of the change.
        let me = try world.server.request("GET", "/v1/me", appKey: world.app.appKey, bearer: token)
        #expect(me.data?["app_metadata"] == roles && me.data?["display_name"] == "Countess")

        // The token minted before says nothing; the next one (a refresh) carries it.
        #expect(try Self.claims(token)["app_metadata"] == nil)
        let refreshed = try world.server.request("POST", "/v1/auth/refresh", appKey: world.app.appKey, json: ["refresh_token": .string(refresh)])
        #expect(refreshed.status == 200)
        let newToken = try #require(refreshed.data?["access_token"]?.stringValue)
        let claims = try Self.claims(newToken)
        #expect(claims["app_metadata"] == roles)
        #expect(claims["user_metadata"] == nil, "never in the token")
        #expect(claims["name"] == "Countess")
        #expect(refreshed.data?["user"]?["app_metadata"] == roles)

        // Recorded as user.updated, and sent.
        let events = try world.updatedEvents(userID)
        #expect(events.count == 1)
        #expect(events.first?["data"]?["fields"] == ["app_metadata", "user_metadata", "display_name"])
        #expect(try world.deliverWebhooks() == ["user.updated"])
        // The same again changes nothing and records nothing.
        #expect(try world.patchUser(userID, ["app_metadata": roles]).status == 200)
        #expect(try world.updatedEvents(userID).count == 1)

        // Another app's admin cannot touch the user, nor can a bad or unknown id be told apart.
        let other = try world.server.createApp(["name": "Other"])
        let foreign = try world.patchUser(userID, ["app_metadata": ["role": "owner"]], key: other.secretKey)
        #expect(foreign.status == 404 && foreign.json?["code"] == "request/not-found")
        #expect(try world.patchUser("usr_nobody", ["app_metadata": [:]]).status == 404)
        #expect(try world.patchUser("not-an-id", ["app_metadata": [:]]).status == 404)
        // Not with the app key or the user's token either.
        #expect(try world.server.request("PATCH", "/v1/admin/users/\(userID)", bearer: token, json: ["app_metadata": [:]]).status == 401)
        #expect(try world.server.request("GET", "/v1/admin/users/\(userID)", bearer: world.app.secretKey).data?["app_metadata"] == roles)
        // Unknown fields are refused.
        let unknown = try world.patchUser(userID, ["email": "x@example.com"])
        #expect(unknown.status == 400 && Self.fieldErrors(unknown) == ["email"])

        // null empties it, and the next token leaves the claim out.
        #expect(try world.patchUser(userID, ["app_metadata": .null]).data?["app_metadata"] == [:])
        let again = try world.server.request(
            "POST", "/v1/auth/refresh", appKey: world.app.appKey, json: ["refresh_token": .string(try #require(refreshed.data?["refresh_token"]?.stringValue))])
        #expect(try Self.claims(try #require(again.data?["access_token"]?.stringValue))["app_metadata"] == nil)
    }
}
