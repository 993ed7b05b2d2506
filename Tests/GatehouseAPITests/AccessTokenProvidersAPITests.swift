import GatehouseCore
import GatehouseCrypto
import GatehouseTesting
import Testing

/// The provider kinds without ID tokens (API.md "More providers"): `POST /v1/auth/oidc/{id}` with
/// `{access_token}`, read from Naver's profile API and GitHub's user API, each played by its fake
/// over real HTTP. The real server, both databases.
@Suite("Naver and GitHub sign-in with an access token")
struct AccessTokenProvidersAPITests {
    final class World {
        let naver: FakeNaver
        let github: FakeGitHub
        let server: TestServer
        let app: TestServer.CreatedApp

        init(_ kind: TestDatabaseKind) throws {
            naver = try FakeNaver()
            github = try FakeGitHub()
            github.registerApp(clientID: "gh-client", clientSecret: "gh-secret-1")
            let (naverURL, githubURL) = (naver.baseURL, github.baseURL)
            server = try TestServer(kind) {
                $0.providerURLs["naver"] = naverURL
                $0.providerURLs["github"] = githubURL
            }
            app = try server.createApp([
                "name": "Shop", "rate_limits": ["auth_per_minute_per_ip": 1000], "sign_in_methods": ["password", "naver", "gh"],
                "oidc_providers": [
                    ["id": "naver", "kind": "naver", "client_ids": ["nv-client"]],
                    ["id": "gh", "kind": "github", "client_ids": ["gh-client"], "client_secret": "gh-secret-1"],
                ],
            ])
        }

        func stop() {
            server.stop()
            naver.stop()
            github.stop()
        }

        func signIn(_ id: String, _ token: String) throws -> TestResponse {
            try server.request("POST", "/v1/auth/oidc/\(id)", appKey: app.appKey, json: ["access_token": .string(token)])
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func naverSignsInByItsProfileAndNeverVouchesForTheEmail(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let member = FakeNaverMember(key: "ada", email: "ada@naver.com", name: "김에이다")
        let first = try world.signIn("naver", world.naver.issueToken(for: member, clientID: "nv-client"))
        #expect(first.status == 201, "\(first.text)")
        let user = try #require(first.data?["user"])
        #expect(user["identities"] == ["naver"] && user["email_verified"] != true)
        let again = try world.signIn("naver", world.naver.issueToken(for: member, clientID: "nv-client"))
        #expect(again.status == 200 && again.data?["user"]?["id"] == user["id"])
        let claims = try JSON.parse(JWT.parse(try #require(again.data?["access_token"]?.stringValue)).payload)
        #expect(claims["amr"]?.arrayValue?.contains("ext") == true)

        // Another Naver application's token names another member id: never this user.
        let foreign = try world.signIn("naver", world.naver.issueToken(for: member, clientID: "someone-elses-client"))
        #expect(foreign.data?["user"]?["id"] != user["id"])
        // A token Naver does not know.
        #expect(try world.signIn("naver", "AAAAOx-unknown-token").problemCode == "auth/invalid-credential")
        // An ID token is not what a naver provider takes.
        let idToken = try world.server.request("POST", "/v1/auth/oidc/naver", appKey: world.app.appKey, json: ["id_token": "x.y.z", "nonce": "n"])
        #expect(idToken.status == 400)
    }

    @Test(arguments: TestDatabase.kinds)
    func gitHubTakesOnlyTokensOfTheAppsOAuthAppAndOnlyAVerifiedPrimaryEmail(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let octocat = FakeGitHubUser(
            id: 583231, login: "octocat", emails: [FakeGitHubEmail("old@example.com", verified: false), FakeGitHubEmail("octo@example.com", primary: true, verified: true)])
        let first = try world.signIn("gh", world.github.issueToken(for: octocat, clientID: "gh-client"))
        #expect(first.status == 201, "\(first.text)")
        #expect(first.data?["user"]?["email"] == "octo@example.com" && first.data?["user"]?["email_verified"] == true)
        #expect(try world.signIn("gh", world.github.issueToken(for: octocat, clientID: "gh-client")).data?["user"]?["id"] == first.data?["user"]?["id"])

        // A token of another GitHub OAuth app, for the very same GitHub user: refused.
        let foreign = try world.signIn("gh", world.github.issueToken(for: octocat, clientID: "another-oauth-app"))
        #expect(foreign.status == 401 && foreign.problemCode == "auth/invalid-credential", "\(foreign.text)")
        // No verified primary address: signed in without one.
        let unverified = FakeGitHubUser(id: 42, login: "hubot", emails: [FakeGitHubEmail("hubot@example.com", primary: true, verified: false)])
        let noEmail = try world.signIn("gh", world.github.issueToken(for: unverified, clientID: "gh-client"))
        #expect(noEmail.status == 201 && noEmail.data?["user"]?["email"] == .null, "\(noEmail.text)")
        #expect(world.github.errors.isEmpty, "\(world.github.errors)")
    }

    @Test(arguments: TestDatabase.kinds)
    func aGitHubProviderNeedsItsClientSecret(_ kind: TestDatabaseKind) throws {
        let world = try World(kind)
        defer { world.stop() }
        let patched = try world.server.request("PATCH", "/v1/admin/app", bearer: world.app.secretKey, json: [
            "oidc_providers": [
                ["id": "naver", "kind": "naver", "client_ids": ["nv-client"]], ["id": "gh", "kind": "github", "client_ids": ["gh-client"]],
            ]
        ])
        #expect(patched.status == 400)
        // (sign_in_methods is refused with it: its `gh` no longer names a provider that holds.)
        #expect(patched.json?["errors"]?.arrayValue?.compactMap { $0["field"]?.stringValue }.contains("oidc_providers[1].client_secret") == true)
    }
}
