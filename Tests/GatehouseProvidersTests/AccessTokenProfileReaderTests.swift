import GatehouseCore
import GatehouseOutbound
import GatehouseProviders
import GatehouseTesting
import Synchronization
import Testing

/// The domain's view of the Naver and GitHub clients: identities and ``ProviderFailure``s.
@Suite struct AccessTokenProfileReaderTests {
    let naver: FakeNaver
    let github: FakeGitHub
    let reader: AccessTokenProfileReader
    let unavailable = UnavailableLog()

    init() throws {
        naver = try FakeNaver()
        github = try FakeGitHub()
        github.registerApp(clientID: "gh-client", clientSecret: "gh-secret")
        let client = OutboundHTTPClient(timeoutSeconds: 5)
        let log = unavailable
        reader = AccessTokenProfileReader(
            naver: NaverClient(baseURL: naver.baseURL, client: client), github: GitHubClient(baseURL: github.baseURL, client: client),
            onUnavailable: { kind, reason in log.record(kind, reason) })
    }

    @Test func aNaverMemberIsAnIdentityWithAnUnverifiedEmail() throws {
        let member = FakeNaverMember()
        let identity = try reader.profile(
            kind: .naver, accessToken: naver.issueToken(for: member, clientID: "nv-client"), clientIDs: ["nv-client"], clientSecret: nil)
        var expected = ExternalIdentity(
            subject: FakeNaver.memberID(member, clientID: "nv-client"), email: "ada@naver.com", emailVerified: false, audience: "nv-client")
        expected.displayName = "김에이다"
        #expect(identity == expected)
    }

    @Test func aGitHubUserIsAnIdentityWithTheirVerifiedEmail() throws {
        let identity = try reader.profile(
            kind: .github, accessToken: github.issueToken(for: FakeGitHubUser(), clientID: "gh-client"), clientIDs: ["gh-client"], clientSecret: "gh-secret")
        var expected = ExternalIdentity(subject: "583231", email: "octocat@example.com", emailVerified: true, audience: "gh-client")
        expected.displayName = "The Octocat"
        #expect(identity == expected)
    }

    @Test func aRefusedTokenIsAnInvalidCredentialWithoutDetail() throws {
        let theirs = github.issueToken(for: FakeGitHubUser(), clientID: "someone-else")
        let refused = failing { () throws(ProviderFailure) in try reader.profile(kind: .github, accessToken: theirs, clientIDs: ["gh-client"], clientSecret: "gh-secret") }
        #expect(refused == .invalidToken(reason: "the token belongs to no client of this app", clientDetail: nil))
        #expect(refused?.clientError.status == 401)
        #expect(unavailable.entries.isEmpty)
    }

    @Test func anUnreachableProviderOrAMissingSecretIsUnavailableAndTold() throws {
        naver.setDown(true)
        let down = failing { () throws(ProviderFailure) in try reader.profile(kind: .naver, accessToken: "AAAAtoken", clientIDs: ["nv-client"], clientSecret: nil) }
        #expect(down == .unreachable(reason: "Naver /v1/nid/me answered HTTP 503"))
        #expect(down?.clientError.status == 503)
        let token = github.issueToken(for: FakeGitHubUser(), clientID: "gh-client")
        let noSecret = failing { () throws(ProviderFailure) in try reader.profile(kind: .github, accessToken: token, clientIDs: ["gh-client"], clientSecret: nil) }
        #expect(noSecret == .unreachable(reason: "no GitHub client secret to check the token's app with"))
        #expect(unavailable.entries.map(\.kind) == [.naver, .github])
        #expect(!unavailable.entries.contains { $0.reason.contains(token) })
    }

    private func failing<T>(_ body: () throws(ProviderFailure) -> T) -> ProviderFailure? {
        do {
            _ = try body()
            return nil
        } catch {
            return error
        }
    }
}

final class UnavailableLog: Sendable {
    private let lines = Mutex<[(kind: AccessTokenProviderKind, reason: String)]>([])
    func record(_ kind: AccessTokenProviderKind, _ reason: String) { lines.withLock { $0.append((kind, reason)) } }
    var entries: [(kind: AccessTokenProviderKind, reason: String)] { lines.withLock { $0 } }
}
