import GatehouseHTTP
import Testing

struct RouterTests {
    private func router() -> Router<String> {
        var router = Router<String>()
        router.add("GET", "/v1/apps/{app_id}/.well-known/openid-configuration", "discovery")
        router.add("GET", "/v1/apps/{app_id}/jwks.json", "jwks")
        router.add("GET", "/v1/apps/{app_id}/users/{user_id}", "user")
        router.add("DELETE", "/v1/apps/{app_id}/users/{user_id}", "delete user")
        router.add("PATCH", "/v1/apps/{app_id}/users/{user_id}", "patch user")
        router.add("GET", "/v1/apps/{app_id}/users/me", "me")
        router.add("GET", "/health", "health")
        return router
    }

    private func handler(_ match: RouteMatch<String>) -> String? {
        if case .matched(let handler, _, _) = match { return handler }
        return nil
    }

    private func parameters(_ match: RouteMatch<String>) -> [String: String]? {
        if case .matched(_, let parameters, _) = match { return parameters }
        return nil
    }

    @Test func literalSegmentsMayContainDots() {
        let router = router()
        let discovery = router.match(method: "GET", path: "/v1/apps/app_1/.well-known/openid-configuration")
        #expect(handler(discovery) == "discovery")
        #expect(parameters(discovery) == ["app_id": "app_1"])
        #expect(handler(router.match(method: "GET", path: "/v1/apps/app_1/jwks.json")) == "jwks")
        #expect(handler(router.match(method: "GET", path: "/v1/apps/app_1/jwksXjson")) == nil)
    }

    @Test func matchReportsThePattern() {
        guard case .matched(_, _, let pattern) = router().match(method: "GET", path: "/v1/apps/a/jwks.json") else {
            Issue.record("no match")
            return
        }
        #expect(pattern == "/v1/apps/{app_id}/jwks.json")
    }

    @Test func parametersArePercentDecoded() {
        let router = router()
        #expect(parameters(router.match(method: "GET", path: "/v1/apps/a%20b/users/%E2%82%AC%2b1"))
            == ["app_id": "a b", "user_id": "€+1"])
        #expect(parameters(router.match(method: "GET", path: "/v1/apps/a+b/jwks.json")) == ["app_id": "a+b"])
    }

    @Test func aParameterRefusesEncodedSlashesAndBadEscapes() {
        let router = router()
        #expect(handler(router.match(method: "GET", path: "/v1/apps/a%2Fb/jwks.json")) == nil)
        #expect(handler(router.match(method: "GET", path: "/v1/apps/%zz/jwks.json")) == nil)
        #expect(handler(router.match(method: "GET", path: "/v1/apps/%4/jwks.json")) == nil)
        #expect(handler(router.match(method: "GET", path: "/v1/apps/%FF/jwks.json")) == nil, "not UTF-8")
    }

    @Test func anEmptySegmentDoesNotMatchAParameter() {
        let match = router().match(method: "GET", path: "/v1/apps//jwks.json")
        guard case .notFound = match else {
            Issue.record("expected notFound, got \(match)")
            return
        }
    }

    @Test func aTrailingSlashIsADifferentPath() {
        let router = router()
        #expect(handler(router.match(method: "GET", path: "/health")) == "health")
        #expect(handler(router.match(method: "GET", path: "/health/")) == nil)
        #expect(handler(router.match(method: "GET", path: "/v1/apps/a/jwks.json/")) == nil)
    }

    @Test func aLiteralWinsOverAParameterWhateverTheOrder() {
        #expect(handler(router().match(method: "GET", path: "/v1/apps/a/users/me")) == "me")
        #expect(handler(router().match(method: "GET", path: "/v1/apps/a/users/u1")) == "user")
        var reversed = Router<String>()
        reversed.add("GET", "/users/me", "me")
        reversed.add("GET", "/users/{id}", "user")
        #expect(handler(reversed.match(method: "GET", path: "/users/me")) == "me")
    }

    @Test func aLiteralRouteOfAnotherMethodLeavesThePathToAParameterRoute() {
        var router = Router<String>()
        router.add("GET", "/users/me", "me")
        router.add("DELETE", "/users/{id}", "delete")
        #expect(handler(router.match(method: "DELETE", path: "/users/me")) == "delete")
        #expect(parameters(router.match(method: "DELETE", path: "/users/me")) == ["id": "me"])
        #expect(handler(router.match(method: "HEAD", path: "/users/me")) == "me")
        #expect(parameters(router.match(method: "GET", path: "/users/me")) == [:])
    }

    @Test func literalsCompareBytesNotCanonicalEquivalence() {
        var router = Router<String>()
        router.add("GET", "/Kelvin", "literal")
        // U+212A KELVIN SIGN is canonically equivalent to "K": equal as Swift strings, not as bytes.
        #expect("/\u{212A}elvin" == "/Kelvin")
        #expect(handler(router.match(method: "GET", path: "/\u{212A}elvin")) == nil)
        #expect(handler(router.match(method: "GET", path: "/Kelvin")) == "literal")
    }

    @Test func anotherMethodOnAKnownPathListsTheAllowedMethods() {
        let match = router().match(method: "PUT", path: "/v1/apps/a/users/u1")
        guard case .methodNotAllowed(let allowed) = match else {
            Issue.record("expected methodNotAllowed, got \(match)")
            return
        }
        #expect(allowed == ["DELETE", "GET", "HEAD", "PATCH"])
        #expect(handler(router().match(method: "HEAD", path: "/v1/apps/a/users/u1")) == "user")
    }

    @Test func aGetThatWritesCanRefuseHead() {
        var router = Router<String>()
        router.add("GET", "/flow", head: false, "flow")
        router.add("GET", "/page", "page")
        #expect(handler(router.match(method: "GET", path: "/flow")) == "flow")
        #expect(handler(router.match(method: "HEAD", path: "/page")) == "page")
        guard case .methodNotAllowed(let allowed) = router.match(method: "HEAD", path: "/flow") else {
            Issue.record("expected methodNotAllowed")
            return
        }
        #expect(allowed == ["GET"])
    }

    @Test func unknownAndOddPathsAreNotFound() {
        let router = router()
        for path in ["/nope", "", "*", "health", "/v1/apps", "/v1/apps/a/users/u1/extra", "//health"] {
            let match = router.match(method: "GET", path: path)
            guard case .notFound = match else {
                Issue.record("\(path): expected notFound, got \(match)")
                continue
            }
        }
    }

    @Test func operationsListEveryRouteInOrder() {
        let operations = router().operations
        #expect(operations.count == 7)
        #expect(operations.first?.method == "GET")
        #expect(operations.first?.pattern == "/v1/apps/{app_id}/.well-known/openid-configuration")
        #expect(operations.map(\.method).filter { $0 == "DELETE" }.count == 1)
    }

    @Test func aDuplicateRouteTraps() async {
        await #expect(processExitsWith: .failure) {
            var router = Router<Int>()
            router.add("GET", "/v1/users/{id}", 1)
            router.add("GET", "/v1/users/{user_id}", 2)
        }
    }
}
