import Foundation
import GatehouseCore
import GatehouseCrypto
import GatehouseTesting
import Testing

/// Passkeys over the real HTTP server with a software authenticator (ADR 0028): registration,
/// the user's list, discoverable sign-in, reauthentication, and every ceremony that must be refused.
@Suite("Passkeys")
struct PasskeysAPITests {
    static let origin = "https://app.example.com"
    static let settings: JSON = [
        "name": "Passkeys", "rate_limits": ["auth_per_minute_per_ip": 1000],
        "passkeys": ["rp_id": "example.com", "origins": ["https://app.example.com", "https://example.com"]],
    ]

    /// A server, an app with passkeys, a signed-up user and their access token.
    struct World {
        let server: TestServer
        let app: TestServer.CreatedApp
        let token: String
        let userID: String

        init(_ kind: TestDatabaseKind, settings: JSON = PasskeysAPITests.settings) throws {
            server = try TestServer(kind)
            app = try server.createApp(settings)
            let session = try server.signUp(app)
            token = try #require(session["access_token"]?.stringValue)
            userID = try #require(session["user"]?["id"]?.stringValue)
        }

        func registrationOptions() throws -> JSON {
            let response = try server.request("POST", "/v1/me/passkeys/options", appKey: app.appKey, bearer: token, json: [:])
            #expect(response.status == 200, "\(response.text)")
            return try #require(response.data)
        }

        func register(_ authenticator: SoftAuthenticator, name: String? = "My key") throws -> TestResponse {
            var body: [String: JSON] = ["credential": try authenticator.register(try registrationOptions())]
            if let name { body["name"] = .string(name) }
            return try server.request("POST", "/v1/me/passkeys", appKey: app.appKey, bearer: token, json: .object(body))
        }

        func signInOptions() throws -> JSON {
            let response = try server.request("POST", "/v1/auth/passkey/options", appKey: app.appKey, json: [:])
            #expect(response.status == 200, "\(response.text)")
            return try #require(response.data)
        }

        func verify(_ credential: JSON) throws -> TestResponse {
            try server.request("POST", "/v1/auth/passkey/verify", appKey: app.appKey, json: ["credential": credential])
        }

        func events(_ type: String) throws -> [JSON] {
            try server.request("GET", "/v1/admin/events?type=\(type)", bearer: app.secretKey).json?["data"]?.arrayValue ?? []
        }
    }

    static func claims(_ token: String) throws -> JSON { try JSON.parse(try JWT.parse(token).payload) }

    @Test(arguments: TestDatabase.kinds)
    func registersES256AndRS256PasskeysAndSignsInWithEach(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.server.stop() }
        for algorithm in [SignatureAlgorithm.es256, .rs256] {
            let authenticator = try SoftAuthenticator(algorithm, origin: Self.origin, rpID: "example.com")
            let options = try world.registrationOptions()
            #expect(options["rp"]?["id"] == "example.com")
            #expect(options["rp"]?["name"] == "Passkeys")
            #expect(options["user"]?["id"]?.stringValue != world.userID)
            #expect(options["user"]?["name"] == "ada@example.com")
            #expect(options["pubKeyCredParams"] == [["type": "public-key", "alg": -7], ["type": "public-key", "alg": -257]])
            #expect(options["timeout"] == 300000)
            #expect(options["attestation"] == "none")
            #expect(options["authenticatorSelection"]?["residentKey"] == "required")
            #expect(options["authenticatorSelection"]?["userVerification"] == "required")
            let created = try world.server.request(
                "POST", "/v1/me/passkeys", appKey: world.app.appKey, bearer: world.token,
                json: ["credential": try authenticator.register(options), "name": .string("Key \(algorithm.rawValue)")])
            #expect(created.status == 201, "\(created.text)")
            let passkey = try #require(created.data)
            #expect(passkey["id"]?.stringValue?.hasPrefix("pk_") == true)
            #expect(passkey["name"] == .string("Key \(algorithm.rawValue)"))
            #expect(passkey["backed_up"] == false)
            #expect(passkey["last_used_at"] == .null)
            #expect(passkey["aaguid"]?.stringValue?.count == 36)
            #expect(passkey["public_key"] == nil && passkey["credential_id"] == nil)

            let signedIn = try world.verify(try authenticator.assert(try world.signInOptions()))
            #expect(signedIn.status == 200, "\(signedIn.text)")
            let session = try #require(signedIn.data)
            #expect(session["user"]?["id"] == .string(world.userID))
            #expect(session["is_new_user"] == false)
            let claims = try Self.claims(try #require(session["access_token"]?.stringValue))
            #expect(claims["amr"] == ["hwk", "mfa"])
            #expect(claims["sub"] == .string(world.userID))
        }
        // The second registration's options exclude the first passkey.
        let options = try world.registrationOptions()
        #expect(options["excludeCredentials"]?.arrayValue?.count == 2)
        #expect(try world.events("passkey.added").count == 2)
        #expect(try world.events("user.signed_in").contains { $0["data"]?["method"] == "passkey" })
    }

    @Test(arguments: TestDatabase.kinds)
    func aSyncedPasskeySaysSwkAndTheUserListsRenamesAndRemovesTheirPasskeys(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.server.stop() }
        let authenticator = try SoftAuthenticator(origin: "https://example.com", rpID: "example.com")
        authenticator.configure {
            $0.backupEligible = true
            $0.backedUp = true
        }
        #expect(try world.register(authenticator, name: nil).status == 201)
        let session = try #require(try world.verify(try authenticator.assert(try world.signInOptions())).data)
        #expect(try Self.claims(try #require(session["access_token"]?.stringValue))["amr"] == ["swk", "mfa"])

        let listed = try world.server.request("GET", "/v1/me/passkeys", appKey: world.app.appKey, bearer: world.token)
        #expect(listed.status == 200)
        let passkeys = try #require(listed.data?.arrayValue)
        #expect(passkeys.count == 1)
        #expect(passkeys[0]["name"] == "Passkey")
        #expect(passkeys[0]["backed_up"] == true)
        #expect(passkeys[0]["last_used_at"] != .null)
        let id = try #require(passkeys[0]["id"]?.stringValue)

        let renamed = try world.server.request("PATCH", "/v1/me/passkeys/\(id)", appKey: world.app.appKey, bearer: world.token, json: ["name": " Phone "])
        #expect(renamed.status == 200)
        #expect(renamed.data?["name"] == "Phone")
        #expect(try world.server.request("PATCH", "/v1/me/passkeys/\(id)", appKey: world.app.appKey, bearer: world.token, json: ["name": ""]).problemCode
            == "request/validation-failed")
        #expect(try world.server.request("PATCH", "/v1/me/passkeys/pk_nosuchkey", appKey: world.app.appKey, bearer: world.token, json: ["name": "x"]).status
            == 404)

        // Another user cannot remove it.
        let other = try world.server.signUp(world.app, email: "bob@example.com")
        let otherToken = try #require(other["access_token"]?.stringValue)
        #expect(try world.server.request("DELETE", "/v1/me/passkeys/\(id)", appKey: world.app.appKey, bearer: otherToken).status == 404)

        #expect(try world.server.request("DELETE", "/v1/me/passkeys/\(id)", appKey: world.app.appKey, bearer: world.token).status == 204)
        #expect(try world.server.request("GET", "/v1/me/passkeys", appKey: world.app.appKey, bearer: world.token).data == [])
        let removed = try world.events("passkey.removed")
        #expect(removed.count == 1)
        #expect(removed.first?["data"]?["by"] == "user")
        // A removed passkey signs in no more.
        #expect(try world.verify(try authenticator.assert(try world.signInOptions())).problemCode == "auth/invalid-credential")
    }

    @Test(arguments: TestDatabase.kinds)
    func aPasskeyReauthenticatesItsUser(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.server.stop() }
        let authenticator = try SoftAuthenticator(origin: Self.origin, rpID: "example.com")
        #expect(try world.register(authenticator).status == 201)
        let options = try world.server.request("POST", "/v1/auth/passkey/options", appKey: world.app.appKey, bearer: world.token, json: [:])
        #expect(options.status == 200)
        #expect(options.data?["allowCredentials"]?.arrayValue?.first?["id"] == .string(authenticator.credentialIDText))
        // A security key answering allowCredentials may send no userHandle (null): accepted here.
        var proof = try authenticator.assert(try #require(options.data), userHandle: .some(nil))
        if case .object(var object) = proof, case .object(var response)? = object["response"] {
            response["userHandle"] = .null
            object["response"] = .object(response)
            object["authenticatorAttachment"] = .null
            proof = .object(object)
        }
        let response = try world.server.request(
            "POST", "/v1/auth/reauthenticate", appKey: world.app.appKey, bearer: world.token, json: ["passkey": proof])
        #expect(response.status == 200, "\(response.text)")
        #expect(response.data?["access_token"]?.stringValue != nil)
        // A sign-in's challenge does not reauthenticate, nor does another user's passkey.
        let signInChallenge = try authenticator.assert(try world.signInOptions())
        #expect(try world.server.request("POST", "/v1/auth/reauthenticate", appKey: world.app.appKey, bearer: world.token, json: ["passkey": signInChallenge])
            .problemCode == "auth/invalid-credential")
        let bob = try #require(try world.server.signUp(world.app, email: "bob@example.com")["access_token"]?.stringValue)
        let bobOptions = try #require(try world.server.request("POST", "/v1/auth/passkey/options", appKey: world.app.appKey, bearer: bob, json: [:]).data)
        #expect(try world.server.request("POST", "/v1/auth/reauthenticate", appKey: world.app.appKey, bearer: bob, json: ["passkey": try authenticator.assert(bobOptions)])
            .problemCode == "auth/invalid-credential")
    }

    @Test(arguments: TestDatabase.kinds)
    func everyTamperedOrReplayedCeremonyIsRefused(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.server.stop() }
        let authenticator = try SoftAuthenticator(origin: Self.origin, rpID: "example.com")
        #expect(try world.register(authenticator).status == 201)

        // A replayed assertion: the same response twice.
        let assertion = try authenticator.assert(try world.signInOptions())
        #expect(try world.verify(assertion).status == 200)
        let replay = try world.verify(assertion)
        #expect(replay.status == 400)
        #expect(replay.problemCode == "auth/invalid-credential")
        #expect(replay.json?["detail"]?.stringValue?.contains("challenge") == true)

        // A reused challenge: a fresh signature over a challenge already used.
        let options = try world.signInOptions()
        #expect(try world.verify(try authenticator.assert(options)).status == 200)
        #expect(try world.verify(try authenticator.assert(options)).problemCode == "auth/invalid-credential")

        func refused(_ change: (inout SoftAuthenticator.Settings) -> Void, _ detail: String) throws {
            let before = authenticator.settings
            authenticator.configure(change)
            defer { authenticator.configure { $0 = before } }
            let response = try world.verify(try authenticator.assert(try world.signInOptions()))
            #expect(response.status == 400, "\(detail)")
            #expect(response.problemCode == "auth/invalid-credential", "\(detail): \(response.text)")
            #expect(response.json?["detail"]?.stringValue?.contains(detail) == true, "\(response.text)")
        }
        try refused({ $0.origin = "https://evil.example.org" }, "origin")
        try refused({ $0.rpID = "evil.com" }, "rpIdHash")
        try refused({ $0.userVerified = false }, "(UV)")
        try refused({ $0.userPresent = false }, "(UP)")
        try refused({ $0.clientDataType = "webauthn.create" }, "webauthn.get")

        // A tampered signature.
        var tampered = try authenticator.assert(try world.signInOptions())
        if case .object(var object) = tampered, case .object(var response)? = object["response"], let signature = response["signature"]?.stringValue {
            var bytes = try #require(Base64URL.decode(signature))
            bytes[bytes.count / 2] ^= 0x01
            response["signature"] = .string(Base64URL.encode(bytes))
            object["response"] = .object(response)
            tampered = .object(object)
        }
        #expect(try world.verify(tampered).problemCode == "auth/invalid-credential")

        // Another account's userHandle.
        #expect(try world.verify(try authenticator.assert(try world.signInOptions(), userHandle: .some(Base64URL.encode(Array("someone".utf8)))))
            .problemCode == "auth/invalid-credential")

        // A discoverable sign-in must name its account.
        let anonymous = try world.verify(try authenticator.assert(try world.signInOptions(), userHandle: .some(nil)))
        #expect(anonymous.problemCode == "request/validation-failed")
        #expect(anonymous.json?["errors"]?.arrayValue?.first?["field"] == "credential.response.userHandle")

        // A malformed credential is a validation error.
        let malformed = try world.verify(["id": "x", "rawId": "not base64url!", "type": "public-key", "response": [:]])
        #expect(malformed.status == 400)
        #expect(malformed.problemCode == "request/validation-failed")
        #expect(try world.verify("just a string").problemCode == "request/validation-failed")
    }

    @Test(arguments: TestDatabase.kinds)
    func aSignCountGoingBackwardsIsRefusedAndAudited(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.server.stop() }
        let authenticator = try SoftAuthenticator(origin: Self.origin, rpID: "example.com")
        authenticator.configure { $0.signCount = 10 }
        #expect(try world.register(authenticator).status == 201)
        #expect(try world.verify(try authenticator.assert(try world.signInOptions())).status == 200)  // 10 → 11
        authenticator.configure { $0.signCount = 5 }
        let cloned = try world.verify(try authenticator.assert(try world.signInOptions()))
        #expect(cloned.problemCode == "auth/invalid-credential")
        #expect(cloned.json?["detail"]?.stringValue?.contains("cloned") == true)
        let events = try world.events("passkey.clone_suspected")
        #expect(events.count == 1)
        #expect(events.first?["data"]?["stored_count"] == 11)
        #expect(events.first?["data"]?["presented_count"] == 5)
        // The same count again is refused too; a higher one is accepted.
        authenticator.configure { $0.signCount = 11 }
        #expect(try world.verify(try authenticator.assert(try world.signInOptions())).problemCode == "auth/invalid-credential")
        authenticator.configure { $0.signCount = 12 }
        #expect(try world.verify(try authenticator.assert(try world.signInOptions())).status == 200)

        // An authenticator without a counter (always 0) is accepted each time.
        let counterless = try SoftAuthenticator(origin: Self.origin, rpID: "example.com")
        counterless.configure {
            $0.signCount = 0
            $0.signCountStep = 0
        }
        #expect(try world.register(counterless).status == 201)
        #expect(try world.verify(try counterless.assert(try world.signInOptions())).status == 200)
        #expect(try world.verify(try counterless.assert(try world.signInOptions())).status == 200)
    }

    @Test(arguments: TestDatabase.kinds)
    func aPasskeyOfAnotherAppIsUnknownHere(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.server.stop() }
        let authenticator = try SoftAuthenticator(origin: Self.origin, rpID: "example.com")
        #expect(try world.register(authenticator).status == 201)
        let other = try world.server.createApp(Self.settings)
        let options = try #require(try world.server.request("POST", "/v1/auth/passkey/options", appKey: other.appKey, json: [:]).data)
        let response = try world.server.request(
            "POST", "/v1/auth/passkey/verify", appKey: other.appKey, json: ["credential": try authenticator.assert(options)])
        #expect(response.problemCode == "auth/invalid-credential")
        #expect(response.json?["detail"]?.stringValue?.contains("not registered with this app") == true)
        // Nor does the first app take a challenge the other issued.
        let foreign = try authenticator.assert(options)
        #expect(try world.verify(foreign).problemCode == "auth/invalid-credential")
    }

    @Test(arguments: TestDatabase.kinds)
    func packedSelfAttestationIsVerified(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.server.stop() }
        for algorithm in [SignatureAlgorithm.es256, .rs256] {
            let good = try SoftAuthenticator(algorithm, origin: Self.origin, rpID: "example.com")
            good.configure { $0.attestation = .packedSelf }
            #expect(try world.register(good).status == 201)
            let bad = try SoftAuthenticator(algorithm, origin: Self.origin, rpID: "example.com")
            bad.configure { $0.attestation = .packedSelfWrongSignature }
            let refused = try world.register(bad)
            #expect(refused.problemCode == "auth/invalid-credential")
            #expect(refused.json?["detail"]?.stringValue?.contains("self attestation") == true)
        }
        // A registration refused for its origin, its rp id or a missing UV.
        for change: (inout SoftAuthenticator.Settings) -> Void in [{ $0.origin = "https://example.org" }, { $0.rpID = "other.com" }, { $0.userVerified = false }] {
            let authenticator = try SoftAuthenticator(origin: Self.origin, rpID: "example.com")
            authenticator.configure(change)
            #expect(try world.register(authenticator).problemCode == "auth/invalid-credential")
        }
        // The same credential twice.
        let twice = try SoftAuthenticator(origin: Self.origin, rpID: "example.com")
        #expect(try world.register(twice).status == 201)
        #expect(try world.register(twice).problemCode == "auth/invalid-credential")
        #expect(try world.server.request("GET", "/v1/me/passkeys", appKey: world.app.appKey, bearer: world.token).data?.arrayValue?.count == 3)
    }

    @Test(arguments: TestDatabase.kinds)
    func withoutPasskeySettingsEveryCallAnswers503AndSettingsAreChecked(_ kind: TestDatabaseKind) throws {
        let world = try World(kind, settings: ["name": "No passkeys"])
        defer { world.server.stop() }
        let options = try world.server.request("POST", "/v1/me/passkeys/options", appKey: world.app.appKey, bearer: world.token, json: [:])
        #expect(options.status == 503)
        #expect(options.problemCode == "auth/provider-not-configured")
        #expect(try world.server.request("POST", "/v1/auth/passkey/options", appKey: world.app.appKey, json: [:]).status == 503)
        let cases: [JSON] = [
            ["rp_id": "example.com", "origins": ["https://example.org"]],
            ["rp_id": "example.com", "origins": ["http://app.example.com"]],
            ["rp_id": "https://example.com", "origins": ["https://example.com"]],
            ["rp_id": "10.0.0.1", "origins": ["https://10.0.0.1"]],
            ["rp_id": "example.com"],
            ["rp_id": "example.com", "origins": ["https://app.example.com/path"]],
            // A browser takes a localhost origin only with the rp id localhost.
            ["rp_id": "example.com", "origins": ["http://localhost:8080"]],
            // An Android app's origin is the SHA-256 of its signing certificate, 43 base64url characters.
            ["rp_id": "example.com", "origins": ["android:apk-key-hash:abc"]],
            ["rp_id": "example.com", "origins": [.string("android:apk-key-hash:" + String(repeating: "A", count: 42) + "=")]],
        ]
        for passkeys in cases {
            let response = try world.server.request("PATCH", "/v1/admin/app", bearer: world.app.secretKey, json: ["passkeys": passkeys])
            #expect(response.problemCode == "request/validation-failed", "\(passkeys.serializedString)")
        }
        let set = try world.server.request(
            "PATCH", "/v1/admin/app", bearer: world.app.secretKey, json: ["passkeys": ["rp_id": "Example.com", "origins": ["https://App.example.com", "https://example.com:8443"]]])
        #expect(set.status == 200, "\(set.text)")
        #expect(set.data?["passkeys"] == ["rp_id": "example.com", "origins": ["https://app.example.com", "https://example.com:8443"]])
        let local = try world.server.request(
            "PATCH", "/v1/admin/app", bearer: world.app.secretKey, json: ["passkeys": ["rp_id": "localhost", "origins": ["http://localhost:5173"]]])
        #expect(local.status == 200, "\(local.text)")
        // Passkeys work from a development page on localhost.
        let authenticator = try SoftAuthenticator(origin: "http://localhost:5173", rpID: "localhost")
        #expect(try world.register(authenticator).status == 201)
        #expect(try world.verify(try authenticator.assert(try world.signInOptions())).status == 200)
        // A native Android app (Credential Manager) signs with its apk-key-hash origin.
        let android = "android:apk-key-hash:" + Base64URL.encode(Digest.sha256(Array("the app's signing certificate".utf8)))
        let withApp = try world.server.request(
            "PATCH", "/v1/admin/app", bearer: world.app.secretKey, json: ["passkeys": ["rp_id": "example.com", "origins": ["https://example.com", .string(android)]]])
        #expect(withApp.data?["passkeys"]?["origins"] == ["https://example.com", .string(android)], "\(withApp.text)")
        let phone = try SoftAuthenticator(origin: android, rpID: "example.com")
        #expect(try world.register(phone).status == 201)
        #expect(try world.verify(try phone.assert(try world.signInOptions())).status == 200)
        let otherApp = try SoftAuthenticator(origin: "android:apk-key-hash:" + Base64URL.encode(Digest.sha256(Array("another app".utf8))), rpID: "example.com")
        #expect(try world.register(otherApp).problemCode == "auth/invalid-credential")
    }

    @Test(arguments: TestDatabase.kinds)
    func erasingTheAccountErasesItsPasskeys(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.server.stop() }
        let authenticator = try SoftAuthenticator(origin: Self.origin, rpID: "example.com")
        #expect(try world.register(authenticator).status == 201)
        #expect(try world.server.request("DELETE", "/v1/me", appKey: world.app.appKey, bearer: world.token).status == 204)
        let response = try world.verify(try authenticator.assert(try world.signInOptions()))
        #expect(response.problemCode == "auth/invalid-credential")
        #expect(response.json?["detail"]?.stringValue?.contains("not registered") == true)
    }
}
