import Foundation
import GatehouseCore
import GatehouseMigrations
import GatehouseSQL
import GatehouseTesting
import Testing

/// The maintenance job on every database: it deletes exactly what is past its time, in batches,
/// through indexes, one round in the cluster at a time, and never a token that reuse detection needs.
@Suite struct MaintenanceTests {
    static let now: Int64 = 1_800_000_000_000
    static let minute: Int64 = 60_000
    static let day: Int64 = 86_400_000

    /// A migrated database with one app and one user, its store and a maintenance job on it.
    final class Fixture {
        let database: any SQLDatabase
        let store: SQLStore
        let app: any AppScopedStore
        let user: UserID
        private var serial = 0

        init(_ database: any SQLDatabase) throws {
            self.database = database
            try Migrator(
                database: database, migrations: Migrator.load(from: BundledMigrations.directory, dialect: database.dialect, checksum: testChecksum)
            ).migrate()
            try database.execute("INSERT INTO apps (id, app_key, settings, version, source, created_at, updated_at) VALUES ('app_m', 'key_m', '{}', 1, 'admin', 0, 0)")
            store = SQLStore(database: database)
            app = store.app(AppID(unchecked: "app_m"))
            let joined = MaintenanceTests.now - 100 * MaintenanceTests.day
            let user = User(id: .generate(), email: "ada@example.com", emailVerified: true, firstName: nil, lastName: nil, createdAt: joined, updatedAt: joined, lastSignInAt: nil)
            try app.users.insertUser(user, passwordHash: nil, identity: nil, event: Event(type: .userSignedUp, userID: user.id, sessionID: nil, ip: nil, userAgent: nil, createdAt: joined))
            self.user = user.id
        }

        func maintenance(batchSize: Int = 2, eventRetentionDays: Int = 400) -> Maintenance {
            var policy = MaintenancePolicy(intervalSeconds: 300, refreshGraceSeconds: 10, eventRetentionDays: eventRetentionDays)
            policy.batchSize = batchSize
            policy.pauseBetweenBatches = .zero
            return Maintenance(store: store, policy: policy)
        }

        func nextToken() -> String {
            serial += 1
            return "token-\(serial)"
        }

        /// A session created at `createdAt` that lives until `expiresAt`, refreshed `refreshes`
        /// times a minute apart; returns it with its tokens, oldest first (the last is current).
        func session(createdAt: Int64, expiresAt: Int64, refreshes: Int = 0) throws -> (SessionID, [String]) {
            let session = Session(
                id: .generate(), userID: user, method: .password, authTime: createdAt, createdAt: createdAt, lastUsedAt: createdAt, expiresAt: expiresAt,
                ip: nil, userAgent: nil)
            var tokens = [nextToken()]
            try app.sessions.insertSession(session, refreshTokenHash: tokens[0], event: Event(type: .userSignedIn, userID: user, sessionID: session.id, ip: nil, userAgent: nil, createdAt: createdAt), passwordHash: nil)
            for index in 0..<refreshes {
                let successor = nextToken()
                let outcome = try refresh(tokens.last!, successor, at: createdAt + Int64(index + 1) * MaintenanceTests.minute)
                guard case .rotated = outcome else { throw SetupError("refresh \(index) was \(outcome)") }
                tokens.append(successor)
            }
            return (session.id, tokens)
        }

        func refresh(_ presented: String, _ successor: String, at now: Int64) throws -> RefreshOutcome {
            try app.sessions.rotateRefreshToken(
                presentedHash: presented, successorHash: successor, graceMillis: 10_000, usedSince: 0, origin: RequestOrigin(ip: nil, userAgent: nil), now: now,
                reuseEvents: { _ in [] })
        }

        func end(_ session: SessionID, at time: Int64) throws {
            #expect(try app.sessions.endSession(session, user: user, reason: .signedOut, now: time))
        }

        func count(_ table: String, _ condition: SQL = "TRUE") throws -> Int {
            try database.query("SELECT COUNT(*) AS n FROM \(unsafeSQL: table) WHERE \(condition)").first?.int("n") ?? -1
        }

        func tokens(of session: SessionID) throws -> Int { try count("refresh_tokens", "session_id = \(session)") }
        func exists(_ session: SessionID) throws -> Bool { try count("sessions", "id = \(session)") == 1 }
    }

    @Test(arguments: TestDatabase.kinds)
    func aRoundDeletesWhatIsPastItsTimeAndKeepsWhatIsLiveOrInsideItsWindow(kind: TestDatabaseKind) throws {
        try withDatabase(kind) { test in
            let f = try Fixture(test.database)
            let now = Self.now, minute = Self.minute, day = Self.day
            // Sessions: live (refreshed five times), ended 2 minutes ago (past grace + margin), ended 30 s ago
            // (inside it), ended 31 days ago, expired 31 days ago, expired 2 hours ago, ended 29 days ago.
            let (live, liveTokens) = try f.session(createdAt: now - day, expiresAt: now + 10 * day, refreshes: 5)
            let (endedLately, _) = try f.session(createdAt: now - day, expiresAt: now + 10 * day, refreshes: 2)
            try f.end(endedLately, at: now - 2 * minute)
            let (endingNow, _) = try f.session(createdAt: now - day, expiresAt: now + 10 * day, refreshes: 2)
            try f.end(endingNow, at: now - 30_000)
            let (endedLongAgo, _) = try f.session(createdAt: now - 40 * day, expiresAt: now + day, refreshes: 3)
            try f.end(endedLongAgo, at: now - 31 * day)
            let (expiredLongAgo, _) = try f.session(createdAt: now - 61 * day, expiresAt: now - 31 * day, refreshes: 3)
            let (expiredLately, _) = try f.session(createdAt: now - 30 * day, expiresAt: now - 2 * 3_600_000, refreshes: 1)
            let (ended29DaysAgo, _) = try f.session(createdAt: now - 40 * day, expiresAt: now + day, refreshes: 1)
            try f.end(ended29DaysAgo, at: now - 29 * day)

            // The rest, each one past its time and one inside it.
            for (id, expires) in [("flow_old", now - 1), ("flow_new", now + 10 * minute)] {
                try f.database.execute("""
                    INSERT INTO web_flows (id, app_id, binding_hash, nonce, redirect_uri, created_at, expires_at)
                    VALUES (\(id), 'app_m', 'b', 'n', 'https://app.example/cb', \(expires - 10 * minute), \(expires))
                    """)
            }
            for (hash, expires) in [("code_old", now - 1), ("code_new", now + minute)] {
                try f.database.execute("""
                    INSERT INTO login_codes (code_hash, app_id, user_id, method, is_new_user, created_at, expires_at)
                    VALUES (\(hash), 'app_m', \(f.user), 'password', 0, \(expires - minute), \(expires))
                    """)
            }
            for (hash, expires) in [("mfa_old", now - 1), ("mfa_new", now + minute)] {
                try f.database.execute("""
                    INSERT INTO mfa_challenges (token_hash, app_id, user_id, method, is_new_user, enroll, created_at, expires_at)
                    VALUES (\(hash), 'app_m', \(f.user), 'password', 0, 0, \(expires - 5 * minute), \(expires))
                    """)
            }
            // An emailed-code row is stale when its code, its send window and its last send are all over an hour old.
            for (subject, lastSent, window, expires) in [
                ("stale", now - 2 * 3_600_000, now - 2 * 3_600_000, now - 2 * 3_600_000), ("sent_lately", now - 10 * minute, now - 2 * 3_600_000, now - 2 * 3_600_000),
                ("window_open", now - 2 * 3_600_000, now - 10 * minute, now - 2 * 3_600_000),
            ] {
                try f.database.execute("""
                    INSERT INTO email_codes (app_id, purpose, subject, expires_at, last_sent_at, window_start, window_sends)
                    VALUES ('app_m', 'verify_email', \(subject), \(expires), \(lastSent), \(window), 1)
                    """)
            }
            for (key, expires) in [("nonce_old", now - 1), ("nonce_new", now + minute)] {
                try f.database.execute("INSERT INTO provider_nonces (nonce_key, expires_at) VALUES (\(key), \(expires))")
            }
            // The longest rate-limit window is a day (failed code checks); a minute's margin.
            for (bucket, start) in [("stale", now - day - 2 * minute), ("current", now - day + 10 * minute)] {
                try f.database.execute("INSERT INTO rate_limits (app_id, bucket, window_start, hits) VALUES ('app_m', \(bucket), \(start), 3)")
            }
            for (id, delivered, dead) in [
                ("obx_delivered_old", Optional(now - 8 * day), Int64?.none), ("obx_delivered_new", now - 6 * day, nil), ("obx_due", nil, nil),
                ("obx_dead_old", nil, now - 8 * day),
            ] {
                try f.database.execute("""
                    INSERT INTO outbox (id, kind, idempotency_key, payload, next_attempt_at, created_at, delivered_at, dead_at)
                    VALUES (\(id), 'mail', \(id), '', \(now - 9 * day), \(now - 9 * day), \(delivered), \(dead))
                    """)
            }
            // A breaker row no failure touched for 30 days goes; a recent one stays.
            for (destination, updated) in [("old.example:443", now - 31 * day), ("new.example:443", now - 29 * day)] {
                try f.database.execute("""
                    INSERT INTO outbox_destinations (app_id, destination, failures, paused_until, updated_at)
                    VALUES ('app_m', \(destination), 7, \(updated + 60_000), \(updated))
                    """)
            }
            // Five events past the 400 days (more than one batch of two), one inside.
            for age in [401, 402, 403, 404, 405, 399] {
                try f.app.auditLog.record(Event(type: .userSignInFailed, userID: nil, sessionID: nil, ip: nil, userAgent: nil, createdAt: now - Int64(age) * day))
            }

            let report = try #require(try f.maintenance().run(now: now))
            #expect(report.deleted[.tokensOfEndedSessions] == 3 + 4)
            #expect(report.deleted[.tokensOfExpiredSessions] == 4 + 2)
            #expect(report.deleted[.endedSessions] == 1)
            #expect(report.deleted[.expiredSessions] == 1)
            #expect(report.deleted[.webFlows] == 1)
            #expect(report.deleted[.loginCodes] == 1)
            #expect(report.deleted[.mfaChallenges] == 1)
            #expect(report.deleted[.emailCodes] == 1)
            #expect(report.deleted[.providerNonces] == 1)
            #expect(report.deleted[.rateLimits] == 1)
            #expect(report.deleted[.deliveredOutbox] == 1)
            #expect(report.deleted[.events] == 5)
            #expect(report.deleted[.outboxDestinations] == 1)

            // A live session keeps every token (reuse detection), and one that just ended keeps them for the grace margin.
            #expect(try f.tokens(of: live) == 6)
            #expect(try f.tokens(of: endingNow) == 3)
            // Tokens of sessions over for more than the margin go; the sessions stay 30 days.
            for over in [endedLately, expiredLately] {
                #expect(try f.exists(over))
                #expect(try f.tokens(of: over) == 0)
            }
            // The early sweep looks back a day: a session over before that (a job that was not running
            // then) keeps its tokens until it goes itself.
            #expect(try f.exists(ended29DaysAgo) && f.tokens(of: ended29DaysAgo) == 2)
            #expect(try !f.exists(endedLongAgo) && !f.exists(expiredLongAgo))
            #expect(try f.tokens(of: endedLongAgo) == 0 && f.tokens(of: expiredLongAgo) == 0)
            #expect(try f.count("web_flows") == 1 && f.count("web_flows", "id = 'flow_new'") == 1)
            #expect(try f.count("login_codes") == 1 && f.count("login_codes", "code_hash = 'code_new'") == 1)
            #expect(try f.count("mfa_challenges") == 1 && f.count("mfa_challenges", "token_hash = 'mfa_new'") == 1)
            #expect(try f.count("email_codes") == 2 && f.count("email_codes", "subject = 'stale'") == 0)
            #expect(try f.count("provider_nonces") == 1 && f.count("provider_nonces", "nonce_key = 'nonce_new'") == 1)
            #expect(try f.count("rate_limits") == 1 && f.count("rate_limits", "bucket = 'current'") == 1)
            #expect(try f.count("outbox") == 3 && f.count("outbox", "id = 'obx_delivered_old'") == 0)
            // Events: the sign-ins of the seven sessions, the sign-up, and the 399-day-old one.
            #expect(try f.count("events", "created_at < \(now - 398 * day)") == 1)

            // Reuse detection still sees the live session's oldest token: presented again, it ends the session.
            #expect(try f.refresh(liveTokens[5], f.nextToken(), at: now) != .invalid)
            guard case .reused(let session, endedNow: true) = try f.refresh(liveTokens[0], f.nextToken(), at: now + minute) else {
                Issue.record("an old token of a live session was not found as reused")
                return
            }
            #expect(session.id == live)

            // Nothing more is due: a second round deletes nothing.
            #expect(try f.maintenance().run(now: now)?.rows == 0)
        }
    }

    /// The smaller twin of the benchmark (bench/maintenance): 2,000 refreshes on 20 sessions, half
    /// of them signed out. Live sessions keep one row per refresh; the others are gone in two steps.
    @Test(arguments: TestDatabase.kinds)
    func twoThousandRefreshesLeaveWhatIsLive(kind: TestDatabaseKind) throws {
        try withDatabase(kind) { test in
            let f = try Fixture(test.database)
            let start = Self.now - Self.day
            var sessions: [SessionID] = []
            for _ in 0..<20 { sessions.append(try f.session(createdAt: start, expiresAt: start + 30 * Self.day, refreshes: 100).0) }
            #expect(try f.count("refresh_tokens") == 20 * 101)
            for session in sessions.prefix(10) { try f.end(session, at: Self.now) }
            let job = f.maintenance(batchSize: 500)

            let soon = try #require(try job.run(now: Self.now + 2 * Self.minute))
            #expect(soon.deleted[.tokensOfEndedSessions] == 10 * 101)
            #expect(try f.count("refresh_tokens") == 10 * 101)
            #expect(try f.count("sessions") == 20)

            // A month after the others expired too, nothing of them is left.
            let later = try #require(try job.run(now: start + 61 * Self.day))
            #expect(later.deleted[.endedSessions] == 10 && later.deleted[.expiredSessions] == 10)
            #expect(try f.count("refresh_tokens") == 0)
            #expect(try f.count("sessions") == 0)
        }
    }

    /// Every statement of the job finds its rows through an index on its time column: SQLite's
    /// plan searches (never scans) the table, PostgreSQL's, with sequential scans off, has an index
    /// condition on that column (a full index scan with a filter does not count).
    @Test(arguments: TestDatabase.kinds)
    func everyStatementOfTheJobUsesAnIndex(kind: TestDatabaseKind) throws {
        try withDatabase(kind) { test in
            let f = try Fixture(test.database)
            let columns: [MaintenanceTask: (table: String, column: String)] = [
                .tokensOfEndedSessions: ("sessions", "ended_at"), .tokensOfExpiredSessions: ("sessions", "expires_at"),
                .endedSessions: ("sessions", "ended_at"), .expiredSessions: ("sessions", "expires_at"), .webFlows: ("web_flows", "expires_at"),
                .loginCodes: ("login_codes", "expires_at"), .mfaChallenges: ("mfa_challenges", "expires_at"), .emailCodes: ("email_codes", "last_sent_at"),
                .providerNonces: ("provider_nonces", "expires_at"), .webauthnChallenges: ("webauthn_challenges", "expires_at"),
                .appleNotifications: ("apple_notifications", "received_at"), .rateLimits: ("rate_limits", "window_start"),
                .deliveredOutbox: ("outbox", "delivered_at"), .deadOutboxPayloads: ("outbox", "dead_at"), .events: ("events", "created_at"),
                .outboxDestinations: ("outbox_destinations", "updated_at"),
            ]
            for task in MaintenanceTask.allCases {
                let (table, column) = try #require(columns[task], "\(task) has no expected index")
                let statement = SQLStore.maintenanceStatement(task, in: MaintenanceWindow(from: .min, to: Self.now), limit: 1_000, dialect: kind.dialect)
                let plan: [String] = try f.database.withConnection { db in
                    switch db.dialect {
                    case .sqlite:
                        return try db.query("EXPLAIN QUERY PLAN " + statement).map { try $0.string("detail") }
                    case .postgres:
                        try db.execute("SET enable_seqscan = off")
                        defer { _ = try? db.execute("RESET enable_seqscan") }
                        return try db.query("EXPLAIN " + statement).map { try $0.string("QUERY PLAN") }
                    }
                }
                let text = plan.joined(separator: "\n")
                switch kind.dialect {
                case .sqlite:
                    #expect(!plan.contains { $0.hasPrefix("SCAN ") }, "\(task) scans a table:\n\(text)")
                    #expect(plan.contains { $0.hasPrefix("SEARCH \(table) USING") && $0.contains("(\(column)") }, "\(task) does not search \(table) by \(column):\n\(text)")
                case .postgres:
                    #expect(!text.contains("Seq Scan"), "\(task) scans a table:\n\(text)")
                    #expect(plan.contains { $0.contains("Index Cond:") && $0.contains(column) }, "\(task) has no index condition on \(column):\n\(text)")
                }
            }
        }
    }

    /// Two nodes on one PostgreSQL: while one holds a round, the other's round does not run; once
    /// it is over (its lease given back, ADR 0034), the other's does.
    @Test func aRoundOnPostgreSQLExcludesEveryOtherNodesRound() throws {
        guard TestDatabase.kinds.contains(.postgres) else { return }
        try withDatabase(.postgres, poolSize: 1) { test in
            let f = try Fixture(test.database)
            try f.app.auditLog.record(Event(type: .userSignInFailed, userID: nil, sessionID: nil, ip: nil, userAgent: nil, createdAt: Self.now - 500 * Self.day))
            let otherDatabase = try test.openAnother()
            defer { otherDatabase.close() }
            let otherNode = Maintenance(
                store: SQLStore(database: otherDatabase), policy: MaintenancePolicy(intervalSeconds: 300, refreshGraceSeconds: 10, eventRetentionDays: 400))

            let whileHeld = try f.store.exclusively { _ in try otherNode.run(now: Self.now) }
            #expect(whileHeld == .some(nil), "the other node ran a round while this one held the lock")
            #expect(try f.count("events", "created_at < \(Self.now - 400 * Self.day)") == 1)

            // The turn is given back with the round.
            #expect(try otherNode.run(now: Self.now)?.deleted[.events] == 1)
            // And this node's next round takes it again (the other released it too).
            #expect(try f.maintenance().run(now: Self.now) != nil)
        }
    }

    /// One table's trouble does not hold up the others: the round goes on, then reports the failure.
    @Test func aFailingTaskDoesNotStopTheOthers() throws {
        final class Round: MaintenanceRound, @unchecked Sendable {  // used on the test's thread only
            var tried: [MaintenanceTask] = []
            func delete(_ task: MaintenanceTask, in window: MaintenanceWindow, limit: Int) throws -> Int {
                tried.append(task)
                if task == .webFlows { throw SetupError("web_flows is unwell") }
                return 0
            }
            func compact(pagesPerStep: Int) throws -> Int { 0 }
        }
        struct Store: MaintenanceStore {
            let round: Round
            func exclusively<T>(_ body: (any MaintenanceRound) throws -> T) throws -> T? { try body(round) }
        }
        let round = Round()
        let job = Maintenance(store: Store(round: round), policy: MaintenancePolicy(intervalSeconds: 300, refreshGraceSeconds: 10, eventRetentionDays: 400))
        #expect(throws: SetupError.self) { try job.run(now: Self.now) }
        #expect(Set(round.tried) == Set(MaintenanceTask.allCases))
        #expect(round.tried.last == .outboxDestinations, "the failure stopped nothing after it")
    }

    /// A round stops at its time limit, at a batch's end, and the next goes on from there.
    @Test(arguments: TestDatabase.kinds)
    func aRoundStopsAtItsTimeLimitAndTheNextGoesOn(kind: TestDatabaseKind) throws {
        try withDatabase(kind) { test in
            let f = try Fixture(test.database)
            for age in 0..<5 {
                try f.app.auditLog.record(Event(type: .userSignInFailed, userID: nil, sessionID: nil, ip: nil, userAgent: nil, createdAt: Self.now - Int64(401 + age) * Self.day))
            }
            var policy = MaintenancePolicy(intervalSeconds: 300, refreshGraceSeconds: 10, eventRetentionDays: 400)
            policy.batchSize = 2
            policy.pauseBetweenBatches = .zero
            policy.roundTimeLimit = .zero
            let job = Maintenance(store: f.store, policy: policy)
            // Each round runs one batch: the first finds no tokens due and stops, so the events wait for later rounds.
            var rounds = 0
            while try f.count("events", "created_at < \(Self.now - 400 * Self.day)") > 0 {
                let report = try #require(try job.run(now: Self.now))
                #expect(report.batches == 1 && report.stoppedEarly)
                rounds += 1
                try #require(rounds < 50, "the rounds make no progress")
            }
            #expect(try f.count("events", "created_at < \(Self.now - 400 * Self.day)") == 0)
        }
    }

    /// A new SQLite file gives back the pages the job frees: it is smaller after the round.
    @Test func aNewSQLiteFileShrinksAfterARound() throws {
        try withDatabase(.sqlite) { test in
            let f = try Fixture(test.database)
            func pragma(_ name: String) throws -> Int64 { try f.database.query("PRAGMA \(unsafeSQL: name)").first?.int64(name) ?? -1 }
            #expect(try pragma("auto_vacuum") == 2, "not INCREMENTAL")
            let padding = String(repeating: "x", count: 2_000)
            try f.database.transaction { db in
                for index in 0..<3_000 {
                    try db.execute("""
                        INSERT INTO events (id, app_id, type, data, created_at) VALUES (\("evt_\(index)"), 'app_m', 'user.sign_in_failed', \(padding), 1)
                        """)
                }
            }
            let before = try pragma("page_count")
            let report = try #require(try f.maintenance(batchSize: 1_000).run(now: Self.now))
            #expect(report.deleted[.events] == 3_000)
            #expect(report.pagesFreed > 1_000)
            #expect(try pragma("freelist_count") == 0)
            #expect(try pragma("page_count") < before - 1_000)
        }
    }
}
