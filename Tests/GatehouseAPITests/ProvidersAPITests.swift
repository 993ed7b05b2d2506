import Foundation
import GatehouseCore
import GatehouseCrypto
import GatehouseTesting
import Synchronization
import Testing

/// Gatehouse with fake Apple, Google and Firebase servers over real HTTP, all on one clock.
final class ProviderWorld {
    static let bundleID = "com.example.photos"
    static let servicesID = "com.example.photos.web"
    static let googleClient = "1234-abc.apps.googleusercontent.com"
    static let project = "photos-demo-123"
    static let redirect = "https://app.example.com/auth/callback"

    let clock = ManualClock()
    let apple: FakeApple
    let google: FakeGoogle
    let firebase: FakeFirebase
    let server: TestServer
    let app: TestServer.CreatedApp

    init(_ kind: TestDatabaseKind, settings: [String: JSON] = [:]) throws {
        apple = try FakeApple(clock: clock)
        google = try FakeGoogle(clock: clock)
        firebase = try FakeFirebase(clock: clock)
        let (appleURL, googleURL, firebaseURL) = (apple.baseURL, google.keysURL, firebase.keysURL)
        server = try TestServer(kind, clock: clock) {
            $0.appleURL = appleURL
            $0.googleJWKSURL = googleURL
            $0.firebaseJWKSURL = firebaseURL
        }
        let credentials = try apple.makeCredentials()
        var all: [String: JSON] = [
            "name": "Photos", "rate_limits": ["auth_per_minute_per_ip": 1000], "redirect_uris": [.string(Self.redirect)],
            "apple": [
                "client_ids": [.string(Self.bundleID)], "services_id": .string(Self.servicesID), "team_id": .string(credentials.teamID),
                "key_id": .string(credentials.keyID), "private_key": .string(credentials.privateKeyPEM),
            ],
            "google": ["client_ids": [.string(Self.googleClient)]], "firebase": ["project_id": .string(Self.project)],
        ]
        for (key, value) in settings { all[key] = value }
        app = try server.createApp(.object(all))
    }

    func stop() {
        server.stop()
        apple.stop()
        google.stop()
        firebase.stop()
    }

    static func hash(_ nonce: String) -> String { Digest.hex(Digest.sha256(Array(nonce.utf8))) }

    func appleSignIn(_ body: JSON) throws -> TestResponse {
        try server.request("POST", "/v1/auth/oauth/apple", appKey: app.appKey, json: body)
    }

    func appleToken(sub: String = "001.apple.user", email: String? = "pat@example.com", nonce: String = "raw-nonce-1") -> String {
        apple.mintIdentityToken(sub: sub, aud: Self.bundleID, email: email, nonce: Self.hash(nonce))
    }
}

@Suite("Sign in with Apple, Google and Firebase")
struct ProvidersAPITests {
    @Test(arguments: TestDatabase.kinds)
    func appleNativeCreatesThenFindsTheUserAndTakesTheNameOnce(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind)
        defer { world.stop() }
        let first = try world.appleSignIn(["identity_token": .string(world.appleToken()), "nonce": "raw-nonce-1", "first_name": "Pat", "last_name": "Lee"])
        #expect(first.status == 201)
        #expect(first.data?["is_new_user"] == true)
        let user = try #require(first.data?["user"])
        #expect(user["identities"] == ["apple"])
        #expect(user["email"] == "pat@example.com")
        #expect(user["email_verified"] == true)
        #expect(user["first_name"] == "Pat")
        let token = try #require(first.data?["access_token"]?.stringValue)
        #expect(try JSON.parse(JWT.parse(token).payload)["amr"] == ["apple"])
        // The audit trail: the sign-up and the sign-in, each with where it came from.
        let events = try world.server.gatehouse.database.query("""
            SELECT type, ip, session_id FROM events WHERE user_id = \(try #require(user["id"]?.stringValue)) ORDER BY type
            """)
        #expect(try events.map { try $0.string("type") } == ["user.signed_in", "user.signed_up"])
        #expect(try events.map { try $0.optionalString("ip") } == ["127.0.0.1", "127.0.0.1"])
        #expect(try events[0].optionalString("session_id") != nil)

        let again = try world.appleSignIn(["identity_token": .string(world.appleToken(nonce: "raw-nonce-2")), "nonce": "raw-nonce-2", "first_name": "Other"])
        #expect(again.status == 200)
        #expect(again.data?["is_new_user"] == false)
        #expect(again.data?["user"]?["id"] == user["id"])
        #expect(again.data?["user"]?["first_name"] == "Pat")
        // A private relay address and a missing email are both fine.
        let relay = try world.appleSignIn([
            "identity_token": .string(world.apple.mintIdentityToken(sub: "002.relay", aud: ProviderWorld.bundleID, email: "x1y2@privaterelay.appleid.com", nonce: ProviderWorld.hash("n3"))),
            "nonce": "n3",
        ])
        #expect(relay.status == 201)
        #expect(relay.data?["user"]?["email"] == "x1y2@privaterelay.appleid.com")
        let noEmail = try world.appleSignIn(["identity_token": .string(world.appleToken(sub: "003.hidden", email: nil, nonce: "n4")), "nonce": "n4"])
        #expect(noEmail.status == 201)
        #expect(noEmail.data?["user"]?["email"] == .null)
    }

    @Test(arguments: TestDatabase.kinds)
    func anAuthorizationCodeIsRedeemedAndApplesRefreshTokenKeptSealed(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind)
        defer { world.stop() }
        let code = world.apple.issueCode(for: FakeAppleUser(sub: "001.apple.user", email: "pat@example.com", nonce: ProviderWorld.hash("raw-nonce-1")), clientID: ProviderWorld.bundleID)
        let response = try world.appleSignIn(["identity_token": .string(world.appleToken()), "nonce": "raw-nonce-1", "authorization_code": .string(code)])
        #expect(response.status == 201)
        #expect(world.apple.tokenCalls.count == 1)
        #expect(world.apple.tokenCalls.first?["client_id"] == ProviderWorld.bundleID)
        #expect(world.apple.tokenCalls.first?["grant_type"] == "authorization_code")
        #expect(world.apple.errors.isEmpty)
        let stored = try world.server.gatehouse.database.query("SELECT refresh_token FROM provider_tokens").map { try $0.string("refresh_token") }
        #expect(stored.count == 1)
        #expect(!world.apple.issuedRefreshTokens.contains(stored[0]))

        // A code of another Apple account is refused, and its refresh token kept nowhere.
        let foreign = world.apple.issueCode(for: FakeAppleUser(sub: "002.someone.else", nonce: ProviderWorld.hash("raw-nonce-2")), clientID: ProviderWorld.bundleID)
        let mixed = try world.appleSignIn(["identity_token": .string(world.appleToken(nonce: "raw-nonce-2")), "nonce": "raw-nonce-2", "authorization_code": .string(foreign)])
        #expect(mixed.status == 401)
        #expect(mixed.problemCode == "auth/invalid-credential")
        #expect(try world.server.gatehouse.database.query("SELECT refresh_token FROM provider_tokens").count == 1)
        // The same code again: Apple says invalid_grant.
        let reused = try world.appleSignIn(["identity_token": .string(world.appleToken(nonce: "n2")), "nonce": "n2", "authorization_code": .string(code)])
        #expect(reused.status == 401)
        #expect(reused.problemCode == "auth/invalid-credential")
    }

    /// Apple JS in a popup (docs/platforms/web.md, Clients/js/README.md): its identity token is
    /// for the Services ID, and its code was issued to the Services ID for the page's redirect
    /// URI. Gatehouse redeems codes as a native app's, without a redirect_uri, so Apple refuses
    /// such a code and the sign-in with it fails; the same sign-in without the code succeeds.
    @Test(arguments: TestDatabase.kinds)
    func anAppleJSCodeFailsTheSignInSoTheWebLeavesItOut(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind)
        defer { world.stop() }
        let page = "https://app.example.com/signin"
        let token = world.apple.mintIdentityToken(sub: "001.web.popup", aud: ProviderWorld.servicesID, email: "pop@example.com", nonce: ProviderWorld.hash("popup-1"))
        let code = world.apple.issueCode(
            for: FakeAppleUser(sub: "001.web.popup", email: "pop@example.com", nonce: ProviderWorld.hash("popup-1")), clientID: ProviderWorld.servicesID, redirectURI: page)
        let withCode = try world.appleSignIn(["identity_token": .string(token), "nonce": "popup-1", "authorization_code": .string(code)])
        #expect(withCode.status == 401 && withCode.problemCode == "auth/invalid-credential", "\(withCode.status) \(withCode.problemCode ?? "")")
        #expect(world.apple.tokenCalls.count == 1)
        #expect(world.apple.tokenCalls.first?["client_id"] == ProviderWorld.servicesID)
        #expect(world.apple.tokenCalls.first?["redirect_uri"] == nil)

        let token2 = world.apple.mintIdentityToken(sub: "001.web.popup", aud: ProviderWorld.servicesID, email: "pop@example.com", nonce: ProviderWorld.hash("popup-2"))
        let withoutCode = try world.appleSignIn(["identity_token": .string(token2), "nonce": "popup-2"])
        #expect(withoutCode.status == 201)
        #expect(world.apple.tokenCalls.count == 1, "no redemption without a code")
    }

    @Test(arguments: TestDatabase.kinds)
    func everyBadAppleTokenIsRefused(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind)
        defer { world.stop() }
        let now = world.clock.nowSeconds
        let nonce = ProviderWorld.hash("raw")
        let bad: [(String, String)] = [
            ("expired", world.apple.mintIdentityToken(aud: ProviderWorld.bundleID, nonce: nonce, issuedAt: now - 7200, expiresAt: now - 3600)),
            ("not yet valid", world.apple.mintIdentityToken(aud: ProviderWorld.bundleID, nonce: nonce, issuedAt: now + 600, expiresAt: now + 1200)),
            ("wrong aud", world.apple.mintIdentityToken(aud: "com.evil.app", nonce: nonce)),
            ("wrong iss", world.apple.mintIdentityToken(aud: ProviderWorld.bundleID, nonce: nonce, issuer: "https://evil.example.com")),
            ("unknown kid", world.apple.mintIdentityToken(aud: ProviderWorld.bundleID, nonce: nonce, kid: "unknown-kid")),
            ("alg none", world.apple.mintIdentityToken(aud: ProviderWorld.bundleID, nonce: nonce, signature: .none)),
            ("HS256 with the public key", world.apple.mintIdentityToken(aud: ProviderWorld.bundleID, nonce: nonce, signature: .hs256WithPublicKey)),
            ("foreign key", world.apple.mintIdentityToken(aud: ProviderWorld.bundleID, nonce: nonce, signature: .foreignKey)),
            ("wrong nonce", world.apple.mintIdentityToken(aud: ProviderWorld.bundleID, nonce: ProviderWorld.hash("other"))),
            ("no nonce claim", world.apple.mintIdentityToken(aud: ProviderWorld.bundleID, nonce: nil)),
            ("garbage", "not-a-jwt"),
        ]
        for (name, token) in bad {
            let response = try world.appleSignIn(["identity_token": .string(token), "nonce": "raw"])
            #expect(response.status == 401, "\(name)")
            #expect(response.problemCode == "auth/invalid-credential", "\(name)")
        }
        let good = world.apple.mintIdentityToken(aud: ProviderWorld.bundleID, nonce: nonce)
        let parts = good.split(separator: ".").map(String.init)
        let tampered = parts[0] + "." + Base64URL.encode(#"{"iss":"https://appleid.apple.com","aud":"com.example.photos","sub":"someone-else","iat":1,"exp":9999999999,"nonce":"\#(nonce)"}"#.utf8) + "." + parts[2]
        #expect(try world.appleSignIn(["identity_token": .string(tampered), "nonce": "raw"]).problemCode == "auth/invalid-credential")

        let missingNonce = try world.appleSignIn(["identity_token": .string(good)])
        #expect(missingNonce.status == 400)
        #expect(missingNonce.json?["errors"]?.arrayValue?.first?["field"] == "nonce")
        for token in ["", "   ", String(repeating: "a", count: 8193)] {
            #expect(try world.appleSignIn(["identity_token": .string(token), "nonce": "raw"]).problemCode == "request/validation-failed")
        }
        #expect(try world.appleSignIn(["identity_token": .string(good), "nonce": "raw", "extra": 1]).problemCode == "request/validation-failed")
        #expect(try world.server.gatehouse.database.query("SELECT id FROM users").isEmpty)
    }

    @Test(arguments: TestDatabase.kinds)
    func anEmailOfAnotherAccountIsACollisionUnlessTheAppKeepsThemSeparate(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind)
        defer { world.stop() }
        _ = try world.server.signUp(world.app, email: "pat@example.com")
        let collision = try world.appleSignIn(["identity_token": .string(world.appleToken()), "nonce": "raw-nonce-1"])
        #expect(collision.status == 409)
        #expect(collision.problemCode == "auth/account-exists-with-different-credential")

        let separate = try ProviderWorld(kind, settings: ["email_collision": "separate"])
        defer { separate.stop() }
        _ = try separate.server.signUp(separate.app, email: "pat@example.com")
        let created = try separate.appleSignIn(["identity_token": .string(separate.appleToken()), "nonce": "raw-nonce-1"])
        #expect(created.status == 201)
        #expect(try separate.server.gatehouse.database.query("SELECT id FROM users").count == 2)

        // The other way round: a password sign-up with the email of an Apple account.
        let appleFirst = try ProviderWorld(kind)
        defer { appleFirst.stop() }
        #expect(try appleFirst.appleSignIn(["identity_token": .string(appleFirst.appleToken()), "nonce": "raw-nonce-1"]).status == 201)
        let signUp = try appleFirst.server.request(
            "POST", "/v1/auth/signup", appKey: appleFirst.app.appKey, json: ["email": "pat@example.com", "password": "correct horse battery"])
        #expect(signUp.status == 409)
        #expect(signUp.problemCode == "auth/email-already-in-use")
        #expect(try separate.appleSignIn(["identity_token": .string(separate.appleToken(sub: "001.apple.other", email: "sam@example.com")), "nonce": "raw-nonce-1"]).status == 201)
        #expect(try separate.server.request(
            "POST", "/v1/auth/signup", appKey: separate.app.appKey, json: ["email": "sam@example.com", "password": "correct horse battery"]).status == 201)
    }

    @Test(arguments: TestDatabase.kinds)
    func googleAndFirebaseSignIn(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind)
        defer { world.stop() }
        let google = try world.server.request(
            "POST", "/v1/auth/oauth/google", appKey: world.app.appKey,
            json: ["id_token": .string(world.google.mintIDToken(sub: "g-1", aud: ProviderWorld.googleClient, email: "gabe@gmail.com", nonce: "n1", givenName: "Gabe")), "nonce": "n1"])
        #expect(google.status == 201)
        #expect(google.data?["user"]?["identities"] == ["google"])
        #expect(google.data?["user"]?["first_name"] == "Gabe")
        #expect(try world.server.request("POST", "/v1/auth/oauth/google", appKey: world.app.appKey,
            json: ["id_token": .string(world.google.mintIDToken(sub: "g-1", aud: ProviderWorld.googleClient, nonce: "n1")), "nonce": "n2"]).problemCode == "auth/invalid-credential")
        #expect(try world.server.request("POST", "/v1/auth/oauth/google", appKey: world.app.appKey,
            json: ["id_token": .string(world.google.mintIDToken(sub: "g-1", aud: ProviderWorld.googleClient, email: "gabe@gmail.com", issuer: "accounts.google.com"))]).status == 200)

        // An Apple user natively, then through Firebase: one account.
        let native = try world.appleSignIn(["identity_token": .string(world.appleToken(sub: "001.apple.user", email: "pat@example.com")), "nonce": "raw-nonce-1"])
        let viaFirebase = try world.appleSignIn([
            "firebase_id_token": .string(world.firebase.mintIDToken(projectID: ProviderWorld.project, signInProvider: "apple.com", providerSubject: "001.apple.user", email: "pat@example.com"))
        ])
        #expect(viaFirebase.status == 200)
        #expect(viaFirebase.data?["user"]?["id"] == native.data?["user"]?["id"])

        // The provider pin, with the contract's detail text.
        let pinned = try world.appleSignIn(["firebase_id_token": .string(world.firebase.mintIDToken(projectID: ProviderWorld.project, signInProvider: "google.com", providerSubject: "g-2"))])
        #expect(pinned.status == 401)
        #expect(pinned.problemCode == "auth/invalid-credential")
        #expect(pinned.json?["detail"] == "Expected a apple.com token but received google.com")
        let otherProject = try world.appleSignIn(["firebase_id_token": .string(world.firebase.mintIDToken(projectID: "another-project-1", providerSubject: "001.apple.user"))])
        #expect(otherProject.problemCode == "auth/invalid-credential")
        // Without `firebase.identities`, the Firebase uid is not taken for an Apple id, even when
        // it reads like the native user's.
        let uidOnly = try world.appleSignIn([
            "firebase_id_token": .string(world.firebase.mintIDToken(uid: "001.apple.user", projectID: ProviderWorld.project, signInProvider: "apple.com", email: nil))
        ])
        #expect(uidOnly.status == 201)
        #expect(uidOnly.data?["user"]?["id"] != native.data?["user"]?["id"])
    }

    @Test(arguments: TestDatabase.kinds)
    func unconfiguredDisabledAndUnreachableProviders(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind)
        defer { world.stop() }
        let bare = try world.server.createApp(["name": "Bare", "rate_limits": ["auth_per_minute_per_ip": 1000]])
        let notConfigured = try world.server.request("POST", "/v1/auth/oauth/google", appKey: bare.appKey, json: ["id_token": "x.y.z"])
        #expect(notConfigured.status == 503)
        #expect(notConfigured.problemCode == "auth/provider-not-configured")
        let passwordsOnly = try world.server.createApp(["name": "Pw", "sign_in_methods": ["password"], "google": ["client_ids": ["x"]]])
        #expect(try world.server.request("POST", "/v1/auth/oauth/google", appKey: passwordsOnly.appKey, json: ["id_token": "x.y.z"]).problemCode == "auth/sign-in-method-disabled")

        world.apple.setDown(true)
        let down = try world.appleSignIn(["identity_token": .string(world.appleToken()), "nonce": "raw-nonce-1"])
        #expect(down.status == 503)
        #expect(down.problemCode == "provider/unavailable")
        world.apple.setDown(false)
        world.clock.advance(seconds: 30)  // a failed key fetch is not retried sooner

        // An app closed to new accounts is closed to them by every sign-in method; known users still sign in.
        let known = try world.appleSignIn(["identity_token": .string(world.appleToken()), "nonce": "raw-nonce-1"])
        #expect(known.status == 201)
        #expect(try world.server.request("PATCH", "/v1/admin/app", bearer: world.app.secretKey, json: ["allow_signup": false]).status == 200)
        #expect(try world.appleSignIn(["identity_token": .string(world.appleToken(nonce: "raw-nonce-2")), "nonce": "raw-nonce-2"]).status == 200)
        let newcomer = try world.server.request("POST", "/v1/auth/oauth/google", appKey: world.app.appKey,
            json: ["id_token": .string(world.google.mintIDToken(sub: "g-new", aud: ProviderWorld.googleClient, nonce: "n9")), "nonce": "n9"])
        #expect(newcomer.problemCode == "auth/signup-disabled")
        let viaFirebase = try world.appleSignIn(["firebase_id_token": .string(world.firebase.mintIDToken(projectID: ProviderWorld.project, providerSubject: "001.new.user"))])
        #expect(viaFirebase.problemCode == "auth/signup-disabled")
        // Refused before its code is redeemed: Apple hands out no refresh token to drop.
        let calls = world.apple.tokenCalls.count
        let code = world.apple.issueCode(for: FakeAppleUser(sub: "009.closed", nonce: ProviderWorld.hash("n7")), clientID: ProviderWorld.bundleID)
        let withCode = try world.appleSignIn(["identity_token": .string(world.appleToken(sub: "009.closed", nonce: "n7")), "nonce": "n7", "authorization_code": .string(code)])
        #expect(withCode.problemCode == "auth/signup-disabled")
        #expect(world.apple.tokenCalls.count == calls)
    }

    @Test(arguments: TestDatabase.kinds)
    func linkingUnlinkingAndReauthenticatingWithAProvider(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind)
        defer { world.stop() }
        let token = try #require(try world.server.signUp(world.app, email: "pat@example.com")["access_token"]?.stringValue)
        let googleToken = world.google.mintIDToken(sub: "g-pat", aud: ProviderWorld.googleClient, email: "pat@example.com", nonce: "n1")
        let withoutNonce = try world.server.request("POST", "/v1/me/identities/google", appKey: world.app.appKey, bearer: token, json: ["id_token": .string(googleToken)])
        #expect(withoutNonce.problemCode == "request/validation-failed")
        let linked = try world.server.request("POST", "/v1/me/identities/google", appKey: world.app.appKey, bearer: token, json: ["id_token": .string(googleToken), "nonce": "n1"])
        #expect(linked.status == 200)
        #expect(Set(linked.data?.arrayValue?.compactMap { $0["provider"]?.stringValue } ?? []) == ["password", "google"])
        // Now Google signs in to the same account (with a token of its own: each is accepted once).
        func patToken(_ nonce: String) -> String {
            world.google.mintIDToken(sub: "g-pat", aud: ProviderWorld.googleClient, email: "pat@example.com", nonce: nonce)
        }
        let viaGoogle = try world.server.request("POST", "/v1/auth/oauth/google", appKey: world.app.appKey, json: ["id_token": .string(patToken("n2")), "nonce": "n2"])
        #expect(viaGoogle.status == 200)
        // Another user cannot link the same Google account.
        let other = try #require(try world.server.signUp(world.app, email: "other@example.com")["access_token"]?.stringValue)
        let taken = try world.server.request("POST", "/v1/me/identities/google", appKey: world.app.appKey, bearer: other, json: ["id_token": .string(patToken("n3")), "nonce": "n3"])
        #expect(taken.status == 409)
        #expect(taken.problemCode == "auth/credential-already-in-use")
        // Reauthentication: this user's Google works; another Google account does not.
        let fresh = try world.server.request("POST", "/v1/auth/reauthenticate", appKey: world.app.appKey, bearer: token, json: ["provider": "google", "id_token": .string(patToken("n4")), "nonce": "n4"])
        #expect(fresh.status == 200)
        let stranger = world.google.mintIDToken(sub: "g-stranger", aud: ProviderWorld.googleClient, nonce: "n1")
        let wrongUser = try world.server.request("POST", "/v1/auth/reauthenticate", appKey: world.app.appKey, bearer: token, json: ["provider": "google", "id_token": .string(stranger), "nonce": "n1"])
        #expect(wrongUser.status == 401)
        #expect(wrongUser.problemCode == "auth/invalid-credential")
        // Unlinking: fine while another method remains; the last one stays.
        #expect(try world.server.request("DELETE", "/v1/me/identities/password", appKey: world.app.appKey, bearer: token).data?.arrayValue?.count == 1)
        let last = try world.server.request("DELETE", "/v1/me/identities/google", appKey: world.app.appKey, bearer: token)
        #expect(last.status == 409)
        #expect(last.problemCode == "auth/last-sign-in-method")
        #expect(try world.server.request("DELETE", "/v1/me/identities/apple", appKey: world.app.appKey, bearer: token).status == 404)
        // Two methods unlinked at the same moment: one goes, the other stays.
        let otherGoogle = world.google.mintIDToken(sub: "g-other", aud: ProviderWorld.googleClient, email: "other@example.com", nonce: "n1")
        #expect(try world.server.request("POST", "/v1/me/identities/google", appKey: world.app.appKey, bearer: other, json: ["id_token": .string(otherGoogle), "nonce": "n1"]).status == 200)
        let statuses = Mutex<[Int]>([])
        let (server, appKey) = (world.server, world.app.appKey)
        DispatchQueue.concurrentPerform(iterations: 2) { index in
            let status = (try? server.request("DELETE", "/v1/me/identities/\(index == 0 ? "password" : "google")", appKey: appKey, bearer: other).status) ?? 0
            statuses.withLock { $0.append(status) }
        }
        #expect(statuses.withLock { $0.sorted() } == [200, 409])
        #expect(try world.server.request("GET", "/v1/me/identities", appKey: world.app.appKey, bearer: other).data?.arrayValue?.count == 1)
        // Apple: identity token, nonce and code, all three; the code is redeemed and Apple's refresh token kept.
        func linkApple(_ body: JSON) throws -> TestResponse {
            try world.server.request("POST", "/v1/me/identities/apple", appKey: world.app.appKey, bearer: token, json: body)
        }
        let code = world.apple.issueCode(for: FakeAppleUser(sub: "001.apple.user", nonce: ProviderWorld.hash("raw-nonce-1")), clientID: ProviderWorld.bundleID)
        let withoutCode = try linkApple(["identity_token": .string(world.appleToken()), "nonce": "raw-nonce-1"])
        #expect(withoutCode.json?["errors"]?.arrayValue?.first?["field"] == "authorization_code")
        let appleWithoutNonce = try linkApple(["identity_token": .string(world.appleToken()), "authorization_code": .string(code)])
        #expect(appleWithoutNonce.json?["errors"]?.arrayValue?.first?["field"] == "nonce")
        let appleLinked = try linkApple(["identity_token": .string(world.appleToken()), "nonce": "raw-nonce-1", "authorization_code": .string(code)])
        #expect(appleLinked.status == 200)
        #expect(appleLinked.data?.arrayValue?.contains { $0["provider"] == "apple" } == true)
        #expect(try world.server.gatehouse.database.query("SELECT refresh_token FROM provider_tokens").count == 1)
        // Linking needs a recent sign-in.
        world.clock.advance(seconds: 301)
        let stale = try linkApple(["identity_token": .string(world.appleToken()), "nonce": "raw-nonce-1", "authorization_code": .string(code)])
        #expect(stale.problemCode == "auth/requires-recent-login")
    }
}

@Suite("The Apple web flow")
struct AppleWebFlowTests {
    struct Started {
        let state: String
        let nonce: String
        let cookie: String
    }

    func start(_ world: ProviderWorld, redirect: String = ProviderWorld.redirect, extra: String = "&state=client-state-1&code_challenge=\(challenge)&code_challenge_method=S256") throws -> (TestResponse, Started?) {
        let query = "app_key=\(world.app.appKey)&redirect_uri=\(redirect.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)" + extra
        let response = try world.server.request("GET", "/v1/auth/oauth/apple/authorize?\(query)")
        guard response.status == 302, let location = response.header("Location"), let items = URLComponents(string: location)?.queryItems,
            let cookie = response.header("Set-Cookie")
        else { return (response, nil) }
        let value = { (name: String) in items.first { $0.name == name }?.value ?? "" }
        return (response, Started(state: value("state"), nonce: value("nonce"), cookie: String(cookie.prefix { $0 != ";" })))
    }

    static let verifier = "a-long-enough-code-verifier-0123456789-abcdefghijklmnop"
    static let challenge = Base64URL.encode(Digest.sha256(Array(verifier.utf8)))

    func callback(_ world: ProviderWorld, _ fields: [(String, String)], cookie: String?) throws -> TestResponse {
        let body = fields.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)" }.joined(separator: "&")
        var headers = [("Content-Type", "application/x-www-form-urlencoded")]
        if let cookie { headers.append(("Cookie", cookie)) }
        return try world.server.request("POST", "/v1/auth/oauth/apple/callback", headers: headers, body: Array(body.utf8))
    }

    @Test(arguments: TestDatabase.kinds)
    func theWholeFlowEndsInASessionAndEveryPieceIsSingleUse(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind)
        defer { world.stop() }
        let (authorize, startedOrNil) = try start(world)
        let started = try #require(startedOrNil)
        let location = try #require(authorize.header("Location"))
        #expect(location.hasPrefix("\(world.apple.baseURL)/auth/authorize?client_id=\(ProviderWorld.servicesID)&redirect_uri="))
        #expect(location.contains("&response_type=code%20id_token&scope=name%20email&response_mode=form_post&state="))
        let cookieHeader = try #require(authorize.header("Set-Cookie"))
        #expect(cookieHeader.contains("HttpOnly") && cookieHeader.contains("Secure") && cookieHeader.contains("SameSite=None"))
        #expect(started.cookie.hasPrefix("gh_flow="))

        let callbackURL = "\(TestServer.publicURL)/v1/auth/oauth/apple/callback"
        let code = world.apple.issueCode(for: FakeAppleUser(sub: "web.user.1", email: "web@example.com", nonce: started.nonce), clientID: ProviderWorld.servicesID, redirectURI: callbackURL)
        let user = #"{"name":{"firstName":"Wen","lastName":"Bo"},"email":"web@example.com"}"#
        let back = try callback(world, [("state", started.state), ("code", code), ("user", user)], cookie: started.cookie)
        #expect(back.status == 303)
        let target = try #require(back.header("Location").flatMap { URLComponents(string: $0) })
        #expect(target.host == "app.example.com")
        let loginCode = try #require(target.queryItems?.first { $0.name == "login_code" }?.value)
        #expect(target.queryItems?.first { $0.name == "state" }?.value == "client-state-1")
        #expect(world.apple.errors.isEmpty)

        // The state cannot be used twice.
        #expect(try callback(world, [("state", started.state), ("code", code)], cookie: started.cookie).problemCode == "auth/invalid-flow")
        // PKCE: a wrong verifier fails and burns the code (a login code is tried once); a new flow with the right one gets the session, once.
        let wrong = try world.server.request("POST", "/v1/auth/exchange", appKey: world.app.appKey, json: ["login_code": .string(loginCode), "code_verifier": "wrong-verifier-wrong-verifier-wrong-verifier-1234"])
        #expect(wrong.problemCode == "auth/invalid-login-code")
        let (_, second) = try start(world)
        let code2 = world.apple.issueCode(for: FakeAppleUser(sub: "web.user.1", email: "web@example.com", nonce: second!.nonce), clientID: ProviderWorld.servicesID, redirectURI: callbackURL)
        let back2 = try callback(world, [("state", second!.state), ("code", code2)], cookie: second!.cookie)
        let loginCode2 = try #require(back2.header("Location").flatMap { URLComponents(string: $0) }?.queryItems?.first { $0.name == "login_code" }?.value)
        // Another app's key cannot redeem it (and does not burn it).
        let otherApp = try world.server.createApp(["name": "Other"])
        #expect(try world.server.request("POST", "/v1/auth/exchange", appKey: otherApp.appKey, json: ["login_code": .string(loginCode2), "code_verifier": .string(Self.verifier)]).problemCode == "auth/invalid-login-code")
        let session = try world.server.request("POST", "/v1/auth/exchange", appKey: world.app.appKey, json: ["login_code": .string(loginCode2), "code_verifier": .string(Self.verifier)])
        #expect(session.status == 200)
        #expect(session.data?["user"]?["identities"] == ["apple"])
        #expect(try world.server.request("POST", "/v1/auth/exchange", appKey: world.app.appKey, json: ["login_code": .string(loginCode2), "code_verifier": .string(Self.verifier)]).problemCode == "auth/invalid-login-code")
    }

    /// A banned user's Apple sign-in, native or through the web flow, is refused: 403 with the
    /// ban's extensions, and a redirect with `error=user_disabled`.
    @Test(arguments: TestDatabase.kinds)
    func aBannedUserIsRefusedOnTheProviderPaths(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind)
        defer { world.stop() }
        let token = world.apple.mintIdentityToken(sub: "web.user.1", aud: ProviderWorld.bundleID, email: "web@example.com", nonce: ProviderWorld.hash("n-1"))
        let first = try world.appleSignIn(["identity_token": .string(token), "nonce": "n-1"])
        let id = try #require(first.data?["user"]?["id"]?.stringValue)
        #expect(try world.server.request("POST", "/v1/admin/users/\(id)/ban", bearer: world.app.secretKey, json: ["sanction_code": "abuse"]).status == 200)

        let again = world.apple.mintIdentityToken(sub: "web.user.1", aud: ProviderWorld.bundleID, email: "web@example.com", nonce: ProviderWorld.hash("n-2"))
        let native = try world.appleSignIn(["identity_token": .string(again), "nonce": "n-2"])
        #expect(native.status == 403 && native.problemCode == "auth/user-disabled" && native.json?["sanction_code"] == "abuse")

        let (_, startedOrNil) = try start(world)
        let started = try #require(startedOrNil)
        let callbackURL = "\(TestServer.publicURL)/v1/auth/oauth/apple/callback"
        let code = world.apple.issueCode(for: FakeAppleUser(sub: "web.user.1", email: "web@example.com", nonce: started.nonce), clientID: ProviderWorld.servicesID, redirectURI: callbackURL)
        let back = try callback(world, [("state", started.state), ("code", code)], cookie: started.cookie)
        let target = try #require(back.header("Location").flatMap { URLComponents(string: $0) })
        #expect(back.status == 303 && target.queryItems?.first { $0.name == "error" }?.value == "user_disabled")
        #expect(target.queryItems?.contains { $0.name == "login_code" } == false)
    }

    /// Under `mfa.policy: required`, the web flow's exchange opens no session: the new account
    /// enrols with the mfa_token, then the second step answers the 201 the exchange would have.
    @Test(arguments: TestDatabase.kinds)
    func theWebFlowsExchangeAnswersTheSecondStepUnderRequired(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind, settings: ["require_pkce": false, "mfa": ["policy": "required", "methods": ["totp"]]])
        defer { world.stop() }
        let (_, startedOrNil) = try start(world, extra: "")
        let started = try #require(startedOrNil)
        let code = world.apple.issueCode(for: FakeAppleUser(sub: "web.user.mfa", email: "mfa@example.com", nonce: started.nonce), clientID: ProviderWorld.servicesID)
        let back = try callback(world, [("state", started.state), ("code", code)], cookie: started.cookie)
        let loginCode = try #require(back.header("Location").flatMap { URLComponents(string: $0) }?.queryItems?.first { $0.name == "login_code" }?.value)
        let gated = try world.server.request("POST", "/v1/auth/exchange", appKey: world.app.appKey, json: ["login_code": .string(loginCode)])
        #expect(gated.status == 401 && gated.problemCode == "auth/mfa-required")
        #expect(gated.json?["enroll"] == true && gated.json?["methods"] == ["totp"])
        let mfaToken = try #require(gated.json?["mfa_token"]?.stringValue)
        let begun = try world.server.request("POST", "/v1/me/mfa/totp", appKey: world.app.appKey, bearer: mfaToken, json: [:])
        let id = try #require(begun.data?["id"]?.stringValue)
        let secret = try #require(begun.data?["secret"]?.stringValue.flatMap(Base32.decode))
        let totp = TOTP.code(secret: secret, step: TOTP.step(at: world.clock.nowMillis() / 1000))
        #expect(try world.server.request("POST", "/v1/me/mfa/totp/\(id)/confirm", appKey: world.app.appKey, bearer: mfaToken, json: ["code": .string(totp)]).status == 200)
        let session = try world.server.request("POST", "/v1/auth/mfa/verify", appKey: world.app.appKey, json: ["mfa_token": .string(mfaToken)])
        #expect(session.status == 201 && session.data?["is_new_user"] == true)
        let access = try #require(session.data?["access_token"]?.stringValue)
        #expect(try JSON.parse(JWT.parse(access).payload)["amr"] == ["apple", "otp", "mfa"])
    }

    @Test(arguments: TestDatabase.kinds)
    func aNewAccountFromTheCallbackExchangesWith201(_ kind: TestDatabaseKind) throws {
        // An app that opted out of PKCE (its redirect URI is https) may start a flow without a challenge.
        let world = try ProviderWorld(kind, settings: ["require_pkce": false])
        defer { world.stop() }
        let (_, startedOrNil) = try start(world, extra: "")
        let started = try #require(startedOrNil)
        let code = world.apple.issueCode(for: FakeAppleUser(sub: "web.user.2", email: "new@example.com", nonce: started.nonce), clientID: ProviderWorld.servicesID)
        let back = try callback(world, [("state", started.state), ("code", code), ("user", #"{"name":{"firstName":"Nia"}}"#)], cookie: started.cookie)
        let loginCode = try #require(back.header("Location").flatMap { URLComponents(string: $0) }?.queryItems?.first { $0.name == "login_code" }?.value)
        let session = try world.server.request("POST", "/v1/auth/exchange", appKey: world.app.appKey, json: ["login_code": .string(loginCode)])
        #expect(session.status == 201)
        #expect(session.data?["is_new_user"] == true)
        #expect(session.data?["user"]?["first_name"] == "Nia")
        world.clock.advance(seconds: 61)
        #expect(try world.server.request("POST", "/v1/auth/exchange", appKey: world.app.appKey, json: ["login_code": .string(loginCode)]).problemCode == "auth/invalid-login-code")
    }

    @Test(arguments: TestDatabase.kinds)
    func theWebFlowNeedsTheAppsAppleKeyBeforeItStarts(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind, settings: ["apple": ["client_ids": [.string(ProviderWorld.bundleID)], "services_id": .string(ProviderWorld.servicesID)]])
        defer { world.stop() }
        let (response, started) = try start(world)
        #expect(started == nil)
        #expect(response.status == 503)
        #expect(response.problemCode == "auth/provider-not-configured")
    }

    @Test(arguments: TestDatabase.kinds)
    func flowsThatCannotBeTrustedAreRefusedWithoutARedirect(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind)
        defer { world.stop() }
        let (wrongRedirect, _) = try start(world, redirect: "https://evil.example.com/cb")
        #expect(wrongRedirect.status == 400)
        #expect(wrongRedirect.problemCode == "auth/invalid-redirect-uri")
        #expect(try world.server.request("GET", "/v1/auth/oauth/apple/authorize?redirect_uri=x").problemCode == "app/missing-key")

        let (_, startedOrNil) = try start(world)
        let started = try #require(startedOrNil)
        for (fields, cookie) in [
            ([("state", started.state), ("code", "c")], nil as String?),
            ([("state", started.state), ("code", "c")], "gh_flow=not-the-browsers"),
            ([("state", "unknown-state"), ("code", "c")], started.cookie),
            ([("code", "c")], started.cookie),
            ([("state", started.state), ("state", started.state), ("code", "c")], started.cookie),
        ] {
            let response = try callback(world, fields, cookie: cookie)
            #expect(response.status == 400)
            #expect(response.problemCode == "auth/invalid-flow")
            #expect(response.header("Location") == nil)
        }
        // Those attempts used nothing up: the browser that started the flow still finishes it.
        let code = world.apple.issueCode(for: FakeAppleUser(sub: "web.user.3", email: "w3@example.com", nonce: started.nonce), clientID: ProviderWorld.servicesID)
        let finished = try callback(world, [("state", started.state), ("code", code)], cookie: started.cookie)
        #expect(finished.status == 303)
        #expect(finished.header("Location")?.contains("login_code=") == true)
        // Form only.
        #expect(try world.server.request("POST", "/v1/auth/oauth/apple/callback", json: ["state": "x"]).status == 415)
    }

    @Test(arguments: TestDatabase.kinds)
    func cancelledOrFailedAuthorizationsComeBackAsErrorsWithTheState(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind)
        defer { world.stop() }
        for (fields, expected) in [([("error", "user_cancelled_authorize")], "user_cancelled_authorize"), ([("code", "not-a-real-code")], "access_denied")] {
            let (_, startedOrNil) = try start(world)
            let started = try #require(startedOrNil)
            let back = try callback(world, [("state", started.state)] + fields, cookie: started.cookie)
            #expect(back.status == 303)
            let items = back.header("Location").flatMap { URLComponents(string: $0) }?.queryItems ?? []
            #expect(items.first { $0.name == "error" }?.value == expected)
            #expect(items.first { $0.name == "state" }?.value == "client-state-1")
            #expect(items.first { $0.name == "login_code" } == nil)
        }
        let (_, startedOrNil) = try start(world)
        let started = try #require(startedOrNil)
        world.apple.setDown(true)
        let back = try callback(world, [("state", started.state), ("code", "any")], cookie: started.cookie)
        #expect(back.header("Location")?.contains("error=server_error") == true)

        // The app lost its Services ID while the user was at Apple: the server's fault.
        world.apple.setDown(false)
        let (_, pendingOrNil) = try start(world)
        let pending = try #require(pendingOrNil)
        let patched = try world.server.request("PATCH", "/v1/admin/app", bearer: world.app.secretKey, json: ["apple": ["services_id": nil]])
        #expect(patched.status == 200)
        let misconfigured = try callback(world, [("state", pending.state), ("code", "any")], cookie: pending.cookie)
        #expect(misconfigured.status == 303)
        #expect(misconfigured.header("Location")?.contains("error=server_error") == true)
    }

}

extension ProvidersAPITests {
    /// API.md: a provider key server that cannot be reached is 503 `provider/unavailable`, also
    /// when keys are cached but the token's `kid` is not among them: it may be a key published
    /// after our last good fetch. Only a `kid` missing from a set fetched successfully is 401.
    @Test(arguments: TestDatabase.kinds)
    func aKidNotYetFetchedWhileTheKeyServerIsDownIsUnavailableNotInvalid(_ kind: TestDatabaseKind) throws {
        let world = try ProviderWorld(kind)
        defer { world.stop() }
        for provider in KeyServer.allCases {
            let fake = world.keyServer(provider)
            let warm = try world.signIn(provider, nonce: "warm")
            #expect(warm.status == 201, "\(provider)")
            #expect(fake.fetches() == 1, "\(provider)")

            // The provider rotates; our refetch for the new kid meets a 500.
            let rotated = try fake.rotate()
            world.clock.advance(seconds: 30)
            fake.failNext(500)
            let during = try world.signIn(provider, kid: rotated, nonce: "rotated-1")
            #expect(during.status == 503, "\(provider)")
            #expect(during.problemCode == "provider/unavailable", "\(provider)")
            #expect(fake.fetches() == 2, "\(provider)")
            // Within 30 s of that failure no refetch is tried, and the answer stays 503.
            let held = try world.signIn(provider, kid: rotated, nonce: "rotated-2")
            #expect(held.problemCode == "provider/unavailable", "\(provider)")
            #expect(fake.fetches() == 2, "\(provider)")
            // The server is back: the token by the rotated key was valid all along.
            world.clock.advance(seconds: 30)
            #expect(try world.signIn(provider, kid: rotated, nonce: "rotated-3").status == 200, "\(provider)")
            #expect(fake.fetches() == 3, "\(provider)")

            // A kid the provider has not published, with its key server up: 401.
            world.clock.advance(seconds: 30)
            let unknown = try world.signIn(provider, kid: "\(provider)-never-published", nonce: "unknown-1")
            #expect(unknown.status == 401, "\(provider)")
            #expect(unknown.problemCode == "auth/invalid-credential", "\(provider)")
            #expect(fake.fetches() == 4, "\(provider)")

            // The same token with the key server closed: 503.
            world.clock.advance(seconds: 30)
            fake.stop()
            let closed = try world.signIn(provider, kid: "\(provider)-never-published", nonce: "unknown-2")
            #expect(closed.status == 503, "\(provider)")
            #expect(closed.problemCode == "provider/unavailable", "\(provider)")
            #expect(fake.errors().isEmpty, "\(provider)")
        }
    }
}

/// The three providers whose keys come from a key server.
enum KeyServer: String, CaseIterable, CustomStringConvertible {
    case apple, google, firebase
    var description: String { rawValue }
}

/// A fake's key server, as the key-server tests drive it.
struct FakeKeyServer {
    let fetches: () -> Int
    let failNext: (_ status: Int) -> Void
    let rotate: () throws -> String
    let stop: () -> Void
    let errors: () -> [String]
}

extension ProviderWorld {
    func keyServer(_ provider: KeyServer) -> FakeKeyServer {
        switch provider {
        case .apple:
            FakeKeyServer(
                fetches: { self.apple.keysFetchCount }, failNext: { self.apple.failNextRequests(1, status: $0) },
                rotate: { try self.apple.rotateKeys() }, stop: { self.apple.stop() }, errors: { self.apple.errors })
        case .google:
            FakeKeyServer(
                fetches: { self.google.keysFetchCount }, failNext: { self.google.failNextRequests(1, status: $0) },
                rotate: { try self.google.rotateKeys() }, stop: { self.google.stop() }, errors: { self.google.errors })
        case .firebase:
            FakeKeyServer(
                fetches: { self.firebase.keysFetchCount }, failNext: { self.firebase.failNextRequests(1, status: $0) },
                rotate: { try self.firebase.rotateKeys() }, stop: { self.firebase.stop() }, errors: { self.firebase.errors })
        }
    }

    /// Signs in through `provider`'s endpoint with a fresh token (each provider its own user, no
    /// email), signed by the key `kid` names (the current key when `kid` is `nil` or unpublished).
    func signIn(_ provider: KeyServer, kid: String? = nil, nonce: String) throws -> TestResponse {
        switch provider {
        case .apple:
            let token = apple.mintIdentityToken(sub: "001.keys.apple", aud: Self.bundleID, email: nil, nonce: Self.hash(nonce), kid: kid)
            return try appleSignIn(["identity_token": .string(token), "nonce": .string(nonce)])
        case .google:
            let token = google.mintIDToken(sub: "g-keys", aud: Self.googleClient, email: nil, nonce: nonce, kid: kid)
            return try server.request("POST", "/v1/auth/oauth/google", appKey: app.appKey, json: ["id_token": .string(token), "nonce": .string(nonce)])
        case .firebase:
            let token = firebase.mintIDToken(
                uid: "FirebaseKeysUid", projectID: Self.project, signInProvider: "google.com", providerSubject: "g-keys-firebase", email: nil, kid: kid)
            return try server.request("POST", "/v1/auth/oauth/google", appKey: app.appKey, json: ["firebase_id_token": .string(token)])
        }
    }
}
