import GatehouseCore
import GatehouseHTTP
import GatehouseOutbound
import GatehouseProviders
import GatehouseTesting
import Testing

@Suite struct NaverClientTests {
    let naver: FakeNaver
    let client: NaverClient
    let clientID = "naverClientOfTheApp"
    let ada = FakeNaverMember(key: "ada", email: "ada@naver.com", name: "김에이다", nickname: "ada")

    init() throws {
        naver = try FakeNaver()
        client = NaverClient(baseURL: naver.baseURL + "/", client: OutboundHTTPClient(timeoutSeconds: 5))
    }

    @Test func aTokenNamesTheMemberByTheirIDInThisApplication() throws {
        let token = naver.issueToken(for: ada, clientID: clientID)
        let identity = try client.profile(accessToken: token, audience: clientID)
        #expect(identity.subject == FakeNaver.memberID(ada, clientID: clientID))
        #expect(identity.audience == clientID)
        #expect(identity.displayName == "김에이다")
        #expect(naver.profileCalls == 1)
        #expect(naver.errors.isEmpty)
    }

    /// Naver lets a member set any contact address and says nothing of its verification.
    @Test func theEmailIsGivenButNeverVouchedFor() throws {
        let identity = try client.profile(accessToken: naver.issueToken(for: ada, clientID: clientID), audience: clientID)
        #expect(identity.email == "ada@naver.com")
        #expect(identity.emailVerified == false)
    }

    @Test func theNicknameNamesAMemberWithoutAName() throws {
        let member = FakeNaverMember(key: "bo", email: nil, name: nil, nickname: "bo-nick")
        let identity = try client.profile(accessToken: naver.issueToken(for: member, clientID: clientID), audience: clientID)
        #expect(identity.displayName == "bo-nick")
        #expect(identity.email == nil)
    }

    /// Naver cannot say which application a token belongs to, but its ids are per application:
    /// a token another application obtained from the same member names another id.
    @Test func aTokenOfAnotherApplicationNamesAnotherID() throws {
        let ours = try client.profile(accessToken: naver.issueToken(for: ada, clientID: clientID), audience: clientID)
        let theirs = try client.profile(accessToken: naver.issueToken(for: ada, clientID: "anotherApplication"), audience: clientID)
        #expect(ours.subject != theirs.subject)
        #expect(theirs.subject == FakeNaver.memberID(ada, clientID: "anotherApplication"))
    }

    @Test func anUnknownOrRevokedTokenIsInvalid() throws {
        let token = naver.issueToken(for: ada, clientID: clientID)
        naver.revoke(token)
        #expect(invalidTokenReason { try client.profile(accessToken: token, audience: clientID) } == "Naver /v1/nid/me answered HTTP 401")
        #expect(invalidTokenReason { try client.profile(accessToken: "AAAAmadeup", audience: clientID) } != nil)
    }

    @Test func aTokenThatCannotBeOneIsRefusedWithoutAsking() throws {
        for token in ["", "two words", "line\r\nX-Injected: 1", String(repeating: "A", count: 4097), "토큰"] {
            #expect(invalidTokenReason { try client.profile(accessToken: token, audience: clientID) } == "malformed access token")
        }
        #expect(naver.profileCalls == 0)
    }

    @Test func aResultCodeOtherThanSuccessOrAProfileWithoutAUsableIDIsInvalid() throws {
        let bodies: [JSON] = [
            ["resultcode": "024", "message": "Authentication failed"],
            ["resultcode": "00", "message": "success"],
            ["resultcode": "00", "message": "success", "response": ["email": "a@naver.com"]],
            ["resultcode": "00", "message": "success", "response": ["id": ""]],
            ["resultcode": "00", "message": "success", "response": ["id": 12345]],
            ["resultcode": "00", "message": "success", "response": ["id": .string(String(repeating: "x", count: 65))]],
            ["resultcode": "00", "message": "success", "response": ["id": "has space"]],
        ]
        for body in bodies {
            let server = try FakeHTTPServer { _, _ in FakeHTTPServer.json(200, body) }
            defer { server.stop() }
            let reading = NaverClient(baseURL: server.baseURL, client: OutboundHTTPClient(timeoutSeconds: 5))
            #expect(invalidTokenReason { try reading.profile(accessToken: "AAAAtoken", audience: clientID) } != nil, "\(body)")
        }
    }

    @Test func anUnreadableOrOversizedAnswerIsUnavailable() throws {
        let garbage = try FakeHTTPServer { _, _ in HTTPResponse(status: 200, body: Array("<html>maintenance</html>".utf8)) }
        defer { garbage.stop() }
        let unreadable = NaverClient(baseURL: garbage.baseURL, client: OutboundHTTPClient(timeoutSeconds: 5))
        #expect(providerError { try unreadable.profile(accessToken: "AAAAtoken", audience: clientID) }?.isUnavailable == true)

        let huge = try FakeHTTPServer { _, _ in
            FakeHTTPServer.json(200, ["resultcode": "00", "response": ["id": "x", "name": .string(String(repeating: "a", count: 8192))]])
        }
        defer { huge.stop() }
        let capped = NaverClient(baseURL: huge.baseURL, client: OutboundHTTPClient(timeoutSeconds: 5, maxResponseBytes: 4096))
        #expect(providerError { try capped.profile(accessToken: "AAAAtoken", audience: clientID) }?.isUnavailable == true)
    }

    @Test func naverDownSlowOrFailingIsUnavailable() throws {
        let token = naver.issueToken(for: ada, clientID: clientID)
        for status in [500, 502, 503, 429] {
            naver.failNextRequests(1, status: status)
            #expect(providerError { try client.profile(accessToken: token, audience: clientID) }?.isUnavailable == true, "\(status)")
        }
        naver.setDown(true)
        #expect(providerError { try client.profile(accessToken: token, audience: clientID) }?.isUnavailable == true)
        naver.setDown(false)
        #expect(try client.profile(accessToken: token, audience: clientID).subject == FakeNaver.memberID(ada, clientID: clientID))

        let stalling = try StallingServer()
        defer { stalling.stop() }
        let slow = NaverClient(baseURL: stalling.url(), client: OutboundHTTPClient(timeoutSeconds: 1))
        #expect(providerError { try slow.profile(accessToken: token, audience: clientID) }?.isUnavailable == true)
    }
}
