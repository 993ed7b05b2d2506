import GatehouseCore
import GatehouseHTTP
import GatehouseOutbound
import GatehouseProviders
import GatehouseTesting
import Testing

@Suite struct GitHubClientTests {
    let github: FakeGitHub
    let client: GitHubClient
    let clientID = "Ov23liAppOfTheTenant"
    let secret = "0123456789abcdef0123456789abcdef01234567"
    let octocat = FakeGitHubUser()

    init() throws {
        github = try FakeGitHub()
        github.registerApp(clientID: clientID, clientSecret: secret)
        client = GitHubClient(baseURL: github.baseURL + "/", client: OutboundHTTPClient(timeoutSeconds: 5))
    }

    @Test func aTokenOfTheAppNamesTheUserWithTheirPrimaryVerifiedEmail() throws {
        let token = github.issueToken(for: octocat, clientID: clientID)
        let identity = try client.profile(accessToken: token, clientIDs: [clientID], clientSecret: secret)
        #expect(identity.subject == "583231")
        #expect(identity.email == "octocat@example.com")
        #expect(identity.emailVerified)
        #expect(identity.displayName == "The Octocat")
        #expect(identity.audience == clientID)
        #expect(github.requests == ["POST /applications/\(clientID)/token", "GET /user", "GET /user/emails"])
        #expect(github.errors.isEmpty)
    }

    @Test func theTokenMayBelongToAnyOfTheAppsClientIDs() throws {
        github.registerApp(clientID: "Iv1.secondApp", clientSecret: secret)
        let token = github.issueToken(for: octocat, clientID: "Iv1.secondApp")
        let identity = try client.profile(accessToken: token, clientIDs: [clientID, "Iv1.secondApp"], clientSecret: secret)
        #expect(identity.audience == "Iv1.secondApp")
        #expect(github.errors.isEmpty)
    }

    /// Basic authentication's base64 is padded: secrets of every length modulo 3 are sent right.
    @Test func theClientCredentialsReachGitHubWhateverTheirLength() throws {
        for (index, secret) in ["s", "se", "sec", "secr"].enumerated() {
            let id = "client-\(index)"
            github.registerApp(clientID: id, clientSecret: secret)
            let token = github.issueToken(for: octocat, clientID: id)
            #expect(try client.profile(accessToken: token, clientIDs: [id], clientSecret: secret).audience == id)
        }
        #expect(github.errors.isEmpty)
    }

    @Test func aTokenOfAnotherGitHubAppIsRefusedBeforeTheUserIsRead() throws {
        let theirs = github.issueToken(for: octocat, clientID: "Ov23liSomeoneElse")
        #expect(invalidTokenReason { try client.profile(accessToken: theirs, clientIDs: [clientID], clientSecret: secret) }
            == "the token belongs to no client of this app")
        #expect(github.requestCount("GET", "/user") == 0)
        #expect(github.errors.isEmpty)
    }

    @Test func anUnknownOrRevokedTokenIsInvalid() throws {
        let token = github.issueToken(for: octocat, clientID: clientID)
        github.revoke(token)
        #expect(invalidTokenReason { try client.profile(accessToken: token, clientIDs: [clientID], clientSecret: secret) } != nil)
        #expect(invalidTokenReason { try client.profile(accessToken: "gho_madeup", clientIDs: [clientID], clientSecret: secret) } != nil)
        #expect(invalidTokenReason { try client.profile(accessToken: "gho_ two", clientIDs: [clientID], clientSecret: secret) } == "malformed access token")
    }

    @Test func anUnverifiedEmailIsNeverTaken() throws {
        let user = FakeGitHubUser(
            id: 7, login: "mallory", name: nil, publicEmail: "victim@example.com",
            emails: [FakeGitHubEmail("victim@example.com", primary: true, verified: false), FakeGitHubEmail("m@example.com", primary: false, verified: true)])
        let identity = try client.profile(accessToken: github.issueToken(for: user, clientID: clientID), clientIDs: [clientID], clientSecret: secret)
        #expect(identity.subject == "7")
        #expect(identity.email == nil)
        #expect(identity.emailVerified == false)
        #expect(identity.displayName == "mallory")
    }

    @Test func aUserWithoutAVerifiedEmailOrATokenWithoutTheEmailScopeSignsInWithoutOne() throws {
        let unverified = FakeGitHubUser(emails: [FakeGitHubEmail("a@example.com", primary: true, verified: false)])
        let none = try client.profile(accessToken: github.issueToken(for: unverified, clientID: clientID), clientIDs: [clientID], clientSecret: secret)
        #expect(none.email == nil && !none.emailVerified)
        let noEmails = FakeGitHubUser(emails: [])
        #expect(try client.profile(accessToken: github.issueToken(for: noEmails, clientID: clientID), clientIDs: [clientID], clientSecret: secret).email == nil)
        let unscoped = github.issueToken(for: octocat, clientID: clientID, emailScope: false)
        let identity = try client.profile(accessToken: unscoped, clientIDs: [clientID], clientSecret: secret)
        #expect(identity.subject == "583231")
        #expect(identity.email == nil && !identity.emailVerified)
    }

    /// Without the secret nothing can be checked: never a sign-in with an unchecked token.
    @Test func withoutASecretOrAClientIDNothingIsAccepted() throws {
        let token = github.issueToken(for: octocat, clientID: clientID)
        #expect(providerError { try client.profile(accessToken: token, clientIDs: [clientID], clientSecret: "") }?.isUnavailable == true)
        #expect(invalidTokenReason { try client.profile(accessToken: token, clientIDs: [], clientSecret: secret) } != nil)
        #expect(github.requests.isEmpty)
    }

    @Test func aWrongClientSecretIsOurProblemNotTheUsers() throws {
        let token = github.issueToken(for: octocat, clientID: clientID)
        #expect(providerError { try client.profile(accessToken: token, clientIDs: [clientID], clientSecret: "wrong") }?.isUnavailable == true)
        #expect(github.requestCount("GET", "/user") == 0)
    }

    @Test func gitHubDownRateLimitedOrSlowIsUnavailableAtEveryStep() throws {
        let token = github.issueToken(for: octocat, clientID: clientID)
        for path in ["/applications/\(clientID)/token", "/user", "/user/emails"] {
            for (status, rateLimited) in [(500, false), (503, false), (429, false), (403, true)] {
                github.fail(path, status: status, rateLimited: rateLimited)
                let error = providerError { try client.profile(accessToken: token, clientIDs: [clientID], clientSecret: secret) }
                #expect(error?.isUnavailable == true, "\(path) answering \(status)")
            }
            github.fail(path, status: nil)
        }
        github.setDown(true)
        #expect(providerError { try client.profile(accessToken: token, clientIDs: [clientID], clientSecret: secret) }?.isUnavailable == true)
        github.setDown(false)
        #expect(try client.profile(accessToken: token, clientIDs: [clientID], clientSecret: secret).subject == "583231")

        let stalling = try StallingServer()
        defer { stalling.stop() }
        let slow = GitHubClient(baseURL: stalling.url(), client: OutboundHTTPClient(timeoutSeconds: 1))
        #expect(providerError { try slow.profile(accessToken: token, clientIDs: [clientID], clientSecret: secret) }?.isUnavailable == true)
    }

    @Test func aTokenRevokedBetweenTheCallsIsInvalid() throws {
        let token = github.issueToken(for: octocat, clientID: clientID)
        github.fail("/user", status: 401)
        #expect(invalidTokenReason { try client.profile(accessToken: token, clientIDs: [clientID], clientSecret: secret) } == "GitHub /user answered HTTP 401")
        github.fail("/user", status: nil)
        github.fail("/user/emails", status: 401)
        #expect(invalidTokenReason { try client.profile(accessToken: token, clientIDs: [clientID], clientSecret: secret) } == "GitHub /user/emails answered HTTP 401")
    }

    @Test func unreadableOversizedOrInconsistentAnswersAreRefused() throws {
        let check: JSON = ["app": ["client_id": "c"], "user": ["id": 1]]
        let cases: [(name: String, check: JSON?, user: HTTPResponse, unavailable: Bool)] = [
            ("user not JSON", check, HTTPResponse(status: 200, body: Array("<html/>".utf8)), true),
            ("user without id", check, FakeHTTPServer.json(200, ["login": "x"]), true),
            ("user id a string", check, FakeHTTPServer.json(200, ["id": "1", "login": "x"]), true),
            ("another user than the check", check, FakeHTTPServer.json(200, ["id": 2, "login": "x"]), false),
            ("check names another client", ["app": ["client_id": "other"], "user": ["id": 1]], FakeHTTPServer.json(200, ["id": 1]), false),
            ("check not JSON", nil, FakeHTTPServer.json(200, ["id": 1]), true),
            ("user too large", check, FakeHTTPServer.json(200, ["id": 1, "name": .string(String(repeating: "n", count: 8192))]), true),
        ]
        for item in cases {
            let server = try FakeHTTPServer { request, _ in
                switch request.path {
                case "/user": item.user
                case "/user/emails": FakeHTTPServer.json(200, [])
                default: item.check.map { FakeHTTPServer.json(200, $0) } ?? HTTPResponse(status: 200, body: Array("{".utf8))
                }
            }
            defer { server.stop() }
            let reading = GitHubClient(baseURL: server.baseURL, client: OutboundHTTPClient(timeoutSeconds: 5, maxResponseBytes: 4096))
            let error = providerError { try reading.profile(accessToken: "gho_x", clientIDs: ["c"], clientSecret: "s") }
            #expect(error != nil, "\(item.name)")
            #expect(error?.isUnavailable == item.unavailable, "\(item.name): \(String(describing: error))")
        }
    }
}
