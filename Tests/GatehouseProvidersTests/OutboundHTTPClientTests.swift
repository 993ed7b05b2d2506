import Foundation
import GatehouseCore
import GatehouseHTTP
import GatehouseOutbound
import GatehouseProviders
import GatehouseTesting
import Testing

@Suite struct OutboundHTTPClientTests {
    @Test func aServerThatNeverAnswersTimesOut() throws {
        let listener = try SilentListener()
        let client = OutboundHTTPClient(timeoutSeconds: 1)
        let started = Date()
        let error = providerError { try client.get("http://127.0.0.1:\(listener.port)/auth/keys") }
        let elapsed = Date().timeIntervalSince(started)
        #expect(error?.isUnavailable == true)
        #expect(elapsed >= 0.9 && elapsed < 5)
    }

    /// A provider that never completes the handshake is given up after 3 s, not the call's 10.
    @Test func aConnectionThatIsNeverEstablishedFailsAfterTheConnectTimeout() throws {
        let listener = try SilentListener(backlog: 0)
        listener.fillBacklog()
        let client = OutboundHTTPClient(timeoutSeconds: 10)
        let started = Date()
        let error = providerError { try client.get("http://127.0.0.1:\(listener.port)/auth/keys") }
        let elapsed = Date().timeIntervalSince(started)
        #expect(error?.isUnavailable == true)
        #expect(elapsed >= 2.5 && elapsed < 4.5, "\(elapsed) s")
    }

    @Test func aRefusedConnectionIsUnavailable() throws {
        let server = try FakeHTTPServer { _, _ in HTTPResponse(status: 200) }
        let url = server.baseURL + "/"
        server.stop()
        let error = providerError { try OutboundHTTPClient().get(url) }
        #expect(error?.isUnavailable == true)
    }

    @Test func aBodyOverTheCapIsRefused() throws {
        let server = try FakeHTTPServer { request, _ in
            switch request.path {
            case "/exact": HTTPResponse(status: 200, body: Array(repeating: 65, count: 1000))
            case "/over": HTTPResponse(status: 200, body: Array(repeating: 65, count: 1001))
            case "/huge": HTTPResponse(status: 200, body: Array(repeating: 65, count: 2 << 20))
            default: nil
            }
        }
        defer { server.stop() }
        let small = OutboundHTTPClient(maxResponseBytes: 1000)
        #expect(try small.get(server.baseURL + "/exact").body.count == 1000)
        #expect(providerError { try small.get(server.baseURL + "/over") }?.isUnavailable == true)
        let standard = OutboundHTTPClient()
        #expect(providerError { try standard.get(server.baseURL + "/huge") }?.isUnavailable == true)
        #expect(server.errors.isEmpty)
    }

    @Test func redirectsAreNotFollowed() throws {
        let server = try FakeHTTPServer { request, _ in
            switch request.path {
            case "/moved": HTTPResponse(status: 302, headers: ["Location": "/target"])
            case "/target": HTTPResponse(status: 200, body: Array("secret".utf8))
            default: nil
            }
        }
        defer { server.stop() }
        let response = try OutboundHTTPClient().get(server.baseURL + "/moved")
        #expect(response.status == 302)
        #expect(response.header("Location") == "/target")
        #expect(response.body.isEmpty)
        #expect(server.requestCount("GET", "/target") == 0)
    }

    @Test func onlyHTTPAndHTTPSURLsAreAllowed() {
        let client = OutboundHTTPClient()
        for url in ["file:///etc/passwd", "ftp://127.0.0.1/", "gopher://127.0.0.1:70/", "127.0.0.1/keys", "http://exa mple.com/"] {
            #expect(providerError { try client.get(url) }?.isUnavailable == true, "\(url)")
        }
    }

    @Test func statusHeadersAndBodyAreReturnedForAnyStatus() throws {
        let server = try FakeHTTPServer { request, _ in
            request.path == "/broken" ? FakeHTTPServer.json(502, ["error": "bad_gateway"], headers: [("X-Trace", "abc")]) : nil
        }
        defer { server.stop() }
        let response = try OutboundHTTPClient().get(server.baseURL + "/broken", headers: [("Accept", "application/json")])
        #expect(response.status == 502)
        #expect(response.header("x-trace") == "abc")
        #expect(response.headers.contains { $0.name == "content-type" && $0.value == "application/json" })
        #expect(try JSON.parse(response.body)["error"] == "bad_gateway")
    }

    @Test func formValuesArePercentEncodedStrictly() throws {
        let server = try FakeHTTPServer { request, _ in
            guard request.path == "/form", request.headers["Content-Type"] == "application/x-www-form-urlencoded",
                let fields = FakeHTTPServer.formFields(request.body)
            else { return nil }
            return FakeHTTPServer.json(200, .object(fields.mapValues(JSON.string)))
        }
        defer { server.stop() }
        let tricky = "a&b=c+d e/f?g#h%20ü"
        let response = try OutboundHTTPClient().postForm(
            server.baseURL + "/form", fields: [("client_secret", tricky), ("code", "plain"), ("empty", "")])
        let echoed = try JSON.parse(response.body)
        #expect(echoed["client_secret"]?.stringValue == tricky)
        #expect(echoed["code"] == "plain")
        #expect(echoed["empty"] == "")
        #expect(server.errors.isEmpty)
    }

    @Test func theFakeServerFailsLoudlyOnRequestsItWasNotSetUpFor() throws {
        let server = try FakeHTTPServer { _, _ in nil }
        defer { server.stop() }
        let response = try OutboundHTTPClient().get(server.baseURL + "/nobody-expects-this")
        #expect(response.status == 500)
        #expect(server.errors == ["unexpected request: GET /nobody-expects-this"])
    }
}
