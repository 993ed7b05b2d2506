import Foundation
import GatehouseCore
import GatehouseMigrations
import GatehouseSQL
import GatehouseTesting
import Synchronization
import Testing

/// What follows a unit of work (``UnitOfWork``), on every database: an event recorded in it
/// queues its webhook item in the same transaction, and only once it has committed are the
/// sessions it ended revoked on this node and the outbox woken.
@Suite struct UnitOfWorkEffectsTests {
    /// A fan-out that queues one webhook item per `session.revoked`.
    private struct OneItemPerRevocation: EventFanOut {
        func wants(_ type: EventType, app: AppID) -> Bool { type == .sessionRevoked }
        func items(for event: Event, app: AppID, store: any AppScopedStore) throws -> [NewOutboxItem] {
            [NewOutboxItem(appID: app, kind: .webhook, idempotencyKey: "webhook:\(event.id.rawValue)", payload: "{}", sealed: false)]
        }
    }

    private struct Marker: Error {}

    private final class Counter: Sendable {
        private let value = Atomic<Int>(0)
        func add() { value.add(1, ordering: .relaxed) }
        var count: Int { value.load(ordering: .relaxed) }
    }

    private final class Fixture {
        let database: any SQLDatabase
        let app: any AppScopedStore
        let revocations: RevocationList
        let wakes = Counter()
        let units: UnitOfWork
        let user = UserID.generate()
        let now: Int64 = 1_700_000_000_000

        init(_ database: any SQLDatabase) throws {
            self.database = database
            try Migrator(
                database: database,
                migrations: Migrator.load(from: BundledMigrations.directory, dialect: database.dialect, checksum: testChecksum)
            ).migrate()
            try database.execute("""
                INSERT INTO apps (id, app_key, settings, version, source, created_at, updated_at) VALUES ('app_units', 'key_units', '{}', 1, 'admin', 0, 0)
                """)
            let store = SQLStore(database: database)
            app = store.app(AppID(unchecked: "app_units"))
            // Polls once a day: what it knows of this node's ends, the unit of work told it.
            revocations = RevocationList(store: store, clock: ManualClock(millis: now), pollEveryMillis: 86_400_000)
            units = UnitOfWork(fanOut: OneItemPerRevocation(), revocations: revocations, wakeOutbox: { [wakes] in wakes.add() })
            try app.users.insertUser(
                User(id: user, email: "a@example.com", emailVerified: true, firstName: nil, lastName: nil, createdAt: now, updatedAt: now, lastSignInAt: nil),
                passwordHash: nil, identity: nil, event: Event(type: .userSignedUp, userID: user, sessionID: nil, ip: nil, userAgent: nil, createdAt: now))
        }

        func startSession() throws -> SessionID {
            let session = Session(
                id: .generate(), userID: user, method: .password, authTime: now, createdAt: now, lastUsedAt: now, expiresAt: now + 86_400_000, ip: nil, userAgent: nil)
            try app.sessions.insertSession(
                session, refreshTokenHash: "hash-\(session.id.rawValue)",
                event: Event(type: .userSignedIn, userID: user, sessionID: session.id, ip: nil, userAgent: nil, createdAt: now), passwordHash: nil)
            return session.id
        }

        /// Ends `session` and records its `session.revoked`, in one unit of work.
        func revoke(_ session: SessionID, then: () throws -> Void = {}) throws {
            try units.run(app) { tx in
                #expect(try tx.sessions.endSession(session, user: user, reason: .revoked, now: now))
                try tx.auditLog.record(Event(type: .sessionRevoked, userID: user, sessionID: session, ip: nil, userAgent: nil, createdAt: now))
                // Not before the commit.
                #expect(!revocations.isEnded(session))
                #expect(wakes.count == 0)
                try then()
            }
        }

        func webhookItems() throws -> Int64 {
            try database.query("SELECT count(*) AS n FROM outbox WHERE kind = 'webhook'").first?.int64("n") ?? -1
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func aUnitThatRollsBackQueuesNoWebhookAndRevokesNothing(kind: TestDatabaseKind) throws {
        try withDatabase(kind) { test in
            let f = try Fixture(test.database)
            let session = try f.startSession()
            #expect(throws: Marker.self) { try f.revoke(session) { throw Marker() } }
            #expect(try f.webhookItems() == 0)
            #expect(!f.revocations.isEnded(session))
            #expect(f.wakes.count == 0)
            #expect(try f.app.sessions.session(session)?.endedAt == nil)
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func aUnitThatCommitsQueuesItsWebhookAndRevokesAfterTheCommit(kind: TestDatabaseKind) throws {
        try withDatabase(kind) { test in
            let f = try Fixture(test.database)
            let session = try f.startSession()
            try f.revoke(session)
            #expect(try f.webhookItems() == 1)
            #expect(f.revocations.isEnded(session))
            #expect(f.wakes.count == 1)
        }
    }
}
