import Dispatch
import Foundation
import GatehouseCore
import GatehouseCrypto
import GatehouseTesting
import Synchronization
import Testing

/// Three nodes (A, B, C) on one PostgreSQL database, each with its own HTTP server, caches,
/// revocation-list poll, outbox worker and periodic jobs, as three processes of one deployment
/// would be (docs/operations.md, "Scaling out"). What one node does must hold on the others
/// within the delays that section documents, and what must be shared (rate limits, refresh-token
/// rotation, the outbox) must behave as it does on one node.
///
/// A propagation is timed from the answer to the change until every other node shows it, polling
/// every 50 ms; a test fails when that takes longer than the documented delay plus `margin`.
@Suite("Several nodes on one PostgreSQL")
struct MultiNodeTests {
    /// docs/operations.md: "Ended sessions reach every node within the revocation list's 1 s
    /// poll" (`RevocationList`, `pollEveryMillis: 1000`).
    static let revocationPoll = 1.0
    /// docs/operations.md: "A change made through a node (PATCH, key rotation) applies on that
    /// node at once, and on the other nodes within 5 s" (`AppDirectory`, `revalidateAfterMillis: 5000`).
    static let appRevalidation = 5.0
    /// What a poll's own request may take on a loaded 2-core machine (the whole suite runs in
    /// parallel): the time to notice, not slack in the delay itself.
    static let margin = 1.0

    /// The delays above are the ones the operator is told: if the document changes, so must they.
    @Test func theDelaysHeldToHereAreTheDocumentedOnes() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("docs/operations.md"), encoding: .utf8)
        let document = text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(document.contains("Ended sessions reach every node within the revocation list's \(Int(Self.revocationPoll)) s poll"))
        #expect(document.contains("applies on that node at once, and on the other nodes within \(Int(Self.appRevalidation)) s"))
        #expect(document.contains("A cached app is trusted for \(Int(Self.appRevalidation)) seconds"))
    }

    // MARK: - Ended sessions

    @Test func aSessionEndedOnOneNodeIsRefusedByTheOthersWithinThePoll() throws {
        guard TestDatabase.kinds.contains(.postgres) else { return }
        let cluster = try Cluster()
        defer { cluster.stop() }
        let app = try cluster.a.createApp(Self.roomy)
        let signedUp = try cluster.a.signUp(app)
        let first = try #require(signedUp["access_token"]?.stringValue)
        let userID = try #require(signedUp["user"]?["id"]?.stringValue)
        let signIn = try cluster.b.request(
            "POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"])
        let second = try #require(signIn.data?["access_token"]?.stringValue)
        func me(_ node: TestServer, _ token: String) throws -> TestResponse { try node.request("GET", "/v1/me", appKey: app.appKey, bearer: token) }
        // Every node has verified both tokens (and remembers them) before the sessions end.
        for node in cluster.nodes {
            #expect(try me(node, first).status == 200)
            #expect(try me(node, second).status == 200)
        }

        // The user signs out on A: A refuses at once, B and C within the poll.
        #expect(try cluster.a.request("POST", "/v1/auth/signout", appKey: app.appKey, bearer: first).status == 204)
        #expect(try me(cluster.a, first).problemCode == "auth/session-revoked")
        let signedOut = try propagation(within: Self.revocationPoll, on: cluster.others) { node in
            try me(node, first).problemCode == "auth/session-revoked"
        }
        #expect(signedOut.allInTime, "sign-out: \(signedOut)")
        for node in cluster.nodes { #expect(try me(node, second).status == 200, "only the session signed out ended") }

        // The app's admin signs the user out everywhere through A: the same on B and C.
        #expect(try cluster.a.request("DELETE", "/v1/admin/users/\(userID)/sessions", bearer: app.secretKey).status == 204)
        #expect(try me(cluster.a, second).problemCode == "auth/session-revoked")
        let revoked = try propagation(within: Self.revocationPoll, on: cluster.others) { node in
            try me(node, second).problemCode == "auth/session-revoked"
        }
        #expect(revoked.allInTime, "admin sign-out: \(revoked)")
    }

    // MARK: - Rate limits

    /// The per-app, per-IP sign-in limit counts in the database: 6 a minute is 6 for the cluster,
    /// not 6 per node. The nodes share one manual clock, so no window boundary falls in the test.
    @Test func theSignInLimitIsOneLimitForTheCluster() throws {
        guard TestDatabase.kinds.contains(.postgres) else { return }
        let clock = ManualClock()
        let cluster = try Cluster(clock: clock)
        defer { cluster.stop() }
        let limit = 6
        let app = try cluster.a.createApp(["name": "Limited", "rate_limits": ["auth_per_minute_per_ip": .int(Int64(limit))]])
        // One after another, round robin: the first six answers are the password's, the rest 429 on every node.
        var answers: [(node: Int, status: Int, retryAfter: String?)] = []
        for i in 0..<(3 * limit) {
            let response = try Self.wrongPassword(cluster.nodes[i % 3], i, app: app)
            answers.append((i % 3, response.status, response.header("Retry-After")))
        }
        #expect(answers.prefix(limit).allSatisfy { $0.status == 400 }, "\(answers)")
        #expect(answers.dropFirst(limit).allSatisfy { $0.status == 429 && $0.retryAfter != nil }, "\(answers)")
        #expect(Set(answers.filter { $0.status == 429 }.map(\.node)) == [0, 1, 2])

        // At once, spread over the nodes: exactly `limit` get past the limiter, whichever node they reach.
        let other = try cluster.a.createApp(["name": "Limited too", "rate_limits": ["auth_per_minute_per_ip": .int(Int64(limit))]])
        let nodes = cluster.nodes
        let statuses = concurrently(5 * limit) { i in try Self.wrongPassword(nodes[i % 3], i, app: other).status }
        let counted = statuses.compactMap { try? $0.get() }
        #expect(counted.count == 5 * limit, "every request answered")
        #expect(counted.filter { $0 == 400 }.count == limit, "\(counted)")
        #expect(counted.filter { $0 == 429 }.count == 4 * limit, "\(counted)")
    }

    static func wrongPassword(_ node: TestServer, _ i: Int, app: TestServer.CreatedApp) throws -> TestResponse {
        try node.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": .string("nobody\(i)@example.com"), "password": "not the password"])
    }

    // MARK: - App settings and keys

    @Test func aSettingsChangeThroughOneNodeIsInForceOnTheOthersWithinTheRevalidation() throws {
        guard TestDatabase.kinds.contains(.postgres) else { return }
        let cluster = try Cluster()
        defer { cluster.stop() }
        let app = try cluster.a.createApp(Self.roomy)
        func minimum(_ node: TestServer) throws -> JSON? { try node.request("GET", "/v1/app", appKey: app.appKey).data?["password_min_length"] }
        // B and C have the app cached (just now: the entry would be trusted for the whole interval).
        for node in cluster.nodes { #expect(try minimum(node) == 8) }

        let patch = try cluster.a.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["password_min_length": 20])
        #expect(patch.status == 200)
        #expect(try minimum(cluster.a) == 20, "at once on the node that made it")
        let seen = try propagation(within: Self.appRevalidation, on: cluster.others) { node in try minimum(node) == 20 }
        #expect(seen.allInTime, "\(seen)")
        // In force, not only shown: a 12-character password is now too short everywhere.
        for (i, node) in cluster.nodes.enumerated() {
            let signUp = try node.request("POST", "/v1/auth/signup", appKey: app.appKey, json: ["email": .string("short\(i)@example.com"), "password": "twelve chars"])
            #expect(signUp.problemCode == "auth/weak-password", "node \(i)")
        }
    }

    @Test func aSecretKeyRotationThroughOneNodeIsInForceOnTheOthers() throws {
        guard TestDatabase.kinds.contains(.postgres) else { return }
        let cluster = try Cluster()
        defer { cluster.stop() }
        let app = try cluster.a.createApp(Self.roomy)
        func admin(_ node: TestServer, _ key: String) throws -> Int { try node.request("GET", "/v1/admin/app", bearer: key).status }
        for node in cluster.nodes { #expect(try admin(node, app.secretKey) == 200) }

        // A new key: it works on B and C, and the previous one keeps working (24 h).
        let rotated = try cluster.a.request("POST", "/v1/admin/app/secret-keys", bearer: app.secretKey)
        #expect(rotated.status == 201)
        let second = try #require(rotated.data?["secret_key"]?.stringValue)
        let accepted = try propagation(within: Self.appRevalidation, on: cluster.others) { node in try admin(node, second) == 200 }
        #expect(accepted.allInTime, "\(accepted)")
        for node in cluster.nodes { #expect(try admin(node, app.secretKey) == 200, "the previous key keeps working for 24 h") }

        // A key that leaked: rotated with revoke_others, every other key stops on every node.
        let revoking = try cluster.a.request("POST", "/v1/admin/app/secret-keys?revoke_others=true", bearer: second)
        #expect(revoking.status == 201)
        let third = try #require(revoking.data?["secret_key"]?.stringValue)
        let refused = try propagation(within: Self.appRevalidation, on: cluster.nodes) { node in
            let statuses = [try admin(node, app.secretKey), try admin(node, second), try admin(node, third)]
            return statuses == [401, 401, 200]
        }
        #expect(refused.allInTime, "\(refused)")
    }

    @Test func aSigningKeyRotationThroughOneNodeIsInForceOnTheOthersWithinTheRevalidation() throws {
        guard TestDatabase.kinds.contains(.postgres) else { return }
        let cluster = try Cluster()
        defer { cluster.stop() }
        let app = try cluster.a.createApp(Self.roomy)
        // Keys rotate at most once a minute, counted from the newest key: the app's were made a minute ago.
        try cluster.a.gatehouse.database.execute("UPDATE signing_keys SET created_at = created_at - 120000 WHERE app_id = \(app.id)")
        func kid(_ token: String) throws -> String? { try JWT.parse(token).header.kid }
        func kids(_ node: TestServer) throws -> [String] {
            let jwks = try node.request("GET", "/v1/apps/\(app.id)/jwks.json").json
            guard case .array(let keys)? = jwks?["keys"] else { return [] }
            return keys.compactMap { $0["kid"]?.stringValue }
        }
        func me(_ node: TestServer, _ token: String) throws -> TestResponse { try node.request("GET", "/v1/me", appKey: app.appKey, bearer: token) }
        let old = try #require(try cluster.b.signUp(app)["access_token"]?.stringValue)
        let oldKid = try #require(try kid(old))
        // Every node has the app's keys cached and has verified the token.
        for node in cluster.nodes {
            #expect(try kids(node).contains(oldKid))
            #expect(try me(node, old).status == 200)
        }

        // Rotated through A, revoking the previous key (it leaked): its tokens stop verifying and
        // the key leaves the JWKS on every node.
        let rotation = try cluster.a.request("POST", "/v1/admin/app/signing-keys/rotate?revoke_previous=true", bearer: app.secretKey)
        #expect(rotation.status == 200, "\(rotation.text)")
        let newKid = try #require(rotation.data?["kid"]?.stringValue)
        #expect(newKid != oldKid)
        #expect(try me(cluster.a, old).problemCode == "auth/invalid-token", "at once on the node that rotated")
        let inForce = try propagation(within: Self.appRevalidation, on: cluster.others) { node in
            let published = try kids(node)
            guard published.contains(newKid), !published.contains(oldKid) else { return false }
            return try me(node, old).problemCode == "auth/invalid-token"
        }
        #expect(inForce.allInTime, "\(inForce)")
        // Every node now signs with the new key, and accepts what the others sign.
        for (i, node) in cluster.nodes.enumerated() {
            let signIn = try node.request("POST", "/v1/auth/signin", appKey: app.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"])
            let token = try #require(signIn.data?["access_token"]?.stringValue)
            #expect(try kid(token) == newKid, "node \(i)")
            for verifier in cluster.nodes { #expect(try me(verifier, token).status == 200, "signed by node \(i)") }
        }
    }

    // MARK: - Refresh-token rotation

    /// The grace window is a server setting, the same on every node; short here, so that the
    /// test can step past it.
    static let graceSeconds = 3

    /// What one refresh race comes to (API.md, "Tokens" and "Numbers"): within the grace window
    /// every concurrent presenter of one refresh token gets the same successor and a valid access
    /// token for the same session; the old token presented after the window is reuse: the
    /// session ends (one `session.refresh_reused` event), each presenter is refused as reuse or,
    /// once the session has ended, as an invalid token, and the successor dies with the session.
    struct RaceOutcome: Equatable, CustomStringConvertible {
        var raceStatuses: [Int]
        var distinctSuccessors: Int
        var distinctSessions: Int
        var accessTokensWork: Bool
        var tokenRows: Int
        var reuseAllRefused: Bool
        var reuseDetected: Bool
        var successorAfterReuse: [String?]
        var accessTokenAfterReuse: Bool
        var reusedEvents: Int
        var revokedEvents: Int
        var endReason: String?

        var description: String {
            "race \(raceStatuses), \(distinctSuccessors) successor(s), \(distinctSessions) session(s), access tokens work: \(accessTokensWork), "
                + "\(tokenRows) token rows; reuse: all refused \(reuseAllRefused), detected \(reuseDetected); successor then \(successorAfterReuse), "
                + "access token refused everywhere: \(accessTokenAfterReuse); events reused \(reusedEvents), revoked \(revokedEvents); ended \(endReason ?? "no")"
        }
    }

    static let presenters = 12

    static let expectedRace = RaceOutcome(
        raceStatuses: Array(repeating: 200, count: presenters), distinctSuccessors: 1, distinctSessions: 1, accessTokensWork: true, tokenRows: 2,
        reuseAllRefused: true, reuseDetected: true, successorAfterReuse: Array(repeating: "auth/invalid-refresh-token", count: 3),
        accessTokenAfterReuse: true, reusedEvents: 1, revokedEvents: 1, endReason: "refresh_reused")

    /// `presenters` concurrent refreshes of one token, request i to `nodes[i % nodes.count]`;
    /// then, past the grace window, as many concurrent presentations of it again (reuse).
    func refreshRace(_ cluster: Cluster, _ app: TestServer.CreatedApp, email: String, nodes: [TestServer]) throws -> RaceOutcome {
        let session = try nodes[0].signUp(app, email: email)
        let token = try #require(session["refresh_token"]?.stringValue)
        let appKey = app.appKey
        let race = concurrently(Self.presenters) { i in try Self.refresh(nodes[i % nodes.count], appKey: appKey, token) }.compactMap { try? $0.get() }
        let rotatedAt = ContinuousClock.now
        let successors = Set(race.compactMap { $0.data?["refresh_token"]?.stringValue })
        let accessTokens = race.compactMap { $0.data?["access_token"]?.stringValue }
        let sessions = Set(try accessTokens.map { try JSON.parse(JWT.parse($0).payload)["sid"]?.stringValue ?? "" })
        let sessionID = sessions.first ?? ""
        func me(_ node: TestServer, _ token: String) throws -> TestResponse { try node.request("GET", "/v1/me", appKey: appKey, bearer: token) }
        var accessTokensWork = !accessTokens.isEmpty
        for (i, access) in accessTokens.enumerated() {
            if try me(cluster.nodes[i % 3], access).status != 200 { accessTokensWork = false }
        }
        let tokenRows = try cluster.a.gatehouse.database.query("SELECT token_hash FROM refresh_tokens WHERE session_id = \(sessionID)").count

        // Past the window, the old token again: reuse.
        Thread.sleep(until: Date().addingTimeInterval(max(0, Double(Self.graceSeconds) + 0.5 - (ContinuousClock.now - rotatedAt).seconds)))
        let reuse = concurrently(Self.presenters) { i in try Self.refresh(nodes[i % nodes.count], appKey: appKey, token) }.compactMap { try? $0.get() }
        let reuseCodes = reuse.map { $0.problemCode }
        let successor = successors.first ?? ""
        var successorAfter: [String?] = []
        for node in cluster.nodes { successorAfter.append(try Self.refresh(node, appKey: appKey, successor).problemCode) }
        let access = accessTokens.first ?? ""
        let refusedEverywhere = try propagation(within: Self.revocationPoll, on: cluster.nodes) { node in
            try me(node, access).problemCode == "auth/session-revoked"
        }
        func events(_ type: String) throws -> Int {
            try cluster.a.gatehouse.database.query("SELECT id FROM events WHERE type = \(type) AND session_id = \(sessionID)").count
        }
        let ended = try cluster.a.gatehouse.database.query("SELECT end_reason FROM sessions WHERE id = \(sessionID)").first?.optionalString("end_reason")
        return RaceOutcome(
            raceStatuses: race.map(\.status), distinctSuccessors: successors.count, distinctSessions: sessions.count, accessTokensWork: accessTokensWork,
            tokenRows: tokenRows, reuseAllRefused: reuse.count == Self.presenters && reuse.allSatisfy { $0.status == 401 }
                && reuseCodes.allSatisfy { $0 == "auth/refresh-token-reused" || $0 == "auth/invalid-refresh-token" },
            reuseDetected: reuseCodes.contains("auth/refresh-token-reused"), successorAfterReuse: successorAfter,
            accessTokenAfterReuse: refusedEverywhere.allInTime, reusedEvents: try events("session.refresh_reused"),
            revokedEvents: try events("session.revoked"), endReason: ended)
    }

    static func refresh(_ node: TestServer, appKey: String, _ token: String) throws -> TestResponse {
        try node.request("POST", "/v1/auth/refresh", appKey: appKey, json: ["refresh_token": .string(token)])
    }

    @Test func concurrentRefreshesSpreadOverTheNodesGiveWhatOneNodeGives() throws {
        guard TestDatabase.kinds.contains(.postgres) else { return }
        let cluster = try Cluster { $0.refreshGraceSeconds = Self.graceSeconds }
        defer { cluster.stop() }
        let app = try cluster.a.createApp(Self.roomy)
        let oneNode = try refreshRace(cluster, app, email: "one@example.com", nodes: [cluster.a])
        let threeNodes = try refreshRace(cluster, app, email: "three@example.com", nodes: cluster.nodes)
        #expect(oneNode == Self.expectedRace, "one node: \(oneNode)")
        #expect(threeNodes == Self.expectedRace, "three nodes: \(threeNodes)")
        #expect(threeNodes == oneNode)
    }

    // MARK: - The outbox

    /// Sign-ups spread over the nodes queue a verification mail and a `user.created` webhook each;
    /// all three workers run (each woken by its own node's commits, polling for the others'),
    /// against a slow mail server so that claims overlap. Every item arrives once.
    @Test func theOutboxDeliversEveryItemOnceWithEveryNodesWorkerRunning() throws {
        guard TestDatabase.kinds.contains(.postgres) else { return }
        let sink = try SMTPSink()
        defer { sink.stop() }
        try sink.setMode(.slow(milliseconds: 50))
        let hooks = try WebhookSink()
        defer { hooks.stop() }
        let smtp = sink.url
        let cluster = try Cluster { configuration in
            configuration.smtpURL = smtp
            configuration.allowPrivateOutbound = true
        }
        defer { cluster.stop() }
        let app = try cluster.a.createApp([
            "name": "Busy", "rate_limits": ["auth_per_minute_per_ip": 1000],
            "webhooks": [["url": .string(hooks.url()), "secret": .string(WebhookTests.secret), "events": ["user.created"]]],
        ])
        let count = 45
        let addresses = (0..<count).map { "user\($0)@example.com" }
        let nodes = cluster.nodes
        let users = concurrently(count) { i in try nodes[i % 3].signUp(app, email: addresses[i])["user"]?["id"]?.stringValue }
            .compactMap { try? $0.get() }.compactMap { $0 }
        #expect(users.count == count)

        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline, try sink.messages().count < count || hooks.deliveries.count < count { usleep(100_000) }
        // Two polls of every worker more: nothing comes twice.
        Thread.sleep(forTimeInterval: 2.5)
        let recipients = try sink.messages().flatMap(\.recipients)
        #expect(recipients.count == count, "mails")
        #expect(Set(recipients) == Set(addresses))
        let deliveries = hooks.deliveries
        #expect(deliveries.count == count, "webhooks")
        #expect(deliveries.allSatisfy { $0.status == 204 })
        #expect(Set(deliveries.compactMap { $0.header("webhook-id") }).count == count, "each event once")
        #expect(Set(deliveries.compactMap { $0.json?["data"]?["user"]?["id"]?.stringValue }) == Set(users))

        let rows = try cluster.a.gatehouse.database.query("SELECT attempts, delivered_at FROM outbox WHERE kind IN ('mail', 'webhook')")
        #expect(rows.count == 2 * count)
        #expect(try rows.allSatisfy { try $0.optionalInt64("delivered_at") != nil && $0.int64("attempts") == 1 })
        let byNode = cluster.nodes.map { $0.gatehouse.outboxWorker.delivered.load(ordering: .relaxed) }
        #expect(byNode.reduce(0, +) == 2 * count, "\(byNode)")
        #expect(byNode.filter { $0 > 0 }.count >= 2, "the workers shared the work: \(byNode)")
    }

    // MARK: - The harness

    static let roomy: JSON = ["name": "Nodes", "rate_limits": ["auth_per_minute_per_ip": 1000]]

    /// Three nodes on one fresh PostgreSQL database; A owns (and finally drops) it.
    struct Cluster {
        let a: TestServer
        let b: TestServer
        let c: TestServer
        var nodes: [TestServer] { [a, b, c] }
        var others: [TestServer] { [b, c] }

        /// `configure` applies to every node: they are one deployment.
        init(clock: any Clock = SystemClock(), configure: (inout Configuration) -> Void = { _ in }) throws {
            let a = try TestServer(.postgres, clock: clock, configure: configure)
            let b: TestServer
            do {
                b = try TestServer(anotherNodeOf: a, clock: clock, configure: configure)
            } catch {
                a.stop()
                throw error
            }
            do {
                c = try TestServer(anotherNodeOf: a, clock: clock, configure: configure)
            } catch {
                b.stop()
                a.stop()
                throw error
            }
            self.a = a
            self.b = b
        }

        func stop() {
            c.stop()
            b.stop()
            a.stop()
        }
    }

    /// When each node first showed a change (seconds after it was made), or nil if not by the deadline.
    struct Propagation: CustomStringConvertible {
        let within: Double
        let seconds: [Double?]
        var allInTime: Bool { seconds.allSatisfy { $0 != nil } }
        var description: String {
            "within \(within) s: " + seconds.map { $0.map { String(format: "%.2f s", $0) } ?? "not seen" }.joined(separator: ", ")
        }
    }

    /// Polls `holds` on every node every 50 ms until it holds on each (once seen, a node is not
    /// asked again), for at most the documented delay plus ``margin``.
    func propagation(within delay: Double, on nodes: [TestServer], _ holds: (TestServer) throws -> Bool) throws -> Propagation {
        let start = ContinuousClock.now
        let deadline = start + .milliseconds(Int((delay + Self.margin) * 1000))
        var seen: [Double?] = Array(repeating: nil, count: nodes.count)
        while true {
            for (i, node) in nodes.enumerated() where seen[i] == nil {
                if try holds(node) { seen[i] = (ContinuousClock.now - start).seconds }
            }
            if seen.allSatisfy({ $0 != nil }) || ContinuousClock.now >= deadline { break }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return Propagation(within: delay + Self.margin, seconds: seen)
    }
}

/// Runs `body(0..<count)` on `count` threads of its own, released together (a dispatch queue
/// would run only as many at once as there are cores), and returns the results in order.
func concurrently<T: Sendable>(_ count: Int, _ body: @escaping @Sendable (Int) throws -> T) -> [Result<T, any Error>] {
    let results = Mutex<[Int: Result<T, any Error>]>([:])
    let gate = DispatchSemaphore(value: 0)
    let group = DispatchGroup()
    for i in 0..<count {
        group.enter()
        Thread {
            gate.wait()
            let result = Result { try body(i) }
            results.withLock { $0[i] = result }
            group.leave()
        }.start()
    }
    for _ in 0..<count { gate.signal() }
    group.wait()
    return results.withLock { all in (0..<count).map { all[$0]! } }
}

extension Duration {
    fileprivate var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
