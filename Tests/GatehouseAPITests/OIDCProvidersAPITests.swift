import Foundation
import GatehouseCore
import GatehouseCrypto
import GatehouseTesting
import Synchronization
import Testing

/// Gatehouse with an app that defines its own providers (`oidc_providers`), each played by a
/// ``FakeOIDCProvider`` over real HTTP: a generic issuer, Kakao, Microsoft and LINE.
final class OIDCWorld {
    static let acmeClient = "acme-web-client"
    static let kakaoKey = "kakao-native-app-key"
    static let microsoftClient = "00000000-aaaa-bbbb-cccc-000000000001"
    static let lineChannel = "1650000000"
    static let lineSecret = "line-channel-secret-7f3a"
    static let tenantA = "11111111-2222-3333-4444-555555555555"
    static let tenantB = "99999999-8888-7777-6666-555555555555"

    let clock = ManualClock()
    let acme: FakeOIDCProvider
    let kakao: FakeOIDCProvider
    let microsoft: FakeOIDCProvider
    let line: FakeOIDCProvider
    let server: TestServer
    let app: TestServer.CreatedApp

    init(_ kind: TestDatabaseKind) throws {
        acme = try FakeOIDCProvider(.generic(path: "/realms/acme"), clock: clock, kidPrefix: "acme-key")
        kakao = try FakeOIDCProvider(.fixed(issuer: "https://kauth.kakao.com"), clock: clock, kidPrefix: "kakao-key")
        microsoft = try FakeOIDCProvider(.microsoft, clock: clock, kidPrefix: "ms-key")
        line = try FakeOIDCProvider(.fixed(issuer: "https://access.line.me"), clock: clock, kidPrefix: "line-key")
        let (kakaoURL, microsoftURL, lineURL) = (kakao.baseURL, microsoft.baseURL, line.baseURL)
        server = try TestServer(kind, clock: clock) {
            $0.allowPrivateOutbound = true  // the generic issuer is on 127.0.0.1
            $0.providerURLs["kakao"] = kakaoURL
            $0.providerURLs["microsoft"] = microsoftURL
            $0.providerURLs["line"] = lineURL
        }
        app = try server.createApp(Self.settings(acmeIssuer: acme.issuer))
    }

    static func settings(acmeIssuer: String, name: String = "Photos") -> JSON {
        [
            "name": .string(name), "rate_limits": ["auth_per_minute_per_ip": 1000],
            "sign_in_methods": ["password", "acme", "kakao", "ms", "ms-one", "line", "naver"],
            "oidc_providers": [
                ["id": "acme", "kind": "oidc", "client_ids": [.string(acmeClient)], "issuer": .string(acmeIssuer)],
                ["id": "kakao", "kind": "kakao", "client_ids": [.string(kakaoKey)]],
                ["id": "ms", "kind": "microsoft", "client_ids": [.string(microsoftClient)], "issuer": "common"],
                ["id": "ms-one", "kind": "microsoft", "client_ids": [.string(microsoftClient)], "issuer": .string(tenantA)],
                ["id": "line", "kind": "line", "client_ids": [.string(lineChannel)], "client_secret": .string(lineSecret)],
                ["id": "naver", "kind": "naver", "client_ids": ["naver-client"]],
            ],
        ]
    }

    func stop() {
        server.stop()
        acme.stop()
        kakao.stop()
        microsoft.stop()
        line.stop()
    }

    func signIn(_ id: String, _ token: String, nonce: String?, appKey: String? = nil) throws -> TestResponse {
        var body: [String: JSON] = ["id_token": .string(token)]
        if let nonce { body["nonce"] = .string(nonce) }
        return try server.request("POST", "/v1/auth/oidc/\(id)", appKey: appKey ?? app.appKey, json: .object(body))
    }

    func events(of userID: String) throws -> [(type: String, data: String)] {
        try server.gatehouse.database.query("SELECT type, data FROM events WHERE user_id = \(userID) ORDER BY type").map {
            (try $0.string("type"), try $0.optionalString("data") ?? "")
        }
    }
}

@Suite("Providers a tenant defines: OpenID Connect, Kakao, Microsoft, LINE")
struct OIDCProvidersAPITests {
    /// Sign-up (201) then sign-in (200) to the same user, with `amr` `ext`, the identity named by
    /// the provider's id, and the events' `method` the id.
    func signsUpThenIn(_ world: OIDCWorld, _ id: String, mint: (String) -> String) throws -> JSON {
        let first = try world.signIn(id, mint("nonce-\(id)-1"), nonce: "nonce-\(id)-1")
        #expect(first.status == 201, "\(id): \(first.json ?? .null)")
        let user = try #require(first.data?["user"])
        #expect(user["identities"] == [.string(id)])
        let access = try #require(first.data?["access_token"]?.stringValue)
        #expect(try JSON.parse(JWT.parse(access).payload)["amr"] == ["ext"])
        let again = try world.signIn(id, mint("nonce-\(id)-2"), nonce: "nonce-\(id)-2")
        #expect(again.status == 200)
        #expect(again.data?["is_new_user"] == false)
        #expect(again.data?["user"]?["id"] == user["id"])
        let events = try world.events(of: try #require(user["id"]?.stringValue))
        #expect(events.map(\.type) == ["user.signed_in", "user.signed_in", "user.signed_up"])
        #expect(events.allSatisfy { (try? JSON.parse(Array($0.data.utf8)))?["method"] == .string(id) })
        return user
    }

    /// A tenant's issuer may sign any number: times beyond reason are refused, never summed into
    /// an overflow (which would stop the server for every tenant).
    @Test(arguments: TestDatabase.kinds)
    func absurdTimesInASignedTokenAreRefused(_ kind: TestDatabaseKind) throws {
        let world = try OIDCWorld(kind)
        defer { world.stop() }
        for (index, exp) in [Int64.max, 10_000_000_000_000_000, 1_000_000_000_000_000].enumerated() {
            let token = world.acme.mintIDToken(sub: "acme-9", aud: OIDCWorld.acmeClient, nonce: "t\(index)", expiresAt: exp)
            #expect(try world.signIn("acme", token, nonce: "t\(index)").problemCode == "auth/invalid-credential", "exp \(exp)")
        }
        let lineToken = world.line.mintIDToken(
            sub: "U1", aud: OIDCWorld.lineChannel, nonce: "t9", issuedAt: Int64.min, expiresAt: Int64.max, hs256Secret: OIDCWorld.lineSecret)
        #expect(try world.signIn("line", lineToken, nonce: "t9").problemCode == "auth/invalid-credential")
        // The server still answers.
        #expect(try world.signIn("acme", world.acme.mintIDToken(sub: "acme-9", aud: OIDCWorld.acmeClient, nonce: "t8"), nonce: "t8").status == 201)
    }

    /// A provider id with users keeps its kind and issuer: another issuer under the same id could
    /// name an existing user's subject and be signed in as them.
    @Test(arguments: TestDatabase.kinds)
    func aProviderWithUsersKeepsItsKindAndIssuer(_ kind: TestDatabaseKind) throws {
        let world = try OIDCWorld(kind)
        defer { world.stop() }
        let first = try world.signIn("acme", world.acme.mintIDToken(sub: "acme-7", aud: OIDCWorld.acmeClient, nonce: "k1"), nonce: "k1")
        #expect(first.status == 201)
        func patch(_ providers: JSON, methods: JSON? = nil) throws -> TestResponse {
            var body: [String: JSON] = ["oidc_providers": providers]
            if let methods { body["sign_in_methods"] = methods }
            return try world.server.request("PATCH", "/v1/admin/app", bearer: world.app.secretKey, json: .object(body))
        }
        let current = try #require(OIDCWorld.settings(acmeIssuer: world.acme.issuer)["oidc_providers"]?.arrayValue)
        var moved = current
        moved[0] = ["id": "acme", "kind": "oidc", "client_ids": [.string(OIDCWorld.acmeClient)], "issuer": "https://attacker.example/realm"]
        let refused = try patch(.array(moved))
        #expect(refused.status == 400 && refused.json?["errors"]?.arrayValue?.first?["field"] == "oidc_providers[0]", "\(refused.text)")
        var retyped = current
        retyped[0] = ["id": "acme", "kind": "kakao", "client_ids": [.string(OIDCWorld.acmeClient)]]
        #expect(try patch(.array(retyped)).status == 400)
        // Nor can it be removed (and defined again with another issuer): switched off, it stays.
        let methods: JSON = ["password", "kakao", "ms", "ms-one", "line", "naver"]
        let removal = try patch(.array(Array(current.dropFirst())), methods: methods)
        #expect(removal.status == 400 && removal.json?["errors"]?.arrayValue?.first?["field"] == "oidc_providers", "\(removal.text)")
        let off = try world.server.request("PATCH", "/v1/admin/app", bearer: world.app.secretKey, json: ["sign_in_methods": methods])
        #expect(off.status == 200)
        #expect(try world.signIn("acme", world.acme.mintIDToken(sub: "acme-7", aud: OIDCWorld.acmeClient, nonce: "k2"), nonce: "k2").problemCode == "auth/sign-in-method-disabled")
        // Another client id of the same issuer, and a new id for the new issuer, are fine; so is a
        // multi-tenant Microsoft provider narrowed to one tenant.
        var kept = current
        kept[0] = ["id": "acme", "kind": "oidc", "client_ids": ["another-client"], "issuer": .string(world.acme.issuer)]
        kept.append(["id": "acme2", "kind": "oidc", "client_ids": ["x"], "issuer": "https://attacker.example/realm"])
        kept[2] = ["id": "ms", "kind": "microsoft", "client_ids": [.string(OIDCWorld.microsoftClient)], "issuer": .string(OIDCWorld.tenantA)]
        let accepted = try patch(.array(kept))
        #expect(accepted.status == 200, "\(accepted.text)")
    }

    @Test(arguments: TestDatabase.kinds)
    func eachKindSignsUpThenSignsIn(_ kind: TestDatabaseKind) throws {
        let world = try OIDCWorld(kind)
        defer { world.stop() }
        let acme = try signsUpThenIn(world, "acme") {
            world.acme.mintIDToken(sub: "acme-1", aud: OIDCWorld.acmeClient, nonce: $0, email: "ana@example.com", emailVerified: true)
        }
        #expect(acme["email"] == "ana@example.com")
        #expect(acme["email_verified"] == true)
        let kakao = try signsUpThenIn(world, "kakao") {
            world.kakao.mintIDToken(sub: "3141592653", aud: OIDCWorld.kakaoKey, nonce: $0, email: "kim@kakao.example", emailVerified: true)
        }
        #expect(kakao["email_verified"] == true)
        // Microsoft, multi-tenant: users of two tenants; an email without xms_edov is not vouched for.
        let inA = try signsUpThenIn(world, "ms") {
            world.microsoft.mintIDToken(sub: "ms-a", aud: OIDCWorld.microsoftClient, nonce: $0, email: "lee@contoso.example", tid: OIDCWorld.tenantA)
        }
        #expect(inA["email"] == "lee@contoso.example")
        #expect(inA["email_verified"] == false)
        let inB = try signsUpThenIn(world, "ms") {
            world.microsoft.mintIDToken(
                sub: "ms-b", aud: OIDCWorld.microsoftClient, nonce: $0, email: "max@fabrikam.example", tid: OIDCWorld.tenantB, extraClaims: ["xms_edov": true])
        }
        #expect(inB["email_verified"] == true)
        #expect(inA["id"] != inB["id"])
        // Single-tenant: its own tenant's users only.
        _ = try signsUpThenIn(world, "ms-one") { world.microsoft.mintIDToken(sub: "ms-one-a", aud: OIDCWorld.microsoftClient, nonce: $0, tid: OIDCWorld.tenantA) }
        let otherTenant = try world.signIn(
            "ms-one", world.microsoft.mintIDToken(sub: "ms-one-b", aud: OIDCWorld.microsoftClient, nonce: "n-b", tid: OIDCWorld.tenantB), nonce: "n-b")
        #expect(otherTenant.status == 401)
        #expect(otherTenant.problemCode == "auth/invalid-credential")
        // A multi-tenant token whose iss names another tenant than its tid.
        let mixed = try world.signIn(
            "ms", world.microsoft.mintIDToken(sub: "ms-c", aud: OIDCWorld.microsoftClient, nonce: "n-c", tid: OIDCWorld.tenantB,
                issuer: "https://login.microsoftonline.com/\(OIDCWorld.tenantA)/v2.0"), nonce: "n-c")
        #expect(mixed.status == 401)
        // LINE: HS256 under the channel secret; the email is never taken as verified.
        let line = try signsUpThenIn(world, "line") {
            world.line.mintIDToken(sub: "U4af4980629", aud: OIDCWorld.lineChannel, nonce: $0, email: "sato@line.example", hs256Secret: OIDCWorld.lineSecret)
        }
        #expect(line["email_verified"] == false)
        let wrongSecret = try world.signIn(
            "line", world.line.mintIDToken(sub: "U4af4980629", aud: OIDCWorld.lineChannel, nonce: "n-w", hs256Secret: "not-the-channel-secret"), nonce: "n-w")
        #expect(wrongSecret.status == 401)
        #expect(wrongSecret.problemCode == "auth/invalid-credential")
        // HS256 is LINE's only: a generic issuer's token in HS256 under any key is refused.
        let hsElsewhere = try world.signIn("acme", world.acme.mintIDToken(aud: OIDCWorld.acmeClient, nonce: "n-h", hs256Secret: OIDCWorld.lineSecret), nonce: "n-h")
        #expect(hsElsewhere.status == 401)
        // The discovery documents were fetched once each and cached.
        #expect(world.acme.discoveryFetchCount == 1)
        #expect(world.kakao.discoveryFetchCount == 1)
        #expect(world.line.discoveryFetchCount == 0)  // HS256 needs none
        #expect(world.acme.errors.isEmpty && world.kakao.errors.isEmpty && world.microsoft.errors.isEmpty && world.line.errors.isEmpty)
    }

    @Test(arguments: TestDatabase.kinds)
    func badTokensAreRefused(_ kind: TestDatabaseKind) throws {
        let world = try OIDCWorld(kind)
        defer { world.stop() }
        let now = world.clock.nowSeconds
        func acme(_ nonce: String, aud: String = OIDCWorld.acmeClient, issuer: String? = nil, iat: Int64? = nil, exp: Int64? = nil, kid: String? = nil) -> String {
            world.acme.mintIDToken(sub: "acme-bad", aud: aud, nonce: nonce, issuer: issuer, issuedAt: iat, expiresAt: exp, kid: kid)
        }
        let refused: [(String, String)] = [
            ("wrong aud", acme("n1", aud: "someone-elses-client")),
            ("wrong issuer", acme("n1", issuer: "https://evil.example/realms/acme")),
            ("expired", acme("n1", iat: now - 7200, exp: now - 3600)),
            ("wrong nonce", acme("another-nonce")),
            ("kakao's aud at kakao, wrong app key", world.kakao.mintIDToken(aud: "other-kakao-app", nonce: "n1")),
        ]
        for (name, token) in refused {
            let id = name.hasPrefix("kakao") ? "kakao" : "acme"
            let response = try world.signIn(id, token, nonce: "n1")
            #expect(response.status == 401, "\(name)")
            #expect(response.problemCode == "auth/invalid-credential", "\(name)")
        }
        // The nonce is required.
        let noNonce = try world.signIn("acme", acme("n1"), nonce: nil)
        #expect(noNonce.status == 400)
        #expect(noNonce.problemCode == "request/validation-failed")
        // An unknown kid triggers one refetch, then is refused.
        let fetches = world.acme.keysFetchCount
        world.clock.advance(seconds: 31)
        let unknownKid = try world.signIn("acme", acme("n1", kid: "acme-key-404"), nonce: "n1")
        #expect(unknownKid.status == 401)
        #expect(world.acme.keysFetchCount == fetches + 1)
        // A new key published after the cache was filled is found by that refetch.
        let newKid = try world.acme.rotateKeys()
        world.clock.advance(seconds: 31)
        let rotated = try world.signIn("acme", acme("n2", kid: newKid), nonce: "n2")
        #expect(rotated.status == 201)
        // The same token again is a replay.
        let replay = try world.signIn("acme", acme("n2", kid: newKid), nonce: "n2")
        #expect(replay.status == 401)

        // Unknown ids, a provider defined but not offered, a kind without ID tokens.
        #expect(try world.signIn("nobody", acme("n3"), nonce: "n3").status == 404)
        let notOffered = try world.server.request(
            "PATCH", "/v1/admin/app", bearer: world.app.secretKey, json: ["sign_in_methods": ["password", "kakao", "ms", "ms-one", "line", "naver"]])
        #expect(notOffered.status == 200)
        #expect(try world.signIn("acme", acme("n4"), nonce: "n4").problemCode == "auth/sign-in-method-disabled")
        // (Naver's access tokens: AccessTokenProvidersAPITests.)
        let naverIDToken = try world.signIn("naver", acme("n5"), nonce: "n5")
        #expect(naverIDToken.status == 400)
    }

    @Test(arguments: TestDatabase.kinds)
    func anotherAppsProviderIsNotThisAppsEvenUnderTheSameID(_ kind: TestDatabaseKind) throws {
        let world = try OIDCWorld(kind)
        defer { world.stop() }
        let other = try FakeOIDCProvider(.generic(path: "/realms/other"), clock: world.clock, kidPrefix: "other-key")
        defer { other.stop() }
        var settings = try #require(OIDCWorld.settings(acmeIssuer: other.issuer, name: "Other").objectValue)
        settings["oidc_providers"] = [["id": "acme", "kind": "oidc", "client_ids": ["other-client"], "issuer": .string(other.issuer)],
            ["id": "only-b", "kind": "kakao", "client_ids": ["b-kakao"]]]
        settings["sign_in_methods"] = ["password", "acme", "only-b"]
        let appB = try world.server.createApp(.object(settings))
        // B's token is good at B.
        let atB = try world.signIn("acme", other.mintIDToken(sub: "b-1", aud: "other-client", nonce: "n1"), nonce: "n1", appKey: appB.appKey)
        #expect(atB.status == 201)
        // At A, under the same id: another issuer and client; refused.
        let atA = try world.signIn("acme", other.mintIDToken(sub: "b-1", aud: "other-client", nonce: "n2"), nonce: "n2")
        #expect(atA.status == 401)
        // Nor does A's token sign in at B, even with B's client id in aud but A's issuer.
        let aAtB = try world.signIn("acme", world.acme.mintIDToken(sub: "a-1", aud: "other-client", nonce: "n3"), nonce: "n3", appKey: appB.appKey)
        #expect(aAtB.status == 401)
        // A provider only B defines is unknown at A.
        #expect(try world.signIn("only-b", world.kakao.mintIDToken(aud: "b-kakao", nonce: "n4"), nonce: "n4").status == 404)
        // A's public settings name A's providers only.
        let publicA = try world.server.request("GET", "/v1/app", appKey: world.app.appKey)
        #expect(publicA.data?["sign_in_methods"] == ["password", "acme", "kakao", "ms", "ms-one", "line", "naver"])
        let publicB = try world.server.request("GET", "/v1/app", appKey: appB.appKey)
        #expect(publicB.data?["sign_in_methods"] == ["password", "acme", "only-b"])
    }

    @Test(arguments: TestDatabase.kinds)
    func onlyAnEmailTheProviderVouchesForCollides(_ kind: TestDatabaseKind) throws {
        let world = try OIDCWorld(kind)
        defer { world.stop() }
        _ = try world.server.signUp(world.app, email: "kim@example.com")
        // Kakao says the address is verified: it is the password account's, refused (email_collision reject).
        let kakao = try world.signIn(
            "kakao", world.kakao.mintIDToken(sub: "k-kim", aud: OIDCWorld.kakaoKey, nonce: "n1", email: "kim@example.com", emailVerified: true), nonce: "n1")
        #expect(kakao.status == 409)
        #expect(kakao.problemCode == "auth/account-exists-with-different-credential")
        // Microsoft without xms_edov and LINE vouch for nothing: a new account, its address unverified.
        let microsoft = try world.signIn(
            "ms", world.microsoft.mintIDToken(sub: "ms-kim", aud: OIDCWorld.microsoftClient, nonce: "n2", email: "kim@example.com", tid: OIDCWorld.tenantA),
            nonce: "n2")
        #expect(microsoft.status == 201)
        #expect(microsoft.data?["user"]?["email_verified"] == false)
        let line = try world.signIn(
            "line", world.line.mintIDToken(sub: "U-kim", aud: OIDCWorld.lineChannel, nonce: "n3", email: "kim@example.com", emailVerified: true,
                hs256Secret: OIDCWorld.lineSecret), nonce: "n3")
        #expect(line.status == 201)
        #expect(line.data?["user"]?["email_verified"] == false)
        // With xms_edov, Microsoft's address counts: a collision.
        let vouched = try world.signIn(
            "ms", world.microsoft.mintIDToken(sub: "ms-kim-2", aud: OIDCWorld.microsoftClient, nonce: "n4", email: "kim@example.com", tid: OIDCWorld.tenantB,
                extraClaims: ["xms_edov": true]), nonce: "n4")
        #expect(vouched.problemCode == "auth/account-exists-with-different-credential")
    }

    @Test(arguments: TestDatabase.kinds)
    func aTenantWhoseIssuerHangsHoldsAFewThreadsNotTheServer(_ kind: TestDatabaseKind) throws {
        let world = try OIDCWorld(kind)
        defer { world.stop() }
        let stalling = try StallingServer()
        defer { stalling.stop() }
        let slow = try world.server.createApp([
            "name": "Slow", "rate_limits": ["auth_per_minute_per_ip": 1000], "sign_in_methods": ["password", "hang"],
            "oidc_providers": [["id": "hang", "kind": "oidc", "client_ids": ["c"], "issuer": .string(stalling.url("realm"))]],
        ])
        let answers = Mutex<[(status: Int, seconds: Double)]>([])
        let (server, slowKey) = (world.server, slow.appKey)
        let token = world.acme.mintIDToken(aud: "c", nonce: "n")
        let started = Date()
        // Twelve at once (threads of their own: concurrentPerform would run as many as there are cores).
        let group = DispatchGroup()
        for _ in 0..<12 {
            group.enter()
            Thread.detachNewThread {
                let began = Date()
                let status = (try? server.request("POST", "/v1/auth/oidc/hang", appKey: slowKey, json: ["id_token": .string(token), "nonce": "n"]).status) ?? 0
                answers.withLock { $0.append((status, Date().timeIntervalSince(began))) }
                group.leave()
            }
        }
        Thread.sleep(forTimeInterval: 1)
        // Another app's sign-in is answered at once meanwhile.
        let other = try world.signIn("acme", world.acme.mintIDToken(sub: "busy-day", aud: OIDCWorld.acmeClient, nonce: "n1"), nonce: "n1")
        #expect(other.status == 201)
        #expect(Date().timeIntervalSince(started) < 5)
        group.wait()
        let all = answers.withLock { $0 }
        #expect(all.count == 12)
        #expect(all.allSatisfy { $0.status == 503 })
        // At most the per-app bound (half the provider threads) reached the issuer; the rest were refused without waiting.
        let bound = world.server.gatehouse.configuration.providerThreads / 2
        #expect(stalling.connections <= bound)
        #expect(all.filter { $0.seconds < 2 }.count >= 12 - bound)
    }

    /// Two tenants whose issuers hang hold at most three quarters of the provider threads between
    /// them: a Kakao sign-in of a third app is still answered at once.
    @Test
    func twoTenantsWhoseIssuersHangLeaveThreadsToTheOthers() throws {
        let world = try OIDCWorld(.sqlite)
        defer { world.stop() }
        let stalling = try StallingServer()
        defer { stalling.stop() }
        let keys = try (1...2).map { n in
            try world.server.createApp([
                "name": .string("Slow \(n)"), "rate_limits": ["auth_per_minute_per_ip": 1000], "sign_in_methods": ["password", "hang"],
                "oidc_providers": [["id": "hang", "kind": "oidc", "client_ids": ["c"], "issuer": .string(stalling.url("realm\(n)"))]],
            ]).appKey
        }
        let server = world.server
        let token = world.acme.mintIDToken(aud: "c", nonce: "n")
        let group = DispatchGroup()
        let finished = Mutex(0)
        for key in keys {
            for _ in 0..<8 {
                group.enter()
                Thread.detachNewThread {
                    _ = try? server.request("POST", "/v1/auth/oidc/hang", appKey: key, json: ["id_token": .string(token), "nonce": "n"])
                    finished.withLock { $0 += 1 }
                    group.leave()
                }
            }
        }
        // Until every call has either reached an issuer or been refused.
        for _ in 0..<100 where finished.withLock({ $0 }) + stalling.connections < 16 { Thread.sleep(forTimeInterval: 0.05) }
        let kakao = try world.signIn("kakao", world.kakao.mintIDToken(sub: "k-busy", aud: OIDCWorld.kakaoKey, nonce: "k1"), nonce: "k1")
        #expect(kakao.status == 201)
        // Answered while every call that reached the hanging issuers still hangs (only the refused ones are back).
        #expect(finished.withLock { $0 } == 16 - stalling.connections)
        group.wait()
        #expect(stalling.connections <= world.server.gatehouse.configuration.providerThreads * 3 / 4)
    }

    /// An imported identity of one of the app's providers signs its user in with that provider
    /// at once; an id the app does not define is the line's error; the export gives it back.
    @Test(arguments: TestDatabase.kinds)
    func importedIdentitiesOfTheAppsProvidersSignIn(_ kind: TestDatabaseKind) throws {
        let world = try OIDCWorld(kind)
        defer { world.stop() }
        let lines = [
            #"{"email": "imported@example.com", "email_verified": true, "identities": [{"provider": "acme", "subject": "acme-imported"}, {"provider": "kakao", "subject": "k-imported"}]}"#,
            #"{"email": "nobody@example.com", "identities": [{"provider": "not-ours", "subject": "x"}]}"#,
        ].joined(separator: "\n")
        let imported = try world.server.request(
            "POST", "/v1/admin/users/import", bearer: world.app.secretKey, headers: [("Content-Type", "application/x-ndjson")], body: Array(lines.utf8))
        #expect(imported.status == 200, "\(imported.text)")
        #expect(imported.data?["imported"] == 1 && imported.data?["failed"] == 1)
        #expect(imported.data?["errors"]?.arrayValue?.first?["line"] == 2)
        let signedIn = try world.signIn("acme", world.acme.mintIDToken(sub: "acme-imported", aud: OIDCWorld.acmeClient, nonce: "imp1"), nonce: "imp1")
        #expect(signedIn.status == 200 && signedIn.data?["is_new_user"] == false, "\(signedIn.text)")
        #expect(signedIn.data?["user"]?["email"] == "imported@example.com")
        #expect(signedIn.data?["user"]?["identities"] == ["acme", "kakao"])
        let export = try world.server.request("GET", "/v1/admin/users/export", bearer: world.app.secretKey)
        #expect(export.text.contains(#""provider":"acme""#) && export.text.contains(#""subject":"acme-imported""#), "\(export.text)")
        // The same line again is skipped: the identity is taken.
        let again = try world.server.request(
            "POST", "/v1/admin/users/import", bearer: world.app.secretKey, headers: [("Content-Type", "application/x-ndjson")],
            body: Array(#"{"identities": [{"provider": "acme", "subject": "acme-imported"}]}"#.utf8))
        #expect(again.data?["skipped"] == 1)
    }

    /// Under `mfa.policy: required`, a tenant provider's sign-in goes through the second step and
    /// the session it opens still names the provider (the list, the event), not `external`.
    @Test(arguments: TestDatabase.kinds)
    func theSecondStepKeepsTheProvidersName(_ kind: TestDatabaseKind) throws {
        let world = try OIDCWorld(kind)
        defer { world.stop() }
        var settings = OIDCWorld.settings(acmeIssuer: world.acme.issuer, name: "Strict")
        settings = settings.merging(patch: ["mfa": ["policy": "required", "methods": ["totp"]]])
        let strict = try world.server.createApp(settings)
        let token = world.acme.mintIDToken(sub: "acme-mfa", aud: OIDCWorld.acmeClient, nonce: "m1")
        let gated = try world.signIn("acme", token, nonce: "m1", appKey: strict.appKey)
        #expect(gated.status == 401 && gated.problemCode == "auth/mfa-required", "\(gated.text)")
        let mfaToken = try #require(gated.json?["mfa_token"]?.stringValue)
        let begun = try world.server.request("POST", "/v1/me/mfa/totp", appKey: strict.appKey, bearer: mfaToken, json: [:])
        let id = try #require(begun.data?["id"]?.stringValue)
        let secret = try #require(begun.data?["secret"]?.stringValue.flatMap(Base32.decode))
        let code = TOTP.code(secret: secret, step: TOTP.step(at: world.clock.nowMillis() / 1000))
        #expect(try world.server.request("POST", "/v1/me/mfa/totp/\(id)/confirm", appKey: strict.appKey, bearer: mfaToken, json: ["code": .string(code)]).status == 200)
        let session = try world.server.request("POST", "/v1/auth/mfa/verify", appKey: strict.appKey, json: ["mfa_token": .string(mfaToken)])
        #expect(session.status == 201, "\(session.text)")
        let access = try #require(session.data?["access_token"]?.stringValue)
        let sessions = try world.server.request("GET", "/v1/me/sessions", appKey: strict.appKey, bearer: access)
        #expect(sessions.data?.arrayValue?.first?["method"] == "acme", "\(sessions.text)")
        let userID = try #require(session.data?["user"]?["id"]?.stringValue)
        let signedIn = try world.events(of: userID).filter { $0.type == "user.signed_in" }
        #expect(signedIn.count == 1 && (try? JSON.parse(Array(signedIn[0].data.utf8)))?["method"] == "acme", "\(signedIn)")
    }

    @Test(arguments: TestDatabase.kinds)
    func settingsAreValidatedAndTheSecretSealed(_ kind: TestDatabaseKind) throws {
        let world = try OIDCWorld(kind)
        defer { world.stop() }
        func create(_ providers: JSON, methods: JSON = ["password"]) throws -> TestResponse {
            try world.server.request(
                "POST", "/v1/admin/apps", bearer: TestServer.adminToken, json: ["name": "X", "oidc_providers": providers, "sign_in_methods": methods])
        }
        func fields(_ response: TestResponse) -> [String] { response.json?["errors"]?.arrayValue?.compactMap { $0["field"]?.stringValue } ?? [] }
        let cases: [(JSON, String)] = [
            ([["id": "Bad_Id", "kind": "oidc", "client_ids": ["c"], "issuer": "https://id.example"]], "oidc_providers[0].id"),
            ([["id": "x", "kind": "kakao", "client_ids": ["c"]]], "oidc_providers[0].id"),
            ([["id": "google", "kind": "kakao", "client_ids": ["c"]]], "oidc_providers[0].id"),
            ([["id": "passkey", "kind": "kakao", "client_ids": ["c"]]], "oidc_providers[0].id"),
            ([["id": "yahoo", "kind": "yahoo", "client_ids": ["c"]]], "oidc_providers[0].kind"),
            ([["id": "corp", "kind": "oidc", "client_ids": ["c"]]], "oidc_providers[0].issuer"),
            ([["id": "corp", "kind": "oidc", "client_ids": ["c"], "issuer": "https://id.example/?q=1"]], "oidc_providers[0].issuer"),
            ([["id": "corp", "kind": "kakao", "client_ids": []]], "oidc_providers[0].client_ids"),
            ([["id": "ms", "kind": "microsoft", "client_ids": ["c"], "issuer": "contoso"]], "oidc_providers[0].issuer"),
            ([["id": "line", "kind": "line", "client_ids": ["1"]]], "oidc_providers[0].client_secret"),
            ([["id": "k", "kind": "kakao", "client_ids": ["c"], "client_secret_env": "HOME"]], "oidc_providers[0].client_secret_env"),
            ([["id": "kk", "kind": "kakao", "client_ids": ["c"]], ["id": "kk", "kind": "kakao", "client_ids": ["d"]]], "oidc_providers[1].id"),
            ([["id": "kk", "kind": "kakao", "client_ids": ["c"], "extra": 1]], "oidc_providers[0].extra"),
        ]
        for (providers, field) in cases {
            let response = try create(providers)
            #expect(response.status == 400, "\(field)")
            #expect(fields(response).contains(field), "\(field): \(fields(response))")
        }
        // A sign_in_methods entry that is no method and no provider of the app.
        let undefined = try create([["id": "kk", "kind": "kakao", "client_ids": ["c"]]], methods: ["password", "kk", "zz"])
        #expect(fields(undefined) == ["sign_in_methods"])

        // The channel secret: sealed in the database, {"set": true} to admins, kept by {"set": true}.
        let stored = try world.server.gatehouse.database.query("SELECT settings FROM apps WHERE id = \(world.app.id)")
        #expect(try !stored[0].string("settings").contains(OIDCWorld.lineSecret))
        let shown = try world.server.request("GET", "/v1/admin/app", bearer: world.app.secretKey)
        let lineShown = shown.data?["oidc_providers"]?.arrayValue?.first { $0["id"] == "line" }
        #expect(lineShown?["client_secret"] == ["set": true])
        #expect(!shown.text.contains(OIDCWorld.lineSecret))
        let resent = try world.server.request(
            "PATCH", "/v1/admin/app", bearer: world.app.secretKey, json: ["oidc_providers": try #require(shown.data?["oidc_providers"])])
        #expect(resent.status == 200)
        let stillVerifies = try world.signIn(
            "line", world.line.mintIDToken(sub: "U1", aud: OIDCWorld.lineChannel, nonce: "n1", hs256Secret: OIDCWorld.lineSecret), nonce: "n1")
        #expect(stillVerifies.status == 201)
    }

    @Test(arguments: TestDatabase.kinds)
    func linkingUnlinkingAndReauthenticating(_ kind: TestDatabaseKind) throws {
        let world = try OIDCWorld(kind)
        defer { world.stop() }
        let token = try #require(try world.server.signUp(world.app, email: "pat@example.com")["access_token"]?.stringValue)
        func patToken(_ nonce: String) -> String { world.kakao.mintIDToken(sub: "kakao-pat", aud: OIDCWorld.kakaoKey, nonce: nonce) }
        let withoutNonce = try world.server.request("POST", "/v1/me/identities/kakao", appKey: world.app.appKey, bearer: token, json: ["id_token": .string(patToken("n0"))])
        #expect(withoutNonce.problemCode == "request/validation-failed")
        let linked = try world.server.request(
            "POST", "/v1/me/identities/kakao", appKey: world.app.appKey, bearer: token, json: ["id_token": .string(patToken("n1")), "nonce": "n1"])
        #expect(linked.status == 200)
        #expect(Set(linked.data?.arrayValue?.compactMap { $0["provider"]?.stringValue } ?? []) == ["password", "kakao"])
        // Kakao now signs in to the same account.
        let viaKakao = try world.signIn("kakao", patToken("n2"), nonce: "n2")
        #expect(viaKakao.status == 200)
        #expect(viaKakao.data?["user"]?["email"] == "pat@example.com")
        // Another user cannot link it; an unknown id is 404.
        let other = try #require(try world.server.signUp(world.app, email: "other@example.com")["access_token"]?.stringValue)
        let taken = try world.server.request(
            "POST", "/v1/me/identities/kakao", appKey: world.app.appKey, bearer: other, json: ["id_token": .string(patToken("n3")), "nonce": "n3"])
        #expect(taken.status == 409)
        #expect(taken.problemCode == "auth/credential-already-in-use")
        #expect(try world.server.request("POST", "/v1/me/identities/nobody", appKey: world.app.appKey, bearer: other, json: ["id_token": "x", "nonce": "n"]).status == 404)
        // Reauthentication with the provider's id: this user's Kakao works; another Kakao account does not.
        let fresh = try world.server.request(
            "POST", "/v1/auth/reauthenticate", appKey: world.app.appKey, bearer: token, json: ["provider": "kakao", "id_token": .string(patToken("n4")), "nonce": "n4"])
        #expect(fresh.status == 200)
        let stranger = world.kakao.mintIDToken(sub: "kakao-stranger", aud: OIDCWorld.kakaoKey, nonce: "n5")
        let wrongUser = try world.server.request(
            "POST", "/v1/auth/reauthenticate", appKey: world.app.appKey, bearer: token, json: ["provider": "kakao", "id_token": .string(stranger), "nonce": "n5"])
        #expect(wrongUser.status == 401)
        let unknown = try world.server.request(
            "POST", "/v1/auth/reauthenticate", appKey: world.app.appKey, bearer: token, json: ["provider": "nobody", "id_token": .string(stranger), "nonce": "n5"])
        #expect(unknown.problemCode == "request/validation-failed")
        // Unlinking: the provider goes while the password stays; then it is not linked (404).
        let unlinked = try world.server.request("DELETE", "/v1/me/identities/kakao", appKey: world.app.appKey, bearer: token)
        #expect(unlinked.status == 200)
        #expect(unlinked.data?.arrayValue?.compactMap { $0["provider"]?.stringValue } == ["password"])
        #expect(try world.server.request("DELETE", "/v1/me/identities/kakao", appKey: world.app.appKey, bearer: token).status == 404)
        let events = try world.server.gatehouse.database.query("SELECT type, data FROM events WHERE type IN ('identity.linked', 'identity.unlinked') ORDER BY type")
        #expect(try events.map { try $0.string("type") } == ["identity.linked", "identity.unlinked"])
        #expect(try events.allSatisfy { try $0.string("data").contains("\"kakao\"") })
        // An account made by a provider keeps it while it is the only method.
        let solo = try world.signIn("acme", world.acme.mintIDToken(sub: "solo", aud: OIDCWorld.acmeClient, nonce: "n6"), nonce: "n6")
        let soloToken = try #require(solo.data?["access_token"]?.stringValue)
        #expect(try world.server.request("DELETE", "/v1/me/identities/acme", appKey: world.app.appKey, bearer: soloToken).problemCode == "auth/last-sign-in-method")
    }
}
