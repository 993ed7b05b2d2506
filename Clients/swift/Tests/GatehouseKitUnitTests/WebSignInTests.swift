import Foundation
import Synchronization
import Testing

@testable import GatehouseKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The web flow's client side with no server: the authorize URL per provider, the redirect's
/// checks before any request, and the exchange it sends. The flows against the real server (Apple
/// and a provider of the app's own) are in GatehouseKitTests at the repository's root.
@Suite("The web flow", .serialized)
struct WebSignInTests {
    final class Recorder: URLProtocol {
        static let seen = Mutex<[(method: String, path: String, body: Data)]>([])

        override class func canInit(with request: URLRequest) -> Bool { true }
        override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

        override func startLoading() {
            var body = request.httpBody ?? Data()
            if body.isEmpty, let stream = request.httpBodyStream {
                stream.open()
                var buffer = [UInt8](repeating: 0, count: 4096)
                while stream.hasBytesAvailable {
                    let count = stream.read(&buffer, maxLength: buffer.count)
                    if count <= 0 { break }
                    body.append(contentsOf: buffer[0..<count])
                }
                stream.close()
            }
            Self.seen.withLock { $0.append((request.httpMethod ?? "GET", request.url?.path ?? "", body)) }
            let exchange = request.url?.path == "/v1/auth/exchange"
            let response = HTTPURLResponse(
                url: request.url!, statusCode: exchange ? 201 : 404, httpVersion: "HTTP/1.1", headerFields: ["Content-Type": "application/json"])!
            client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
            client?.urlProtocol(self, didLoad: Data((exchange ? WebSignInTests.session : #"{"code":"request/not-found","status":404}"#).utf8))
            client?.urlProtocolDidFinishLoading(self)
        }

        override func stopLoading() {}
    }

    static let user = #"{"id":"usr_1","email":"ada@example.com","email_verified":true,"first_name":null,"last_name":null,"photo_url":null,"locale":null,"created_at":"2026-12-05T10:00:00Z","last_sign_in_at":null,"identities":["github"]}"#
    static let session = #"{"data":{"access_token":"eyJ.access.sig","token_type":"Bearer","expires_in":900,"refresh_token":"rt_1","is_new_user":true,"user":\#(user)}}"#
    static let redirect = "com.example.app:/auth/callback"

    func client(baseURL: String = "https://auth.example.test") -> GatehouseClient {
        Recorder.seen.withLock { $0 = [] }
        let session = URLSessionConfiguration.ephemeral
        session.protocolClasses = [Recorder.self]
        var configuration = GatehouseClient.Configuration(baseURL: URL(string: baseURL)!, appKey: "pk_test", sessionStore: MemorySessionStore())
        configuration.urlSession = URLSession(configuration: session)
        return GatehouseClient(configuration: configuration)
    }

    func query(_ url: URL) -> [String: String] {
        Dictionary((URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { a, _ in a })
    }

    func callback(_ items: [String: String], to base: String = WebSignInTests.redirect) -> URL {
        var components = URLComponents(string: base)!
        components.queryItems = items.sorted { $0.key < $1.key }.map { URLQueryItem(name: $0.key, value: $0.value) }
        return components.url!
    }

    @Test(arguments: [
        ("apple", "/v1/auth/oauth/apple/authorize"),
        ("github", "/v1/auth/oidc/github/authorize"),
        ("corp-sso", "/v1/auth/oidc/corp-sso/authorize"),
        ("a/b?c#d e", "/v1/auth/oidc/a%2Fb%3Fc%23d%20e/authorize"),
    ])
    func theAuthorizeURLNamesTheProvidersPath(provider: String, path: String) throws {
        let flow = client().startWebFlow(provider: provider, redirectURI: Self.redirect)
        #expect(flow.provider == provider)
        let components = try #require(URLComponents(url: flow.authorizeURL, resolvingAgainstBaseURL: false))
        #expect(components.scheme == "https" && components.host == "auth.example.test")
        #expect(components.percentEncodedPath == path)
        let items = query(flow.authorizeURL)
        #expect(Set(items.keys) == ["app_key", "redirect_uri", "state", "code_challenge", "code_challenge_method"])
        #expect(items["app_key"] == "pk_test" && items["redirect_uri"] == Self.redirect && items["state"] == flow.state)
        #expect(items["code_challenge_method"] == "S256" && items["code_challenge"] == PKCE(verifier: flow.pkce.verifier).challenge)
        #expect(!flow.authorizeURL.absoluteString.contains(flow.pkce.verifier), "only the challenge leaves the device")
        #expect(flow.state.count == 22 && flow.pkce.verifier.count == 43)
        #expect(Recorder.seen.withLock { $0.isEmpty }, "starting sends nothing")
    }

    @Test
    func aBaseURLWithAPathKeepsIt() throws {
        let flow = client(baseURL: "https://example.test/gatehouse/").startWebFlow(provider: "line", redirectURI: Self.redirect)
        #expect(URLComponents(url: flow.authorizeURL, resolvingAgainstBaseURL: false)?.percentEncodedPath == "/gatehouse/v1/auth/oidc/line/authorize")
    }

    @Test
    func eachFlowHasItsOwnStateAndVerifier() {
        let client = client()
        let flows = (0..<50).map { _ in client.startWebFlow(provider: "github", redirectURI: Self.redirect) }
        #expect(Set(flows.map(\.state)).count == 50 && Set(flows.map(\.pkce.verifier)).count == 50)
        #expect(flows[0] != flows[1])
    }

    @Test
    func anAppleFlowIsTheGenericOneWithApple() async throws {
        let client = client()
        let flow = client.startWebFlow(provider: "apple", redirectURI: Self.redirect)
        #expect(flow.provider == "apple")
        #expect(URLComponents(url: flow.authorizeURL, resolvingAgainstBaseURL: false)?.path == "/v1/auth/oauth/apple/authorize")
        _ = try await client.finishWebFlow(flow, callbackURL: callback(["login_code": "lc_a", "state": flow.state]))
        let other = client.startWebFlow(provider: "apple", redirectURI: Self.redirect)
        _ = try await client.finishWebFlow(other, callbackURL: callback(["login_code": "lc_b", "state": other.state]))
        let codes = try Recorder.seen.withLock { $0 }.map { try JSONSerialization.jsonObject(with: $0.body) as? [String: String] }
        #expect(codes == [["login_code": "lc_a", "code_verifier": flow.pkce.verifier], ["login_code": "lc_b", "code_verifier": other.pkce.verifier]])
    }

    @Test
    func aWebFlowReturnCarriesAStateWithALoginCodeOrAnError() {
        let client = client()
        #expect(client.isWebFlowReturn(callback(["login_code": "lc_1", "state": "s"])))
        #expect(client.isWebFlowReturn(callback(["error": "access_denied", "state": "s"])))
        #expect(!client.isWebFlowReturn(callback(["login_code": "lc_1"])), "no state")
        #expect(!client.isWebFlowReturn(callback(["state": "s"])), "neither a code nor an error")
        #expect(!client.isWebFlowReturn(URL(string: "com.example.app:/settings")!))
    }

    @Test
    func aRedirectThatIsNotThisFlowsIsRefusedBeforeAnyRequest() async throws {
        let client = client()
        let flow = client.startWebFlow(provider: "kakao", redirectURI: Self.redirect)
        let refused: [(URL, String)] = [
            (callback(["login_code": "lc_1", "state": "forged"]), "state_mismatch"),
            (callback(["login_code": "lc_1"]), "state_mismatch"),
            (callback(["login_code": "lc_1", "state": flow.state], to: "com.example.app:/elsewhere"), "state_mismatch"),
            (callback(["login_code": "lc_1", "state": flow.state], to: "com.evil.app:/auth/callback"), "state_mismatch"),
            (callback(["state": flow.state]), "missing_login_code"),
            (callback(["error": "access_denied", "state": flow.state]), "access_denied"),
            (callback(["error": "server_error", "state": flow.state]), "server_error"),
            (callback(["error": "user_disabled", "state": flow.state]), "user_disabled"),
            // A forged error is not believed either: its state is checked first.
            (callback(["error": "access_denied", "state": "forged"]), "state_mismatch"),
        ]
        for (url, expected) in refused {
            let error = await #expect(throws: GatehouseError.self) { try await client.finishWebFlow(flow, callbackURL: url) }
            guard case .webSignInFailed(let reason)? = error else {
                Issue.record("\(url): expected webSignInFailed, got \(String(describing: error))")
                continue
            }
            #expect(reason == expected, "\(url)")
        }
        #expect(Recorder.seen.withLock { $0.isEmpty })
        #expect(client.currentUser == nil)
    }

    @Test
    func theRedirectsLoginCodeAndTheFlowsVerifierAreExchangedForASession() async throws {
        let client = client()
        let flow = client.startWebFlow(provider: "github", redirectURI: Self.redirect)
        // The redirect URI's scheme and host compare without case, as URLs do.
        let result = try await client.finishWebFlow(flow, callbackURL: callback(["login_code": "lc_1", "state": flow.state], to: "COM.Example.App:/auth/callback"))
        #expect(result.isNewUser && result.user.id == "usr_1")
        #expect(try await client.accessToken() == "eyJ.access.sig", "the session is kept as a sign-in keeps it")
        let sent = try #require(Recorder.seen.withLock { $0 }.last)
        #expect(sent.method == "POST" && sent.path == "/v1/auth/exchange")
        let body = try #require(try JSONSerialization.jsonObject(with: sent.body) as? [String: String])
        #expect(body == ["login_code": "lc_1", "code_verifier": flow.pkce.verifier])
    }

    @Test
    func aFlowPrintsNeitherItsStateNorItsVerifier() {
        let flow = client().startWebFlow(provider: "naver", redirectURI: Self.redirect)
        let printed = "\(flow)"
        #expect(printed.contains("naver") && printed.contains(Self.redirect))
        #expect(!printed.contains(flow.state) && !printed.contains(flow.pkce.verifier) && !printed.contains(flow.pkce.challenge))
    }
}
