import GatehouseCore
import GatehouseCrypto
import GatehouseOutbound
import GatehouseProviders
import GatehouseTesting
import Testing

@Suite struct AppleClientTests {
    let f: ProviderFixture
    let apple: AppleClient
    let credentials: AppleClient.Credentials
    let bundleID = "com.example.app"

    init() throws {
        f = try ProviderFixture()
        apple = AppleClient(baseURL: f.apple.baseURL + "/", client: f.client, clock: f.clock)
        credentials = try f.apple.makeCredentials(teamID: "TEAM123456", keyID: "KEY1234567")
    }

    @Test func aGoodCodeIsExchangedForAVerifiableIdentityToken() throws {
        let nonceHash = Digest.hex(Digest.sha256("raw".utf8))
        let code = f.apple.issueCode(for: FakeAppleUser(sub: "001.ada.1", email: "ada@example.com", nonce: nonceHash))
        let (idToken, refreshToken) = try apple.exchange(code: code, clientID: bundleID, redirectURI: nil, credentials: credentials)
        let identity = try f.verifier.verifyApple(idToken, audiences: [bundleID], expectedNonceHash: nonceHash)
        #expect(identity.subject == "001.ada.1")
        #expect(identity.audience == bundleID)
        #expect(refreshToken != nil && refreshToken == f.apple.issuedRefreshTokens.first)
        let call = try #require(f.apple.tokenCalls.first)
        #expect(call["grant_type"] == "authorization_code")
        #expect(call["code"] == code)
        #expect(call["client_id"] == bundleID)
        #expect(call["redirect_uri"] == nil)
        #expect(call["client_secret"]?.isEmpty == false)
        #expect(f.fakeErrors.isEmpty)
    }

    @Test func aUsedCodeIsRejected() throws {
        let code = f.apple.issueCode(for: FakeAppleUser())
        _ = try apple.exchange(code: code, clientID: bundleID, redirectURI: nil, credentials: credentials)
        let error = providerError { try apple.exchange(code: code, clientID: bundleID, redirectURI: nil, credentials: credentials) }
        #expect(error == .rejected("Apple /auth/token answered invalid_grant"))
    }

    @Test func anUnknownOrMisdirectedCodeIsRejected() throws {
        #expect(providerError { try apple.exchange(code: "made-up", clientID: bundleID, redirectURI: nil, credentials: credentials) }?.isRejected == true)
        let web = f.apple.issueCode(for: FakeAppleUser(), clientID: "com.example.web", redirectURI: "https://id.example.com/cb")
        let wrongURI = providerError {
            try apple.exchange(code: web, clientID: "com.example.web", redirectURI: "https://evil.example.com/cb", credentials: credentials)
        }
        #expect(wrongURI?.isRejected == true)
        let again = f.apple.issueCode(for: FakeAppleUser(), clientID: "com.example.web", redirectURI: "https://id.example.com/cb")
        let (idToken, _) = try apple.exchange(
            code: again, clientID: "com.example.web", redirectURI: "https://id.example.com/cb", credentials: credentials)
        #expect(try f.verifier.verifyApple(idToken, audiences: ["com.example.web"], expectedNonceHash: nil).audience == "com.example.web")
        #expect(f.apple.tokenCalls.last?["redirect_uri"] == "https://id.example.com/cb")
    }

    @Test func appleDownIsUnavailable() {
        let code = f.apple.issueCode(for: FakeAppleUser())
        f.apple.setDown(true)
        #expect(providerError { try apple.exchange(code: code, clientID: bundleID, redirectURI: nil, credentials: credentials) }?.isUnavailable == true)
        f.apple.setDown(false)
        f.apple.failNextRequests(1, status: 500)
        #expect(providerError { try apple.exchange(code: code, clientID: bundleID, redirectURI: nil, credentials: credentials) }?.isUnavailable == true)
        let unreachable = AppleClient(baseURL: "http://127.0.0.1:1", client: f.client, clock: f.clock)
        #expect(providerError { try unreachable.exchange(code: code, clientID: bundleID, redirectURI: nil, credentials: credentials) }?.isUnavailable == true)
    }

    @Test func theClientSecretIsAnES256JWTAppleAccepts() throws {
        let secret = try apple.clientSecret(clientID: bundleID, credentials: credentials)
        let parsed = try JWT.parse(secret)
        #expect(parsed.header.alg == "ES256")
        #expect(parsed.header.kid == "KEY1234567")
        let key = try SigningKey(pem: credentials.privateKeyPEM, algorithm: .es256)
        #expect(JWT.verify(parsed, with: key.verificationKey))
        let claims = try JSON.parse(parsed.payload)
        #expect(claims == [
            "iss": "TEAM123456", "sub": .string(bundleID), "aud": "https://appleid.apple.com",
            "iat": .int(f.now), "exp": .int(f.now + 300),
        ])
    }

    @Test func aSecretFromTheWrongKeyOrTeamIsRefusedByApple() throws {
        let impostor = try SigningKey.generate(.es256)
        let wrongKey = AppleClient.Credentials(teamID: "TEAM123456", keyID: "KEY1234567", privateKeyPEM: impostor.pkcs8PEM())
        let code = f.apple.issueCode(for: FakeAppleUser())
        let error = providerError { try apple.exchange(code: code, clientID: bundleID, redirectURI: nil, credentials: wrongKey) }
        #expect(error == .unavailable("Apple /auth/token answered HTTP 400 invalid_client"))
        var wrongTeam = credentials
        wrongTeam.teamID = "OTHERTEAM0"
        #expect(providerError { try apple.exchange(code: code, clientID: bundleID, redirectURI: nil, credentials: wrongTeam) }?.isUnavailable == true)
        #expect(f.fakeErrors.isEmpty)
    }

    @Test func anUnreadablePrivateKeyIsUnavailable() {
        var broken = credentials
        broken.privateKeyPEM = "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n"
        #expect(providerError { try apple.clientSecret(clientID: bundleID, credentials: broken) }?.isUnavailable == true)
    }

    @Test func theFakeFailsLoudlyForAnUnregisteredKey() throws {
        let stranger = try SigningKey.generate(.es256)
        let unregistered = AppleClient.Credentials(teamID: "TEAM123456", keyID: "NEVERREGD1", privateKeyPEM: stranger.pkcs8PEM())
        let error = providerError { try apple.exchange(code: "x", clientID: bundleID, redirectURI: nil, credentials: unregistered) }
        #expect(error?.isUnavailable == true)
        #expect(f.apple.errors.count == 1)
    }

    @Test func revocationIsRecorded() throws {
        let code = f.apple.issueCode(for: FakeAppleUser())
        let (_, refreshToken) = try apple.exchange(code: code, clientID: bundleID, redirectURI: nil, credentials: credentials)
        try apple.revoke(refreshToken: try #require(refreshToken), clientID: bundleID, credentials: credentials)
        let call = try #require(f.apple.revokeCalls.first)
        #expect(call["token"] == refreshToken)
        #expect(call["token_type_hint"] == "refresh_token")
        #expect(call["client_id"] == bundleID)
        #expect(call["client_secret"]?.isEmpty == false)
    }

    @Test func revocationFailuresAreClassified() {
        #expect(providerError { try apple.revoke(refreshToken: "", clientID: bundleID, credentials: credentials) }?.isRejected == true)
        f.apple.failNextRequests(1)
        #expect(providerError { try apple.revoke(refreshToken: "r1", clientID: bundleID, credentials: credentials) }?.isUnavailable == true)
        f.apple.setDown(true)
        #expect(providerError { try apple.revoke(refreshToken: "r1", clientID: bundleID, credentials: credentials) }?.isUnavailable == true)
    }

    @Test func theAuthorizeURLHasTheExactFormat() {
        let real = AppleClient(baseURL: "https://appleid.apple.com", client: f.client, clock: f.clock)
        let url = real.authorizeURL(
            servicesID: "com.example.web", redirectURI: "https://id.example.com/v1/auth/oauth/apple/callback",
            state: "st&=+ x/ü", nonce: "0f1e")
        #expect(url == "https://appleid.apple.com/auth/authorize?client_id=com.example.web"
            + "&redirect_uri=https%3A%2F%2Fid.example.com%2Fv1%2Fauth%2Foauth%2Fapple%2Fcallback"
            + "&response_type=code%20id_token&scope=name%20email&response_mode=form_post"
            + "&state=st%26%3D%2B%20x%2F%C3%BC&nonce=0f1e")
    }

    @Test func theAuthorizeURLDecodesToTheSameValuesAtApple() throws {
        let url = apple.authorizeURL(servicesID: "com.example.web", redirectURI: "https://id.example.com/cb?x=1&y=2", state: "a+b c", nonce: "n&n")
        #expect(try f.client.get(url).status == 200)
        #expect(f.apple.authorizeCalls == [[
            "client_id": "com.example.web", "redirect_uri": "https://id.example.com/cb?x=1&y=2", "response_type": "code id_token",
            "scope": "name email", "response_mode": "form_post", "state": "a+b c", "nonce": "n&n",
        ]])
    }
}
