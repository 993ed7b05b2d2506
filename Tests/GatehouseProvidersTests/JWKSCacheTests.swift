import Foundation
import GatehouseCore
import GatehouseHTTP
import GatehouseOutbound
@testable import GatehouseProviders
import GatehouseTesting
import Synchronization
import Testing

@Suite struct JWKSCacheTests {
    @Test func keysAreKeptForTheirMaxAge() throws {
        let f = try ProviderFixture(appleKeysMaxAge: 600)
        let kid = f.apple.keys.currentKid
        #expect(try f.cache.key(url: f.apple.keysURL, kid: kid) != nil)
        #expect(try f.cache.key(url: f.apple.keysURL, kid: kid) != nil)
        #expect(f.apple.keysFetchCount == 1)
        f.clock.advance(seconds: 599)
        _ = try f.cache.key(url: f.apple.keysURL, kid: kid)
        #expect(f.apple.keysFetchCount == 1)
        f.clock.advance(seconds: 1)
        _ = try f.cache.key(url: f.apple.keysURL, kid: kid)
        #expect(f.apple.keysFetchCount == 2)
    }

    @Test func withoutMaxAgeKeysAreKeptAnHour() throws {
        let f = try ProviderFixture(appleKeysMaxAge: nil)
        let kid = f.apple.keys.currentKid
        _ = try f.cache.key(url: f.apple.keysURL, kid: kid)
        f.clock.advance(seconds: 3599)
        _ = try f.cache.key(url: f.apple.keysURL, kid: kid)
        #expect(f.apple.keysFetchCount == 1)
        f.clock.advance(seconds: 1)
        _ = try f.cache.key(url: f.apple.keysURL, kid: kid)
        #expect(f.apple.keysFetchCount == 2)
    }

    @Test func maxAgeIsCappedAtADay() throws {
        let f = try ProviderFixture(appleKeysMaxAge: 10_000_000)
        let kid = f.apple.keys.currentKid
        _ = try f.cache.key(url: f.apple.keysURL, kid: kid)
        f.clock.advance(seconds: 86_399)
        _ = try f.cache.key(url: f.apple.keysURL, kid: kid)
        #expect(f.apple.keysFetchCount == 1)
        f.clock.advance(seconds: 1)
        _ = try f.cache.key(url: f.apple.keysURL, kid: kid)
        #expect(f.apple.keysFetchCount == 2)
    }

    @Test func cacheControlParsing() {
        #expect(JWKSCache.maxAge("public, max-age=19826, must-revalidate, no-transform") == 19826)
        #expect(JWKSCache.maxAge("MAX-AGE = 60") == 60)
        #expect(JWKSCache.maxAge(nil) == 3600)
        #expect(JWKSCache.maxAge("public") == 3600)
        #expect(JWKSCache.maxAge("max-age=abc") == 3600)
        #expect(JWKSCache.maxAge("max-age=99999999999999999999") == 86_400)
        #expect(JWKSCache.maxAge("no-store") == 0)
    }

    @Test func anUnknownKidRefetchesAtMostOncePer30Seconds() throws {
        let f = try ProviderFixture()
        let url = f.apple.keysURL
        #expect(try f.cache.key(url: url, kid: "made-up-1") == nil)  // the first fetch
        #expect(f.apple.keysFetchCount == 1)
        for i in 0..<50 { #expect(try f.cache.key(url: url, kid: "made-up-\(i)") == nil) }
        #expect(f.apple.keysFetchCount == 1)
        f.clock.advance(seconds: 29)
        #expect(try f.cache.key(url: url, kid: "made-up-x") == nil)
        #expect(f.apple.keysFetchCount == 1)
        f.clock.advance(seconds: 1)
        for i in 0..<50 { #expect(try f.cache.key(url: url, kid: "made-up-y\(i)") == nil) }
        #expect(f.apple.keysFetchCount == 2)
    }

    @Test func aRotatedKeyIsFoundByTheRefetch() throws {
        let f = try ProviderFixture()
        let url = f.apple.keysURL
        _ = try f.cache.key(url: url, kid: f.apple.keys.currentKid)
        let newKid = try f.apple.rotateKeys()
        f.clock.advance(seconds: 30)
        #expect(try f.cache.key(url: url, kid: newKid) != nil)
        #expect(f.apple.keysFetchCount == 2)
    }

    @Test func aFloodOfUnknownKidsFromManyThreadsFetchesOnce() throws {
        let f = try ProviderFixture()
        let cache = f.cache, url = f.apple.keysURL
        DispatchQueue.concurrentPerform(iterations: 64) { i in
            let outcome = Result { try cache.key(url: url, kid: "made-up-\(i)") }
            #expect((try? outcome.get().map { _ in "found" } ?? "absent") == "absent")
        }
        #expect(f.apple.keysFetchCount == 1)
    }

    @Test func lastGoodKeysAreServedWhileTheServerIsDown() throws {
        let f = try ProviderFixture(appleKeysMaxAge: 600)
        let url = f.apple.keysURL, kid = f.apple.keys.currentKid
        _ = try f.cache.key(url: url, kid: kid)
        f.apple.setDown(true)
        f.clock.advance(seconds: 601)
        #expect(try f.cache.key(url: url, kid: kid) != nil)  // refresh fails, stale key served
        #expect(f.apple.keysFetchCount == 2)
        for _ in 0..<20 { #expect(try f.cache.key(url: url, kid: kid) != nil) }
        #expect(f.apple.keysFetchCount == 2)  // a failed refresh is retried no sooner than 30 s later
        f.clock.advance(seconds: 30)
        #expect(try f.cache.key(url: url, kid: kid) != nil)
        #expect(f.apple.keysFetchCount == 3)
        f.apple.setDown(false)
        f.clock.advance(seconds: 30)
        #expect(try f.cache.key(url: url, kid: kid) != nil)
        #expect(f.apple.keysFetchCount == 4)
        _ = try f.cache.key(url: url, kid: kid)
        #expect(f.apple.keysFetchCount == 4)  // fresh again
    }

    @Test func noKeysAndTheServerDownIsUnavailable() throws {
        let f = try ProviderFixture()
        f.apple.setDown(true)
        let error = providerError { try f.cache.key(url: f.apple.keysURL, kid: f.apple.keys.currentKid) }
        #expect(error?.isUnavailable == true)
        #expect(f.apple.keysFetchCount == 1)
        // A negative cache: for 30 s after the failure no call asks again, each answers unavailable at once.
        f.apple.setDown(false)
        for _ in 0..<20 {
            #expect(providerError { try f.cache.key(url: f.apple.keysURL, kid: f.apple.keys.currentKid) }?.isUnavailable == true)
        }
        f.clock.advance(seconds: 29)
        #expect(providerError { try f.cache.key(url: f.apple.keysURL, kid: f.apple.keys.currentKid) }?.isUnavailable == true)
        #expect(f.apple.keysFetchCount == 1)
        f.clock.advance(seconds: 1)
        #expect(try f.cache.key(url: f.apple.keysURL, kid: f.apple.keys.currentKid) != nil)
        #expect(f.apple.keysFetchCount == 2)
    }

    /// The token's key may have been published after our last good fetch: while the refetch fails
    /// (and for the 30 s it is held back after a failure) the answer is "unavailable", never
    /// "unknown kid". Once a refetch succeeds without the kid, it is unknown.
    @Test(arguments: ["HTTP 500", "not a key set", "connection refused"])
    func aKidMissingFromCachedKeysIsUnavailableWhileTheRefetchFails(_ outage: String) throws {
        let clock = ManualClock()
        let keys = try FakeKeyRing(kidPrefix: "outage", maxAgeSeconds: 3600)
        let failing = Mutex(false)
        let server = try FakeHTTPServer { request, _ in
            guard request.path == "/keys" else { return nil }
            guard failing.withLock({ $0 }) else { return keys.jwksResponse() }
            return outage == "HTTP 500"
                ? FakeHTTPServer.json(500, ["error": "internal"])
                : HTTPResponse(status: 200, headers: ["Content-Type": "text/html"], body: Array("<html>maintenance</html>".utf8))
        }
        defer { server.stop() }
        let cache = JWKSCache(client: OutboundHTTPClient(), clock: clock)
        let url = server.baseURL + "/keys", known = keys.currentKid
        #expect(try cache.key(url: url, kid: known) != nil)

        clock.advance(seconds: 30)
        if outage == "connection refused" { server.stop() } else { failing.withLock { $0 = true } }
        #expect(providerError { try cache.key(url: url, kid: "outage-next") }?.isUnavailable == true)
        #expect(server.requestCount("GET", "/keys") == (outage == "connection refused" ? 1 : 2))
        failing.withLock { $0 = false }
        clock.advance(seconds: 29)
        #expect(providerError { try cache.key(url: url, kid: "outage-next") }?.isUnavailable == true, "held back, still unavailable")
        #expect(try cache.key(url: url, kid: known) != nil, "a cached kid is served meanwhile")
        guard outage != "connection refused" else { return }
        #expect(server.requestCount("GET", "/keys") == 2)

        clock.advance(seconds: 1)
        #expect(try cache.key(url: url, kid: "outage-next") == nil, "the refetch succeeded: unknown")
        #expect(server.requestCount("GET", "/keys") == 3)
        #expect(server.errors.isEmpty)
    }

    @Test func anUnreadableKeySetIsUnavailable() throws {
        let clock = ManualClock()
        let server = try FakeHTTPServer { request, _ in
            switch request.path {
            case "/html": HTTPResponse(status: 200, headers: ["Content-Type": "text/html"], body: Array("<html>maintenance</html>".utf8))
            case "/empty": FakeHTTPServer.json(200, ["keys": []])
            case "/odd": FakeHTTPServer.json(200, ["keys": [["kty": "oct", "kid": "k", "k": "c2VjcmV0"]]])
            default: nil
            }
        }
        defer { server.stop() }
        let cache = JWKSCache(client: OutboundHTTPClient(), clock: clock)
        for path in ["/html", "/empty", "/odd"] {
            #expect(providerError { try cache.key(url: server.baseURL + path, kid: "k") }?.isUnavailable == true, "\(path)")
        }
    }

    @Test func aStaleKeyIsServedWithoutWaitingForASlowRefresh() throws {
        let clock = ManualClock()
        let keys = try FakeKeyRing(kidPrefix: "slow", maxAgeSeconds: 60)
        let slow = Mutex(false)
        let server = try FakeHTTPServer { request, _ in
            guard request.path == "/keys" else { return nil }
            if slow.withLock({ $0 }) { usleep(3_000_000) }
            return keys.jwksResponse()
        }
        defer { server.stop() }
        let cache = JWKSCache(client: OutboundHTTPClient(), clock: clock)
        let url = server.baseURL + "/keys", kid = keys.currentKid
        _ = try cache.key(url: url, kid: kid)
        slow.withLock { $0 = true }
        clock.advance(seconds: 61)
        let refreshing = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            _ = try? cache.key(url: url, kid: kid)  // does the slow refresh
            refreshing.signal()
        }
        let deadline = Date().addingTimeInterval(10)
        while server.requestCount("GET", "/keys") < 2 && Date() < deadline { usleep(1_000) }
        #expect(server.requestCount("GET", "/keys") == 2, "the slow refresh started")
        let started = Date()
        #expect(try cache.key(url: url, kid: kid) != nil)
        #expect(Date().timeIntervalSince(started) < 1.5, "served from the cache, not after the 3 s refresh")
        #expect(refreshing.wait(timeout: .now() + 15) == .success)
    }
}
