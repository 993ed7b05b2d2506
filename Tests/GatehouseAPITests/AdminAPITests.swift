import Foundation
import GatehouseCore
import GatehouseTesting
import Testing

/// The tenant admin's audit log (filters, keyset pages) and users, on both databases.
@Suite("Tenant admin: audit log and users")
struct AdminAPITests {
    @Test(arguments: TestDatabase.kinds)
    func eventsAreTheAppsOwnNewestFirstAndFiltered(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(["name": "Audited", "rate_limits": ["auth_per_minute_per_ip": 1000]])
        let other = try server.createApp(["name": "Other"])
        let session = try server.signUp(app, email: "ada@example.com")
        let userID = try #require(session["user"]?["id"]?.stringValue)
        _ = try server.signUp(app, email: "grace@example.com")
        _ = try server.signUp(other, email: "ada@example.com")
        #expect(try server.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "ada@example.com", "password": "wrong password"]).status == 400)

        let all = try server.request("GET", "/v1/admin/events", bearer: app.secretKey)
        #expect(all.status == 200)
        let events = try #require(all.json?["data"]?.arrayValue)
        let types = events.compactMap { $0["type"]?.stringValue }
        #expect(types.first == "user.sign_in_failed", "newest first")
        #expect(types.filter { $0 == "user.signed_up" }.count == 2, "this app's two sign-ups, not the other app's")
        let failed = try #require(events.first)
        #expect(failed["user_id"]?.stringValue == userID && failed["data"]?["method"] == "password" && failed["created_at"]?.stringValue != nil)

        let ada = try server.request("GET", "/v1/admin/events?user_id=\(userID)", bearer: app.secretKey).json?["data"]?.arrayValue ?? []
        #expect(!ada.isEmpty && ada.allSatisfy { $0["user_id"]?.stringValue == userID })
        let signUps = try server.request("GET", "/v1/admin/events?type=user.signed_up", bearer: app.secretKey).json?["data"]?.arrayValue ?? []
        #expect(signUps.count == 2 && signUps.allSatisfy { $0["type"] == "user.signed_up" })
        // Another app's user is nobody here; another app's key sees its own log only.
        let otherUser = try server.request("GET", "/v1/admin/events?type=user.signed_up", bearer: other.secretKey).json?["data"]?.arrayValue ?? []
        #expect(otherUser.count == 1)
        let otherID = try #require(otherUser.first?["user_id"]?.stringValue)
        #expect(try server.request("GET", "/v1/admin/events?user_id=\(otherID)", bearer: app.secretKey).json?["data"] == [])
    }

    @Test(arguments: TestDatabase.kinds)
    func pagesAreStableWhileEventsAreAdded(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock()
        let server = try TestServer(kind, clock: clock)
        defer { server.stop() }
        let app = try server.createApp(["name": "Paged"])
        let log = server.gatehouse.store.app(AppID(unchecked: app.id))
        // 130 events in one millisecond: the order among them is the id's.
        let at = clock.nowMillis()
        for _ in 0..<130 {
            try log.auditLog.record(Event(type: .userSignInFailed, userID: nil, sessionID: nil, ip: "192.0.2.1", userAgent: nil, createdAt: at))
        }
        var seen: [String] = []
        var cursor: String?
        var pages = 0
        repeat {
            let query = "/v1/admin/events?type=user.sign_in_failed&limit=50" + (cursor.map { "&cursor=\($0)" } ?? "")
            let page = try server.request("GET", query, bearer: app.secretKey)
            #expect(page.status == 200)
            seen += (page.json?["data"]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue }
            cursor = page.json?["next_cursor"]?.stringValue
            pages += 1
            // Newer events arriving meanwhile do not shift the pages still to come.
            clock.advance(seconds: 1)
            try log.auditLog.record(Event(type: .userSignInFailed, userID: nil, sessionID: nil, ip: "192.0.2.2", userAgent: nil, createdAt: clock.nowMillis()))
        } while cursor != nil && pages < 10
        #expect(pages == 3)
        #expect(seen.count == 130 && Set(seen).count == 130)
    }

    /// `/v1/admin/users/{id}` and its sessions: the app's own users only.
    @Test(arguments: TestDatabase.kinds)
    func anAdminSeesItsUserAndSignsThemOutEverywhere(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(["name": "Admin", "rate_limits": ["auth_per_minute_per_ip": 1000]])
        let other = try server.createApp(["name": "Other"])
        let first = try server.signUp(app, email: "ada@example.com")
        let second = try server.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"])
        let id = try #require(first["user"]?["id"]?.stringValue)
        let shown = try server.request("GET", "/v1/admin/users/\(id)", bearer: app.secretKey)
        #expect(shown.status == 200 && shown.data?["email"] == "ada@example.com" && shown.data?["identities"] == ["password"])
        for path in ["/v1/admin/users/\(id)", "/v1/admin/users/\(id)/sessions"] {
            let method = path.hasSuffix("sessions") ? "DELETE" : "GET"
            #expect(try server.request(method, path, bearer: other.secretKey).status == 404, "another app's admin")
        }
        #expect(try server.request("GET", "/v1/admin/users/not-an-id", bearer: app.secretKey).status == 404)
        // The user's live sessions, as their own list shows them (no `current`: the admin has none).
        let listed = try server.request("GET", "/v1/admin/users/\(id)/sessions", bearer: app.secretKey)
        #expect(listed.status == 200 && listed.data?.arrayValue?.count == 2, "\(listed.text)")
        #expect(listed.data?.arrayValue?.allSatisfy { $0["method"] == "password" && $0["current"] == nil } == true)
        #expect(try server.request("GET", "/v1/admin/users/\(id)/sessions", bearer: other.secretKey).status == 404)
        #expect(try server.request("DELETE", "/v1/admin/users/\(id)/sessions", bearer: app.secretKey).status == 204)
        #expect(try server.request("GET", "/v1/admin/users/\(id)/sessions", bearer: app.secretKey).data?.arrayValue?.isEmpty == true)
        for session in [first, second.data ?? [:]] {
            #expect(try server.request("GET", "/v1/me", appKey: app.appKey, bearer: session["access_token"]?.stringValue).status == 401)
            #expect(try server.request("POST", "/v1/auth/refresh", appKey: app.appKey, json: ["refresh_token": session["refresh_token"] ?? .null]).status == 401)
        }
        let revoked = try server.request("GET", "/v1/admin/events?type=session.revoked&user_id=\(id)", bearer: app.secretKey).json?["data"]?.arrayValue ?? []
        #expect(revoked.count == 2 && revoked.allSatisfy { $0["data"]?["reason"] == "admin" })
    }

    /// Thousands of users, paged newest first without repeats, and searched.
    @Test(arguments: TestDatabase.kinds)
    func usersArePagedAndSearched(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock()
        let server = try TestServer(kind, clock: clock)
        defer { server.stop() }
        let app = try server.createApp(["name": "Many"])
        let other = try server.createApp(["name": "Other"])
        let data = server.gatehouse.store.app(AppID(unchecked: app.id))
        func add(_ store: any AppScopedStore, email: String, first: String?, at: Int64) throws -> UserID {
            let user = User(id: .generate(), email: email, emailVerified: false, firstName: first, lastName: nil, createdAt: at, updatedAt: at, lastSignInAt: nil)
            try store.users.insertUser(user, passwordHash: nil, identity: nil, event: Event(type: .userSignedUp, userID: user.id, sessionID: nil, ip: nil, userAgent: nil, createdAt: at))
            return user.id
        }
        // 1,200 users, ten to a millisecond (ties broken by id).
        let start = clock.nowMillis()
        for n in 0..<1200 { _ = try add(data, email: "user\(n)@example.com", first: "User \(n)", at: start + Int64(n / 10)) }
        let percent = try add(data, email: "odd%name@example.com", first: "Zoë_Underscore", at: start + 500)
        _ = try add(server.gatehouse.store.app(AppID(unchecked: other.id)), email: "user1@example.com", first: "Elsewhere", at: start)

        var seen: [String] = []
        var cursor: String?
        repeat {
            let page = try server.request("GET", "/v1/admin/users?limit=100" + (cursor.map { "&cursor=\($0)" } ?? ""), bearer: app.secretKey)
            #expect(page.status == 200)
            seen += (page.json?["data"]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue }
            cursor = page.json?["next_cursor"]?.stringValue
        } while cursor != nil && seen.count < 2000
        #expect(seen.count == 1201 && Set(seen).count == 1201, "every user of this app once, none of the other's")

        func search(_ query: String) throws -> [String] {
            let encoded = query.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? query
            return (try server.request("GET", "/v1/admin/users?limit=100&query=\(encoded)", bearer: app.secretKey).json?["data"]?.arrayValue ?? [])
                .compactMap { $0["email"]?.stringValue }
        }
        #expect(try search("USER119@") == ["user119@example.com"], "case-insensitive substring of the email")
        #expect(try search("user 1199") == ["user1199@example.com"], "of the first name")
        #expect(try search("%") == ["odd%name@example.com"], "% is a character, not a wildcard")
        #expect(try search("zoë_") == ["odd%name@example.com"], "_ too")
        #expect(try search(percent.rawValue) == ["odd%name@example.com"], "an exact id")
        #expect(try search("nobody-like-this").isEmpty)
        let long = try server.request("GET", "/v1/admin/users?query=" + String(repeating: "a", count: 201), bearer: app.secretKey)
        #expect(long.status == 400 && long.problemCode == "request/validation-failed")
    }

    /// The maintenance job deletes every app's events older than `GATEHOUSE_EVENT_RETENTION_DAYS`.
    @Test(arguments: TestDatabase.kinds)
    func eventsOlderThanTheRetentionArePurged(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock()
        let server = try TestServer(kind, clock: clock) { $0.eventRetentionDays = 30 }
        defer { server.stop() }
        let apps = [try server.createApp(["name": "One"]), try server.createApp(["name": "Two"])]
        let now = clock.nowMillis()
        for app in apps {
            let log = server.gatehouse.store.app(AppID(unchecked: app.id))
            let day: Int64 = 86_400_000
            // 31 days old, an hour past 30 days, and 29 days old.
            for age in [31 * day, 30 * day + 3_600_000, 29 * day] {
                try log.auditLog.record(Event(type: .userSignInFailed, userID: nil, sessionID: nil, ip: nil, userAgent: nil, createdAt: now - age))
            }
        }
        // The maintenance job, as the periodic jobs run it.
        #expect(server.gatehouse.periodicJobs.runDue(force: true)["maintenance"] == 4)
        for app in apps {
            let left = try server.request("GET", "/v1/admin/events?type=user.sign_in_failed", bearer: app.secretKey).json?["data"]?.arrayValue ?? []
            #expect(left.count == 1, "the 29-day-old event stays")
        }
        #expect(try server.gatehouse.maintenance.run(now: now)?.deleted[.events] == 0)
    }

    /// A ban ends the user's sessions and refuses every sign-in with 403 `auth/user-disabled`
    /// until it is lifted, or, for a suspension, until it ends by itself.
    @Test(arguments: TestDatabase.kinds)
    func aBanEndsSessionsAndRefusesSignInUntilItEnds(_ kind: TestDatabaseKind) throws {
        let clock = ManualClock()
        let server = try TestServer(kind, clock: clock)
        defer { server.stop() }
        let app = try server.createApp(["name": "Banning", "rate_limits": ["auth_per_minute_per_ip": 1000]])
        let other = try server.createApp(["name": "Other"])
        let session = try server.signUp(app, email: "ada@example.com")
        let id = try #require(session["user"]?["id"]?.stringValue)
        func signIn() throws -> TestResponse {
            try server.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"])
        }
        let until = rfc3339(millis: clock.nowMillis() + 3_600_000)
        let banned = try server.request(
            "POST", "/v1/admin/users/\(id)/ban", bearer: app.secretKey, json: ["sanction_code": "spam", "reason": "Posted spam", "suspended_until": .string(until)])
        #expect(banned.status == 200 && banned.data?["ban"]?["sanction_code"] == "spam" && banned.data?["ban"]?["suspended_until"] == .string(until))
        #expect(try server.request("GET", "/v1/me", appKey: app.appKey, bearer: session["access_token"]?.stringValue).status == 401)
        #expect(try server.request("POST", "/v1/auth/refresh", appKey: app.appKey, json: ["refresh_token": session["refresh_token"] ?? .null]).status == 401)
        let refused = try signIn()
        #expect(refused.status == 403 && refused.problemCode == "auth/user-disabled")
        #expect(refused.json?["sanction_code"] == "spam" && refused.json?["suspended_until"] == .string(until))
        #expect(try server.request("GET", "/v1/admin/users/\(id)", bearer: app.secretKey).data?["ban"]?["reason"] == "Posted spam")

        // The suspension ends by itself.
        clock.advance(seconds: 3601)
        #expect(try signIn().status == 200)
        #expect(try server.request("GET", "/v1/admin/users/\(id)", bearer: app.secretKey).data?["ban"] == .null)

        // A permanent ban holds until it is lifted.
        #expect(try server.request("POST", "/v1/admin/users/\(id)/ban", bearer: app.secretKey, json: ["sanction_code": "fraud", "suspended_until": nil]).status == 200)
        let permanent = try signIn()
        #expect(permanent.status == 403 && permanent.json?["suspended_until"] == .null)
        let lifted = try server.request("DELETE", "/v1/admin/users/\(id)/ban", bearer: app.secretKey)
        #expect(lifted.status == 200 && lifted.data?["ban"] == .null)
        #expect(try signIn().status == 200)
        let types = (try server.request("GET", "/v1/admin/events?user_id=\(id)", bearer: app.secretKey).json?["data"]?.arrayValue ?? []).compactMap { $0["type"]?.stringValue }
        #expect(types.filter { $0 == "user.banned" }.count == 2 && types.contains("user.unbanned"))

        // Bad bans: clear 4xx, nothing written.
        for body: JSON in [
            ["sanction_code": "spam", "suspended_until": .string(rfc3339(millis: clock.nowMillis() - 1000))],
            ["sanction_code": "spam", "suspended_until": "next tuesday"],
            ["reason": "no code"],
            ["sanction_code": ""],
        ] {
            #expect(try server.request("POST", "/v1/admin/users/\(id)/ban", bearer: app.secretKey, json: body).status == 400, "\(body)")
        }
        #expect(try server.request("POST", "/v1/admin/users/\(id)/ban", bearer: other.secretKey, json: ["sanction_code": "spam"]).status == 404)
        #expect(try server.request("POST", "/v1/admin/users/usr_unknown/ban", bearer: app.secretKey, json: ["sanction_code": "spam"]).status == 404)
        #expect(try signIn().status == 200, "no bad ban took")
    }

    @Test(arguments: TestDatabase.kinds)
    func badQueriesAreClear4xx(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp(["name": "Strict"])
        for query in ["limit=0", "limit=101", "cursor=bm90LWEtY3Vyc29y", "cursor=%00", "user_id=ada", "type=DROP%20TABLE", "type=" + String(repeating: "a", count: 70) + ".b"] {
            let answer = try server.request("GET", "/v1/admin/events?\(query)", bearer: app.secretKey)
            #expect(answer.status == 400 && answer.problemCode == "request/validation-failed", "\(query)")
        }
        #expect(try server.request("GET", "/v1/admin/events").status == 401)
        #expect(try server.request("GET", "/v1/admin/events", bearer: "sk_wrong").status == 401)
    }
}
