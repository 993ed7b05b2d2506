import Foundation
import GatehouseCore
import GatehouseCrypto
import GatehouseTesting
import Testing

@Suite("Signing keys, JWKS and discovery")
struct SigningKeysAPITests {
    /// A token signed with the app's current key, as access tokens will be.
    func token(_ server: TestServer, appID: String) throws -> String {
        let id = try #require(AppID(parsing: appID))
        let app = try #require(try server.gatehouse.directory.app(id: id))
        let now = server.clock.nowSeconds
        let claims: JSON = [
            "iss": .string("\(TestServer.publicURL)/v1/apps/\(appID)"), "aud": .string(appID), "sub": "usr_test", "iat": .int(now),
            "exp": .int(now + 600),
        ]
        return try JWT.sign(payload: claims.serialized(), key: app.signingKey, kid: app.signingKeyID, type: "at+jwt")
    }

    func verifyIndependently(_ server: TestServer, appID: String, token: String, algorithm: String) throws -> IndependentJWTVerifier.Outcome {
        try IndependentJWTVerifier.verify(
            token: token, jwksURL: "\(server.baseURL)/v1/apps/\(appID)/jwks.json", audience: appID,
            issuer: "\(TestServer.publicURL)/v1/apps/\(appID)", algorithm: algorithm)
    }

    @Test(arguments: TestDatabase.kinds, ["RS256", "ES256"])
    func anIndependentLibraryAcceptsTokensAgainstThePublishedJWKS(_ kind: TestDatabaseKind, algorithm: String) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(["name": "Signed", "signing_algorithm": .string(algorithm)])

        let discovery = try server.request("GET", "/v1/apps/\(app.id)/.well-known/openid-configuration")
        #expect(discovery.status == 200)
        let issuer = "\(TestServer.publicURL)/v1/apps/\(app.id)"
        #expect(discovery.json?["issuer"] == .string(issuer))
        #expect(discovery.json?["jwks_uri"] == .string(issuer + "/jwks.json"))
        #expect(discovery.json?["access_token_signing_alg_values_supported"] == [.string(algorithm)])
        // No ID tokens are issued, so no ID-token algorithm is advertised.
        #expect(discovery.json?["id_token_signing_alg_values_supported"] == nil)

        let jwks = try server.request("GET", "/v1/apps/\(app.id)/jwks.json")
        #expect(jwks.status == 200)
        #expect(jwks.header("Cache-Control") == "public, max-age=300")
        guard case .array(let keys)? = jwks.json?["keys"] else { Issue.record("no keys"); return }
        // The current key and the next one are published; no private member ever is.
        #expect(keys.count == 2)
        for key in keys {
            #expect(key["alg"] == .string(algorithm))
            #expect(key["use"] == "sig")
            #expect(key["d"] == nil && key["p"] == nil && key["q"] == nil)
        }

        let signed = try token(server, appID: app.id)
        guard case .valid(let claims) = try verifyIndependently(server, appID: app.id, token: signed, algorithm: algorithm) else {
            Issue.record("PyJWT rejected the token")
            return
        }
        #expect(claims["sub"] == "usr_test")
    }

    @Test(arguments: TestDatabase.kinds)
    func theIndependentVerifierRejectsATokenOfAnotherApp(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let a = try server.createApp(["name": "A"])
        let b = try server.createApp(["name": "B"])
        let tokenOfA = try token(server, appID: a.id)
        let outcome = try IndependentJWTVerifier.verify(
            token: tokenOfA, jwksURL: "\(server.baseURL)/v1/apps/\(b.id)/jwks.json", audience: b.id,
            issuer: "\(TestServer.publicURL)/v1/apps/\(b.id)", algorithm: "RS256")
        guard case .rejected = outcome else { Issue.record("a token of app A verified against app B's JWKS"); return }
    }

    @Test(arguments: TestDatabase.kinds)
    func rotationUsesThePublishedNextKeyAndKeepsTheOldOneUntilItsTokensExpire(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock()
        let server = try TestServer(kind, clock: clock)
        defer { server.stop() }
        let app = try server.createApp()
        let before = try server.request("GET", "/v1/apps/\(app.id)/jwks.json").json
        let kidsBefore = kids(before)
        let oldToken = try token(server, appID: app.id)

        // Keys rotate at most once a minute, and creating the app published its first two.
        clock.advance(seconds: 61)
        let rotated = try server.request("POST", "/v1/admin/app/signing-keys/rotate", bearer: app.secretKey)
        #expect(rotated.status == 200)
        let newKid = try #require(rotated.data?["kid"]?.stringValue)
        // The new signing key was already published before the rotation.
        #expect(kidsBefore.contains(newKid))

        let after = kids(try server.request("GET", "/v1/apps/\(app.id)/jwks.json").json)
        #expect(after.count == 3)
        #expect(Set(kidsBefore).isSubset(of: Set(after)))
        let newToken = try token(server, appID: app.id)
        #expect(try JWT.parse(newToken).header.kid == newKid)
        if case .rejected(let why) = try verifyIndependently(server, appID: app.id, token: oldToken, algorithm: "RS256") {
            Issue.record("a token signed before rotation no longer verifies: \(why)")
        }

        // A day later (beyond any access-token lifetime) the retired key has left the JWKS (and
        // this node's trusted keys) on its own, with no change to the app, and stays out after the
        // next rotation.
        clock.advance(seconds: 86400 + 301)
        let oldKid = try #require(JWT.parse(oldToken).header.kid)
        #expect(!kids(try server.request("GET", "/v1/apps/\(app.id)/jwks.json").json).contains(oldKid))
        _ = try server.request("POST", "/v1/admin/app/signing-keys/rotate", bearer: app.secretKey)
        let later = kids(try server.request("GET", "/v1/apps/\(app.id)/jwks.json").json)
        #expect(!later.contains(oldKid))
        #expect(later.contains(newKid))
    }

    @Test(arguments: TestDatabase.kinds)
    func unknownOrMalformedAppIDsAre404(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        for id in ["app_aaaaaaaaaaaaaaaaaaaaaaaa", "nope", "app_%27%20OR%201%3D1", "app_" + String(repeating: "a", count: 500)] {
            let response = try server.request("GET", "/v1/apps/\(id)/jwks.json")
            #expect(response.status == 404)
            #expect(response.problemCode == "request/not-found")
        }
    }

    func kids(_ jwks: JSON?) -> [String] {
        guard case .array(let keys)? = jwks?["keys"] else { return [] }
        return keys.compactMap { $0["kid"]?.stringValue }
    }
}
