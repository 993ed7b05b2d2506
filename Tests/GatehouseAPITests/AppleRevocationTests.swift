import Foundation
import GatehouseCore
import GatehouseCrypto
import GatehouseSQL
import GatehouseTesting
import Testing

/// A server with the fake Apple and the SMTP sink on one clock, its outbox and jobs stepped by hand.
final class RevocationWorld {
    static let bundleID = "com.example.photos"
    static let teamID = "TEAM123456"

    let clock = ManualClock()
    let apple: FakeApple
    let sink: SMTPSink
    let server: TestServer
    let app: TestServer.CreatedApp

    init(_ kind: TestDatabaseKind) throws {
        apple = try FakeApple(clock: clock)
        sink = try SMTPSink()
        let (appleURL, smtpURL) = (apple.baseURL, sink.url)
        server = try TestServer(kind, clock: clock) {
            $0.appleURL = appleURL
            $0.smtpURL = smtpURL
        }
        server.gatehouse.stopBackgroundWork()
        app = try server.createApp(try Self.settings(apple, name: "Photos"))
    }

    /// An app's settings with an Apple key the fake Apple knows (key id `keyID`).
    static func settings(_ apple: FakeApple, name: String, keyID: String = "KEY1234567") throws -> JSON {
        let credentials = try apple.makeCredentials(teamID: teamID, keyID: keyID)
        return [
            "name": .string(name), "sign_in_methods": ["password", "email_code", "apple"], "rate_limits": ["auth_per_minute_per_ip": 1000],
            "apple": [
                "client_ids": [.string(bundleID)], "team_id": .string(credentials.teamID), "key_id": .string(credentials.keyID),
                "private_key": .string(credentials.privateKeyPEM),
            ],
        ]
    }

    func stop() {
        server.stop()
        apple.stop()
        sink.stop()
    }

    static func hash(_ nonce: String) -> String { Digest.hex(Digest.sha256(Array(nonce.utf8))) }

    /// The native proof with an authorization code, so that Apple's refresh token is kept.
    func appleProof(sub: String, email: String, emailVerified: Bool = true, nonce: String) -> JSON {
        let code = apple.issueCode(for: FakeAppleUser(sub: sub, email: email, emailVerified: emailVerified, nonce: Self.hash(nonce)), clientID: Self.bundleID)
        let token = apple.mintIdentityToken(
            sub: sub, aud: Self.bundleID, email: email, emailVerified: .string(emailVerified ? "true" : "false"), nonce: Self.hash(nonce))
        return ["identity_token": .string(token), "nonce": .string(nonce), "authorization_code": .string(code)]
    }

    func request(_ method: String, _ path: String, bearer: String? = nil, json: JSON? = nil) throws -> TestResponse {
        try server.request(method, path, appKey: app.appKey, bearer: bearer, json: json)
    }

    /// Runs the outbox until nothing is due.
    func deliverAll() throws {
        while try server.gatehouse.outboxWorker.runOnce() > 0 {}
    }

    /// The Apple revocations that reached the fake, as `client_id|token`.
    var revoked: [String] { apple.revokeCalls.map { "\($0["client_id"] ?? "")|\($0["token"] ?? "")" } }

    func events(_ type: String) throws -> [JSON] {
        try server.request("GET", "/v1/admin/events?type=\(type)", bearer: app.secretKey).json?["data"]?.arrayValue ?? []
    }

    func count(_ sql: SQL) throws -> Int { try server.gatehouse.database.query(sql).count }
}

/// Kept Apple tokens are revoked at Apple, through the outbox, whenever they are dropped: at
/// unlinking and when an address's owner takes an account over from a squatter (deletion's own
/// revocations are in `AccountDeletionTests`). Both databases.
@Suite("Apple tokens revoked when dropped")
struct AppleRevocationTests {
    /// Signs up with a password and links Apple with a code: one kept token. Returns the access token.
    func userWithLinkedApple(_ world: RevocationWorld, nonce: String = "link-1") throws -> String {
        let session = try world.server.signUp(world.app, email: "pat@example.com")
        let access = try #require(session["access_token"]?.stringValue)
        let linked = try world.request("POST", "/v1/me/identities/apple", bearer: access, json: world.appleProof(sub: "001.pat", email: "pat@example.com", nonce: nonce))
        #expect(linked.status == 200, "\(linked.text)")
        return access
    }

    @Test(arguments: TestDatabase.kinds)
    func unlinkingAppleRevokesEveryTokenItKeptEvenAfterLinkingAgain(_ kind: TestDatabaseKind) throws {
        let world = try RevocationWorld(kind)
        defer { world.stop() }
        let access = try userWithLinkedApple(world)
        let first = try #require(world.apple.issuedRefreshTokens.last)
        #expect(try world.count("SELECT 1 AS found FROM provider_tokens") == 1)

        let unlinked = try world.request("DELETE", "/v1/me/identities/apple", bearer: access)
        #expect(unlinked.status == 200, "\(unlinked.text)")
        #expect(try world.count("SELECT 1 AS found FROM provider_tokens") == 0, "dropped with the identity")
        let event = try #require(try world.events("identity.unlinked").first)
        #expect(event["data"]?["apple_revocations"] == ["status": "queued", "count": 1])
        #expect(world.apple.revokeCalls.isEmpty, "nothing is sent inside the request")
        try world.deliverAll()
        #expect(world.revoked == ["\(RevocationWorld.bundleID)|\(first)"])

        // Linked again (a new token) and unlinked again: the second token is revoked too, not
        // taken for a repeat of the first.
        world.clock.advance(seconds: 1)
        let relinked = try world.request("POST", "/v1/me/identities/apple", bearer: access, json: world.appleProof(sub: "001.pat", email: "pat@example.com", nonce: "link-2"))
        #expect(relinked.status == 200, "\(relinked.text)")
        let second = try #require(world.apple.issuedRefreshTokens.last)
        #expect(second != first)
        #expect(try world.request("DELETE", "/v1/me/identities/apple", bearer: access).status == 200)
        try world.deliverAll()
        #expect(world.revoked == ["\(RevocationWorld.bundleID)|\(first)", "\(RevocationWorld.bundleID)|\(second)"])
        #expect(world.apple.errors.isEmpty, "each client secret was valid")
        // Unlinking another method revokes nothing at Apple.
        #expect(try world.request("POST", "/v1/me/identities/apple", bearer: access, json: world.appleProof(sub: "001.pat", email: "pat@example.com", nonce: "link-3")).status == 200)
        #expect(try world.request("DELETE", "/v1/me/identities/password", bearer: access).status == 200)
        try world.deliverAll()
        #expect(world.revoked.count == 2)
        #expect(try world.count("SELECT 1 AS found FROM provider_tokens") == 1)
    }

    /// A squatter signed in with Apple under someone's address (unverified) and Gatehouse kept its
    /// Apple token; when the address's owner proves it by code, the squatter's methods go and its
    /// token is revoked at Apple.
    @Test(arguments: TestDatabase.kinds)
    func anAddressProvedRevokesTheSquattersAppleToken(_ kind: TestDatabaseKind) throws {
        let world = try RevocationWorld(kind)
        defer { world.stop() }
        let squatter = try world.server.signUp(world.app, email: "victim@example.com", password: "the squatter's password")
        let access = try #require(squatter["access_token"]?.stringValue)
        #expect(squatter["user"]?["email_verified"] == false)
        let linked = try world.request(
            "POST", "/v1/me/identities/apple", bearer: access, json: world.appleProof(sub: "001.squatter", email: "squatter@example.net", nonce: "sq-1"))
        #expect(linked.status == 200, "\(linked.text)")
        let token = try #require(world.apple.issuedRefreshTokens.last)
        #expect(try world.count("SELECT 1 AS found FROM provider_tokens") == 1)

        try world.deliverAll()  // the verification mail, unread by the squatter
        #expect(world.apple.revokeCalls.isEmpty)
        #expect(try world.request("POST", "/v1/auth/email-code/send", json: ["email": "victim@example.com"]).status == 202)
        _ = try world.server.gatehouse.outboxWorker.runOnce()
        let mail = try #require(try world.sink.messages().last { $0.recipients == ["victim@example.com"] })
        let text = try IndependentMailParser.parse(mail.raw).parts.first { $0.contentType == "text/plain" }?.content ?? ""
        let code = try #require(text.range(of: #"\b[0-9]{6}\b"#, options: .regularExpression).map { String(text[$0]) })
        let proved = try world.request("POST", "/v1/auth/email-code/verify", json: ["email": "victim@example.com", "code": .string(code)])
        #expect(proved.status == 200, "\(proved.text)")
        #expect(proved.data?["user"]?["identities"]?.arrayValue?.contains("apple") == false)
        #expect(try world.count("SELECT 1 AS found FROM provider_tokens") == 0)
        let unlinked = try #require(try world.events("identity.unlinked").first)
        let apple = try world.events("identity.unlinked").filter { $0["data"]?["provider"] == "apple" }
        #expect(apple.count == 1 && unlinked["data"]?["reason"] == "address_proved")
        #expect(apple.first?["data"]?["apple_revocations"] == ["status": "queued", "count": 1])

        try world.deliverAll()
        #expect(world.revoked == ["\(RevocationWorld.bundleID)|\(token)"])
        #expect(world.apple.errors.isEmpty)
    }
}
