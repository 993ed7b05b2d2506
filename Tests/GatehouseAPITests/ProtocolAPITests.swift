import Foundation
import GatehouseCore
import GatehouseTesting
import Testing

/// What every route shares: errors as problem+json, limits, request ids, CORS, operations endpoints.
@Suite("HTTP conventions")
struct ProtocolAPITests {
    @Test(arguments: TestDatabase.kinds)
    func badRequestsAnswerProblemJSONWithStableCodes(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp()
        let admin = [("Authorization", "Bearer \(app.secretKey)")]
        let json = [("Content-Type", "application/json")]
        let cases: [(String, String, [(String, String)], [UInt8]?, Int, String)] = [
            ("GET", "/v1/nope", [], nil, 404, "request/not-found"),
            ("DELETE", "/v1/app", [], nil, 405, "request/method-not-allowed"),
            ("PATCH", "/v1/admin/app", admin + json, Array("{\"name\": ".utf8), 400, "request/validation-failed"),
            ("PATCH", "/v1/admin/app", admin + json, Array("[1,2]".utf8), 400, "request/validation-failed"),
            // Trailing commas, which Foundation's parser would take, are not JSON.
            ("PATCH", "/v1/admin/app", admin + json, Array("{\"name\": \"N\",}".utf8), 400, "request/validation-failed"),
            ("PATCH", "/v1/admin/app", admin + json, Array("{\"allowed_origins\": [\"https://a.example.com\", ]}".utf8), 400, "request/validation-failed"),
            // The same key twice: a proxy may read the first where the parser would keep the last.
            ("PATCH", "/v1/admin/app", admin + json, Array("{\"name\": \"A\", \"name\": \"B\"}".utf8), 400, "request/validation-failed"),
            ("PATCH", "/v1/admin/app", admin + json, [0x7B, 0x22, 0xFF, 0xFE, 0x22, 0x3A, 0x31, 0x7D], 400, "request/validation-failed"),
            ("PATCH", "/v1/admin/app", admin + json, [], 400, "request/validation-failed"),
            ("PATCH", "/v1/admin/app", admin + [("Content-Type", "text/plain")], Array("{}".utf8), 415, "request/unsupported-media-type"),
            ("PATCH", "/v1/admin/app", admin + [("Content-Type", "application/x-www-form-urlencoded")], Array("a=b".utf8), 415, "request/unsupported-media-type"),
            // JSON is UTF-8: a body declared in another charset is refused, not misread.
            ("PATCH", "/v1/admin/app", admin + [("Content-Type", "application/json; charset=latin1")], Array("{}".utf8), 415, "request/unsupported-media-type"),
            ("PATCH", "/v1/admin/app", admin + json, Array(("{\"name\":\"" + String(repeating: "a", count: 70_000) + "\"}").utf8), 413, "request/payload-too-large"),
            ("PATCH", "/v1/admin/app", admin + json, Array("{\"name\": 12}".utf8), 400, "request/validation-failed"),
            ("GET", "/v1/app", [("X-App-Key", app.appKey), ("X-Big", String(repeating: "h", count: 20_000))], nil, 431, "request/headers-too-large"),
            ("GET", "/v1/app?q=" + String(repeating: "u", count: 10_000), [("X-App-Key", app.appKey)], nil, 414, "request/uri-too-long"),
        ]
        for (method, path, headers, body, status, code) in cases {
            let response = try server.request(method, path, headers: headers, body: body)
            #expect(response.status == status, "\(method) \(path.prefix(40))")
            #expect(response.problemCode == code, "\(method) \(path.prefix(40))")
            #expect(response.header("Content-Type") == "application/problem+json")
            let problem = try #require(response.json)
            #expect(problem["type"] == .string("urn:gatehouse:error:\(code)"))
            #expect(problem["status"] == .int(Int64(status)))
            #expect(problem["title"]?.stringValue?.isEmpty == false)
            #expect(problem["request_id"]?.stringValue == response.header("X-Request-Id"))
        }
        // None of it changed the app.
        #expect(try server.request("GET", "/v1/admin/app", bearer: app.secretKey).data?["name"] == "Test App")
        for contentType in ["application/json; charset=UTF-8", "application/merge-patch+json", "Application/JSON;charset=\"utf-8\""] {
            let patched = try server.request("PATCH", "/v1/admin/app", headers: admin + [("Content-Type", contentType)], body: Array("{\"name\": \"Test App\"}".utf8))
            #expect(patched.status == 200, "\(contentType)")
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func aChunkedBodyOverTheCapIsRefused(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp()
        let response = try server.request(
            "PATCH", "/v1/admin/app", bearer: app.secretKey, headers: [("Content-Type", "application/json"), ("Transfer-Encoding", "chunked")],
            body: Array(repeating: 0x20, count: 100_000))
        #expect(response.status == 413)
        #expect(response.problemCode == "request/payload-too-large")
        // A 1 MiB password in chunks is refused before hashing, and the client reads why.
        let password = try server.request(
            "POST", "/v1/auth/signin", appKey: app.appKey, headers: [("Content-Type", "application/json"), ("Transfer-Encoding", "chunked")],
            body: Array(#"{"email":"a@b.co","password":""#.utf8) + Array(repeating: 0x61, count: 1 << 20) + Array(#""}"#.utf8))
        #expect(password.problemCode == "request/payload-too-large")
    }

    @Test(arguments: TestDatabase.kinds)
    func requestIDsAreEchoedWhenSaneAndGeneratedOtherwise(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let echoed = try server.request("GET", "/healthz", headers: [("X-Request-Id", "abc.DEF_123-x")])
        #expect(echoed.header("X-Request-Id") == "abc.DEF_123-x")
        for bad in ["has space", String(repeating: "a", count: 129), "semi;colon"] {
            let replaced = try server.request("GET", "/healthz", headers: [("X-Request-Id", bad)])
            let id = try #require(replaced.header("X-Request-Id"))
            #expect(id != bad && id.hasPrefix("req_"))
        }
        let a = try server.request("GET", "/healthz").header("X-Request-Id")
        let b = try server.request("GET", "/healthz").header("X-Request-Id")
        #expect(a != nil && a != b)
    }

    @Test
    func headAnswersLikeGetButNotWhereAGetStartsAFlow() throws {
        let server = try TestServer(.sqlite)
        defer { server.stop() }
        let app = try server.createApp()
        let get = try server.request("GET", "/v1/app", appKey: app.appKey)
        let head = try server.request("HEAD", "/v1/app", appKey: app.appKey)
        #expect(head.status == 200)
        #expect(head.header("Content-Length") == get.header("Content-Length"))
        #expect(head.body.isEmpty)
        let authorize = try server.request("HEAD", "/v1/auth/oauth/apple/authorize?app_key=\(app.appKey)&redirect_uri=https%3A%2F%2Fa.example.com")
        #expect(authorize.status == 405)
        #expect(authorize.header("Allow") == "GET")
    }

    @Test(arguments: TestDatabase.kinds)
    func corsFollowsEachAppsAllowedOrigins(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let a = try server.createApp(["name": "A", "allowed_origins": ["https://a.example.com"]])
        let b = try server.createApp(["name": "B", "allowed_origins": ["https://b.example.com"]])

        let preflight = try server.request(
            "OPTIONS", "/v1/app", headers: [("Origin", "https://a.example.com"), ("Access-Control-Request-Method", "GET"), ("Access-Control-Request-Headers", "x-app-key")])
        #expect(preflight.status == 204)
        #expect(preflight.header("Access-Control-Allow-Origin") == "https://a.example.com")
        #expect(preflight.header("Access-Control-Allow-Headers")?.contains("X-App-Key") == true)
        #expect(preflight.header("Access-Control-Allow-Methods") == "GET, HEAD")

        let unknownOrigin = try server.request(
            "OPTIONS", "/v1/app", headers: [("Origin", "https://evil.example.com"), ("Access-Control-Request-Method", "GET")])
        #expect(unknownOrigin.header("Access-Control-Allow-Origin") == nil)

        let own = try server.request("GET", "/v1/app", appKey: a.appKey, headers: [("Origin", "https://a.example.com")])
        #expect(own.header("Access-Control-Allow-Origin") == "https://a.example.com")
        #expect(own.header("Vary")?.contains("Origin") == true)
        // A page can read the request id, when to retry, and why its token was refused.
        #expect(own.header("Access-Control-Expose-Headers") == "X-Request-Id, Retry-After, WWW-Authenticate")
        // B's origin is not A's: no CORS headers for A's responses, even though some app lists it.
        let other = try server.request("GET", "/v1/app", appKey: a.appKey, headers: [("Origin", "https://b.example.com")])
        #expect(other.header("Access-Control-Allow-Origin") == nil)
        #expect(try server.request("GET", "/v1/app", appKey: b.appKey, headers: [("Origin", "https://b.example.com")])
            .header("Access-Control-Allow-Origin") == "https://b.example.com")
    }

    @Test
    func everyAnswerSaysNoSniffAndVariesByOriginExceptAdminWhichHasNoCORS() throws {
        let server = try TestServer(.sqlite)
        defer { server.stop() }
        let app = try server.createApp(["name": "A", "allowed_origins": ["https://a.example.com"]])
        let origin = ("Origin", "https://a.example.com")
        let answers: [(String, TestResponse)] = [
            ("GET /v1/app", try server.request("GET", "/v1/app", appKey: app.appKey)),
            ("GET /v1/app, origin", try server.request("GET", "/v1/app", appKey: app.appKey, headers: [origin])),
            ("GET /v1/app, other origin", try server.request("GET", "/v1/app", appKey: app.appKey, headers: [("Origin", "https://b.example.com")])),
            ("HEAD /v1/app", try server.request("HEAD", "/v1/app", appKey: app.appKey)),
            ("401", try server.request("GET", "/v1/app")),
            ("404", try server.request("GET", "/v1/nope", headers: [origin])),
            ("405", try server.request("DELETE", "/v1/app", appKey: app.appKey)),
            ("preflight", try server.request("OPTIONS", "/v1/app", headers: [origin, ("Access-Control-Request-Method", "GET")])),
            ("healthz", try server.request("GET", "/healthz")),
        ]
        for (name, response) in answers {
            #expect(response.header("X-Content-Type-Options") == "nosniff", "\(name)")
            #expect(response.headerValues("Vary").filter { $0 == "Origin" }.count == 1, "\(name): \(response.headerValues("Vary"))")
        }
        #expect(answers[1].1.header("Access-Control-Allow-Origin") == "https://a.example.com")

        // The admin API is for servers: no CORS header, even with an app key whose app lists the origin.
        let admin: [(String, TestResponse)] = [
            ("GET", try server.request("GET", "/v1/admin/app", appKey: app.appKey, bearer: app.secretKey, headers: [origin])),
            ("401", try server.request("GET", "/v1/admin/app", appKey: app.appKey, headers: [origin])),
            ("404", try server.request("GET", "/v1/admin/nope", appKey: app.appKey, headers: [origin])),
            ("preflight", try server.request("OPTIONS", "/v1/admin/app", headers: [origin, ("Access-Control-Request-Method", "PATCH")])),
        ]
        #expect(admin[0].1.status == 200)
        #expect(admin[3].1.status == 405, "a preflight there is an ordinary OPTIONS")
        for (name, response) in admin {
            #expect(response.header("X-Content-Type-Options") == "nosniff", "admin \(name)")
            let cors = response.headers.filter { $0.name.lowercased().hasPrefix("access-control-") || $0.name.lowercased() == "vary" }
            #expect(cors.isEmpty, "admin \(name): \(cors)")
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func aNULAnywhereInTheRequestIs400NeverATruncatedMatch(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(["name": "A", "redirect_uris": ["https://a.example.com/cb"]])
        _ = try server.signUp(app)
        // libpq sent text as C strings, so on PostgreSQL `<key>%00junk` found the app of `<key>`.
        let cases: [(String, String, [(String, String)], JSON?, String)] = [
            ("GET", "/v1/auth/oauth/apple/authorize?app_key=\(app.appKey)%00junk&redirect_uri=https%3A%2F%2Fa.example.com%2Fcb&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256", [], nil, "app_key"),
            ("GET", "/v1/apps/\(app.id)%00junk/jwks.json", [], nil, "path"),
            ("POST", "/v1/auth/signin", [("X-App-Key", app.appKey)], ["email": "ada@example.com\u{0}junk", "password": "correct horse battery"], "email"),
            ("POST", "/v1/auth/signup", [("X-App-Key", app.appKey)], ["email": "eve@example.com", "password": "correct horse battery", "first_name": "E\u{0}ve"], "first_name"),
            ("POST", "/v1/auth/refresh", [("X-App-Key", app.appKey)], ["refresh_token": "x\u{0}"], "refresh_token"),
        ]
        for (method, path, headers, json, field) in cases {
            let response = try server.request(method, path, headers: headers, json: json)
            #expect(response.status == 400, "\(method) \(path.prefix(60)): \(response.status) \(response.text)")
            #expect(response.problemCode == "request/validation-failed", "\(method) \(path.prefix(60))")
            #expect(response.json?["errors"]?.arrayValue?.first?["field"]?.stringValue == field, "\(method) \(path.prefix(60))")
        }
        // The same requests without the NUL reach the app: the 400s above are the NUL's doing.
        #expect(try server.request("GET", "/v1/apps/\(app.id)/jwks.json").status == 200)
        #expect(try server.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"]).status == 200)
    }

    @Test(arguments: TestDatabase.kinds)
    func readinessFailsWithRetryAfterWhenTheDatabaseIsGone(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        server.gatehouse.database.close()
        let ready = try server.request("GET", "/readyz")
        #expect(ready.status == 503)
        #expect(ready.problemCode == "server/unavailable")
        #expect(ready.header("Retry-After") == "1")
        #expect(try server.request("GET", "/healthz").status == 200)
        // Any request that needs the database gets the same answer, not a 500.
        let lookup = try server.request("GET", "/v1/app", appKey: "pk_not_cached_anywhere_00000000")
        #expect(lookup.status == 503)
        #expect(lookup.problemCode == "server/unavailable")
        #expect(lookup.header("Retry-After") == "1")
    }

    @Test(arguments: TestDatabase.kinds)
    func healthReadinessAndMetrics(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        #expect(try server.request("GET", "/healthz").status == 200)
        #expect(try server.request("GET", "/readyz").json == ["status": "ok"])
        _ = try server.request("GET", "/v1/app")
        // Made-up methods share one series, whatever they contain.
        _ = try server.request("BREW", "/v1/app")
        _ = try server.request(#"GE"T}x"#, "/v1/app")
        #expect(try server.request("GET", "/metrics").problemCode == "auth/missing-token")
        #expect(try server.request("GET", "/metrics", bearer: "wrong").problemCode == "auth/invalid-token")
        let metrics = try server.request("GET", "/metrics", bearer: TestServer.adminToken)
        #expect(metrics.status == 200)
        #expect(metrics.header("Content-Type")?.hasPrefix("text/plain") == true)
        #expect(metrics.text.contains(#"gatehouse_http_requests_total{method="GET",route="/v1/app",status="401"} 1"#))
        #expect(metrics.text.contains(#"gatehouse_http_request_duration_seconds_bucket{method="GET",route="/healthz",status="200",le="+Inf"} 1"#))
        #expect(metrics.text.contains("gatehouse_db_pool_connections"))
        #expect(metrics.text.contains(#"gatehouse_http_requests_total{method="other",route="unmatched",status="405"} 2"#))
        #expect(!metrics.text.contains("BREW") && !metrics.text.contains(#"GE""#))
    }
}
