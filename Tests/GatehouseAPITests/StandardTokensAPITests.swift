import Foundation
import GatehouseCore
import GatehouseCrypto
import GatehouseHTTP
import GatehouseTesting
import Testing

/// The discovery document as RFC 8414 metadata and access tokens as RFC 9068 JWTs, checked the way
/// an app's backend checks them: joserfc (PyPI) fetches discovery, then `jwks_uri`, and verifies.
/// The server's public URL is `https://` here, as in production behind its TLS proxy.
@Suite("Standard discovery and tokens (RFC 8414, RFC 9068)")
struct StandardTokensAPITests {
    static let publicOrigin = "https://gatehouse.test"

    static func server(_ kind: TestDatabaseKind, clock: any Clock = SystemClock()) throws -> TestServer {
        try TestServer(kind, clock: clock) { $0.publicURL = publicOrigin }
    }

    static func verify(_ server: TestServer, _ token: String, app: String, audience: String? = nil) throws -> StandardTokenVerifier.Outcome {
        try StandardTokenVerifier.verify(
            token: token, issuer: "\(publicOrigin)/v1/apps/\(app)", audience: audience ?? app, publicOrigin: publicOrigin, connectTo: server.baseURL)
    }

    static func claims(_ token: String) throws -> JSON { try JSON.parse(JWT.parse(token).payload) }

    @Test(arguments: TestDatabase.kinds, ["RS256", "ES256"])
    func anAppsBackendVerifiesItsAccessTokensThroughDiscoveryWithJoserfc(_ kind: TestDatabaseKind, algorithm: String) throws {
        // Two minutes behind, so that the rotation below (a minute later) still issues tokens
        // dated before the verifier's now: joserfc allows no leeway on `iat` either.
        let clock = ManualClock(millis: SystemClock().nowMillis() - 120_000)
        let server = try Self.server(kind, clock: clock)
        defer { server.stop() }
        let app = try server.createApp(["name": "Standard", "signing_algorithm": .string(algorithm), "rate_limits": ["auth_per_minute_per_ip": 1000]])
        let signUp = try server.request(
            "POST", "/v1/auth/signup", appKey: app.appKey,
            json: ["email": "ada@example.com", "password": "correct horse battery", "first_name": "Ada", "last_name": "Lovelace"])
        #expect(signUp.status == 201)
        let first = try #require(signUp.data?["access_token"]?.stringValue)
        // A photo, so that the token carries every claim there is.
        let photo = try server.request(
            "POST", "/v1/me/photo", appKey: app.appKey, bearer: first,
            headers: [("Content-Type", "multipart/form-data; boundary=\(FilesAPITests.boundary)")],
            body: FilesAPITests.multipart(files: [("photo", "me.png", TinyImages.png())]))
        #expect(photo.status == 200)
        // And custom data from the admin, carried as claim `app_metadata`.
        let userID = try #require(signUp.data?["user"]?["id"]?.stringValue)
        let custom = try server.request(
            "PATCH", "/v1/admin/users/\(userID)", bearer: app.secretKey, json: ["app_metadata": ["plan": "pro", "roles": ["editor"]]])
        #expect(custom.status == 200)
        let refreshed = try server.request(
            "POST", "/v1/auth/refresh", appKey: app.appKey, json: ["refresh_token": .string(try #require(signUp.data?["refresh_token"]?.stringValue))])
        let token = try #require(refreshed.data?["access_token"]?.stringValue)

        let outcome = try Self.verify(server, token, app: app.id)
        #expect(outcome.failure == nil, "joserfc refused: \(outcome.failure ?? "")")

        // The metadata says only what is true: no OAuth endpoints, grants, response types or ID
        // tokens, and the one algorithm that signs.
        let metadata = outcome.metadata
        #expect(metadata["issuer"] == .string("\(Self.publicOrigin)/v1/apps/\(app.id)"))
        #expect(metadata["jwks_uri"] == .string("\(Self.publicOrigin)/v1/apps/\(app.id)/jwks.json"))
        #expect(metadata["response_types_supported"] == [])
        #expect(metadata["grant_types_supported"] == [])
        #expect(metadata["access_token_signing_alg_values_supported"] == [.string(algorithm)])
        #expect(outcome.header["alg"] == .string(algorithm))
        #expect(outcome.header["typ"] == "at+jwt")
        for absent in ["authorization_endpoint", "token_endpoint", "userinfo_endpoint", "registration_endpoint", "id_token_signing_alg_values_supported", "scopes_supported"] {
            #expect(metadata[absent] == nil, "\(absent) is advertised")
        }
        guard case .object(let members) = metadata else { Issue.record("no metadata"); return }
        #expect(
            Set(members.keys) == [
                "issuer", "jwks_uri", "response_types_supported", "grant_types_supported", "access_token_signing_alg_values_supported",
                "subject_types_supported", "claims_supported",
            ])

        // RFC 9068's claims, and claims_supported lists exactly what a token of a user with
        // every optional value carries.
        let claims = outcome.claims
        #expect(claims["client_id"] == .string(app.id))
        #expect(claims["aud"] == .string(app.id))
        #expect(claims["picture"]?.stringValue?.hasPrefix(Self.publicOrigin + "/") == true)
        #expect(claims["app_metadata"] == ["plan": "pro", "roles": ["editor"]])
        guard case .object(let issued) = claims else { Issue.record("no claims"); return }
        #expect(metadata["claims_supported"] == .array(TokenService.accessTokenClaims.map(JSON.string)))
        // All but `is_anonymous`, which only an anonymous user's token carries (and it has no email).
        #expect(Set(issued.keys) == Set(TokenService.accessTokenClaims).subtracting(["is_anonymous"]))

        // The token from before the photo passes the same checks, without `picture`.
        let earlier = try Self.verify(server, first, app: app.id)
        #expect(earlier.failure == nil, "joserfc refused the sign-up token: \(earlier.failure ?? "")")
        #expect(earlier.claims["picture"] == nil)
        #expect(earlier.claims["app_metadata"] == nil)

        // After a rotation the new key signs with the same algorithm, and both tokens verify.
        clock.advance(seconds: 61)
        let rotated = try server.request("POST", "/v1/admin/app/signing-keys/rotate", bearer: app.secretKey)
        #expect(rotated.status == 200)
        let signIn = try server.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"])
        let afterRotation = try #require(signIn.data?["access_token"]?.stringValue)
        #expect(try JWT.parse(afterRotation).header.kid == rotated.data?["kid"]?.stringValue)
        for (name, candidate) in [("after the rotation", afterRotation), ("before the rotation", token)] {
            let again = try Self.verify(server, candidate, app: app.id)
            #expect(again.failure == nil, "joserfc refused the token signed \(name): \(again.failure ?? "")")
            #expect(again.metadata["access_token_signing_alg_values_supported"] == [.string(algorithm)])
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func everyAccessTokenHasItsOwnJTI(_ kind: TestDatabaseKind) throws {
        let server = try Self.server(kind)
        defer { server.stop() }
        let app = try server.createApp(["name": "Unique", "rate_limits": ["auth_per_minute_per_ip": 1000]])
        let session = try server.signUp(app)
        var tokens = [try #require(session["access_token"]?.stringValue)]
        for _ in 0..<5 {
            let signIn = try server.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"])
            tokens.append(try #require(signIn.data?["access_token"]?.stringValue))
        }
        // Two refreshes of one token within the grace window: the same refresh token, yet each
        // answer's access token is a token of its own.
        let refreshToken = try #require(session["refresh_token"]?.stringValue)
        for _ in 0..<2 {
            let refreshed = try server.request("POST", "/v1/auth/refresh", appKey: app.appKey, json: ["refresh_token": .string(refreshToken)])
            #expect(refreshed.status == 200)
            tokens.append(try #require(refreshed.data?["access_token"]?.stringValue))
        }
        let reauthenticated = try server.request(
            "POST", "/v1/auth/reauthenticate", appKey: app.appKey, bearer: tokens[0], json: ["password": "correct horse battery"])
        tokens.append(try #require(reauthenticated.data?["access_token"]?.stringValue))

        let jtis = try tokens.map { try #require(try Self.claims($0)["jti"]?.stringValue) }
        #expect(Set(jtis).count == tokens.count)
        for jti in jtis {
            // 128 random bits, base64url.
            #expect(jti.count == 22 && jti.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") })
        }
        for token in tokens { #expect(try Self.claims(token)["client_id"] == .string(app.id)) }
    }

    /// The same checks refuse what a backend must refuse: a changed token, another app's token, an
    /// expired one, a token for another audience.
    @Test(arguments: TestDatabase.kinds)
    func joserfcRefusesTamperedForeignExpiredAndMisdirectedTokens(_ kind: TestDatabaseKind) throws {
        let server = try Self.server(kind)
        defer { server.stop() }
        let app = try server.createApp(["name": "A"])
        let other = try server.createApp(["name": "B", "signing_algorithm": "ES256"])
        let token = try #require(try server.signUp(app)["access_token"]?.stringValue)
        let foreign = try #require(try server.signUp(other)["access_token"]?.stringValue)

        let parts = token.split(separator: ".").map(String.init)
        var forged = try Self.claims(token)
        if case .object(var o) = forged {
            o["sub"] = "usr_someone_else"
            forged = .object(o)
        }
        let tampered = parts[0] + "." + Base64URL.encode(forged.serialized()) + "." + parts[2]

        let cases: [(String, String, String?, String)] = [
            ("a changed payload", tampered, nil, "token: BadSignatureError"),
            ("another app's token", foreign, nil, "token:"),
            ("a token for another audience", token, "app_another_backend", "token: InvalidClaimError"),
        ]
        for (name, candidate, audience, expected) in cases {
            let outcome = try Self.verify(server, candidate, app: app.id, audience: audience)
            #expect(outcome.failure?.hasPrefix(expected) == true, "\(name): \(outcome.failure ?? "accepted")")
        }

        // A token that expired: issued by a server whose clock is 20 minutes behind.
        let late = try Self.server(kind, clock: ManualClock(millis: SystemClock().nowMillis() - 1_200_000))
        defer { late.stop() }
        let lateApp = try late.createApp(["name": "Late"])
        let expired = try #require(try late.signUp(lateApp)["access_token"]?.stringValue)
        let outcome = try Self.verify(late, expired, app: lateApp.id)
        #expect(outcome.failure?.hasPrefix("token: ExpiredTokenError") == true, "\(outcome.failure ?? "accepted")")
    }

    /// The metadata checks are real: documents that break RFC 8414, or that claim what Gatehouse
    /// does not do, fail them (served by a fake, since Gatehouse serves none of them).
    @Test
    func theMetadataChecksRefuseDocumentsThatBreakRFC8414() throws {
        let server = try Self.server(.sqlite)
        defer { server.stop() }
        let app = try server.createApp(["name": "Checked"])
        let token = try #require(try server.signUp(app)["access_token"]?.stringValue)
        let path = "/v1/apps/\(app.id)/.well-known/openid-configuration"
        let real = try #require(try server.request("GET", path).json)
        let issuer = "\(Self.publicOrigin)/v1/apps/\(app.id)"
        let located = "/.well-known/oauth-authorization-server/v1/apps/\(app.id)"

        func changed(_ change: (inout [String: JSON]) -> Void) -> JSON {
            guard case .object(var o) = real else { return real }
            change(&o)
            return .object(o)
        }
        let documents: [(String, JSON, String)] = [
            // What this endpoint served before: OpenID-looking, without RFC 8414's required member.
            (
                "the former document",
                [
                    "issuer": .string(issuer), "jwks_uri": .string(issuer + "/jwks.json"), "id_token_signing_alg_values_supported": ["RS256"],
                    "subject_types_supported": ["public"], "claims_supported": ["sub"],
                ], "metadata: Failed: response_types_supported is missing"
            ),
            ("grants left to the default", changed { $0["grant_types_supported"] = nil }, "metadata: Failed: authorization_endpoint is missing"),
            ("a refresh grant without a token endpoint", changed { $0["grant_types_supported"] = ["refresh_token"] }, "metadata: Failed: token_endpoint is missing"),
            ("a response type without an authorization endpoint", changed { $0["response_types_supported"] = ["code"] }, "metadata: Failed: authorization_endpoint is missing"),
            ("another issuer", changed { $0["issuer"] = .string(issuer + "x") }, "metadata: Failed: issuer"),
            ("a plain-http key URL", changed { $0["jwks_uri"] = "http://gatehouse.test/jwks.json" }, "metadata: Failed: jwks_uri must be an https URL"),
            ("a symmetric algorithm", changed { $0["access_token_signing_alg_values_supported"] = ["HS256"] }, "metadata: Failed: access_token_signing_alg"),
        ]
        // The real document, from the real server, passes: a control for the cases below.
        let control = try StandardTokenVerifier.verify(
            token: token, issuer: issuer, audience: app.id, publicOrigin: Self.publicOrigin, connectTo: server.baseURL)
        #expect(control.failure == nil, "\(control.failure ?? "")")
        for (name, document, expected) in documents {
            let fake = try FakeHTTPServer { request, _ in [path, located].contains(request.path) ? FakeHTTPServer.json(200, document) : nil }
            defer { fake.stop() }
            let outcome = try StandardTokenVerifier.verify(
                token: token, issuer: issuer, audience: app.id, publicOrigin: Self.publicOrigin, connectTo: fake.baseURL)
            #expect(outcome.failure?.hasPrefix(expected) == true, "\(name): \(outcome.failure ?? "accepted")")
        }
        // RFC 8414's location serving another document than the OpenID-style one.
        let other = changed { $0["claims_supported"] = ["sub"] }
        let split = try FakeHTTPServer { request, _ in
            request.path == path ? FakeHTTPServer.json(200, real) : request.path == located ? FakeHTTPServer.json(200, other) : nil
        }
        defer { split.stop() }
        let outcome = try StandardTokenVerifier.verify(
            token: token, issuer: issuer, audience: app.id, publicOrigin: Self.publicOrigin, connectTo: split.baseURL)
        #expect(outcome.failure?.hasPrefix("metadata: Failed: the metadata at RFC 8414's location differs") == true, "\(outcome.failure ?? "accepted")")
    }
}
