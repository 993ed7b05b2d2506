import GatehouseHTTP
import Testing

struct HTTPHeadersTests {
    @Test func lookupIgnoresCaseAndKeepsOrder() {
        var headers = HTTPHeaders([("Set-Cookie", "a=1"), ("Content-Type", "text/plain")])
        headers.add("set-cookie", "b=2")
        #expect(headers["content-type"] == "text/plain")
        #expect(headers["SET-COOKIE"] == "a=1")
        #expect(headers.values("Set-Cookie") == ["a=1", "b=2"])
        #expect(headers.map(\.name) == ["Set-Cookie", "Content-Type", "set-cookie"])
        #expect(headers["Missing"] == nil)
    }

    @Test func setReplacesEveryValue() {
        var headers: HTTPHeaders = ["Cache-Control": "no-cache", "X": "1"]
        headers.add("cache-control", "private")
        headers.set("Cache-Control", "no-store")
        #expect(headers.values("cache-control") == ["no-store"])
        #expect(headers.count == 2)
    }
}

struct CookiesTests {
    @Test func parsesPairsAndTheFirstOccurrenceWins() {
        let cookies = Cookies.parse("session=abc; theme=\"dark\"; session=evil;flag; =x;  spaced = v ")
        #expect(cookies == ["session": "abc", "theme": "dark", "spaced": "v"])
    }

    @Test func noHeaderMeansNoCookies() {
        #expect(Cookies.parse(nil).isEmpty)
        #expect(Cookies.parse("").isEmpty)
    }

    @Test func valuesMayContainEqualsSigns() {
        #expect(Cookies.parse("token=a=b==")["token"] == "a=b==")
    }
}
