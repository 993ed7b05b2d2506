import Foundation
import GatehouseCore
import GatehouseMigrations
import GatehouseSQL
import GatehouseTesting
import Testing

/// `users(matching:after:limit:)`, the admin's user search, on every database: the indexed paths
/// (SQLite's trigram table, PostgreSQL's trigram indexes) answer exactly what the scan would.
@Suite struct UserSearchTests {
    /// Two apps on a migrated database, and a clock of creation times.
    private final class Fixture {
        let database: any SQLDatabase
        let app: any AppScopedStore
        let other: any AppScopedStore
        private var time: Int64 = 1_700_000_000_000

        init(_ database: any SQLDatabase) throws {
            self.database = database
            try Migrator(
                database: database,
                migrations: Migrator.load(from: BundledMigrations.directory, dialect: database.dialect, checksum: testChecksum)
            ).migrate()
            for id in ["app_search", "app_other"] {
                try database.execute("""
                    INSERT INTO apps (id, app_key, settings, version, source, created_at, updated_at)
                    VALUES (\(id), \("key_" + id), '{}', 1, 'admin', 0, 0)
                    """)
            }
            let store = SQLStore(database: database)
            app = store.app(AppID(unchecked: "app_search"))
            other = store.app(AppID(unchecked: "app_other"))
        }

        /// A user of `store` (the app by default), created a millisecond after the last unless `tie`.
        @discardableResult
        func add(_ email: String?, _ first: String? = nil, _ last: String? = nil, to store: (any AppScopedStore)? = nil, tie: Bool = false) throws -> User {
            if !tie { time += 1 }
            let user = User(id: .generate(), email: email, emailVerified: false, firstName: first, lastName: last, createdAt: time, updatedAt: time, lastSignInAt: nil)
            try (store ?? app).users.insertUser(user, passwordHash: nil, identity: nil, event: Event(type: .userSignedUp, userID: user.id, sessionID: nil, ip: nil, userAgent: nil, createdAt: time))
            return user
        }

        /// The app's matching emails, newest first, page after page of `limit`.
        func search(_ query: String?, limit: Int = 100) throws -> [String] {
            var found: [String] = []
            var after: (createdAt: Int64, id: UserID)?
            while true {
                let page = try app.users.users(matching: query, after: after, limit: limit).map(\.0)
                found += page.map { $0.email ?? "(none)" }
                guard page.count == limit, let last = page.last else { return found }
                after = (last.createdAt, last.id)
            }
        }

        /// What the scan finds, worked out here from the plain list: ASCII data, so folding case is unambiguous.
        func expected(_ query: String) throws -> [String] {
            var current: [User] = []
            var after: (createdAt: Int64, id: UserID)?
            while true {
                let page = try app.users.users(matching: nil, after: after, limit: 1000).map(\.0)
                current += page
                guard let last = page.last else { break }
                after = (last.createdAt, last.id)
            }
            let needle = query.lowercased()
            return current
                .filter { [$0.email, $0.firstName, $0.lastName].contains { $0?.lowercased().contains(needle) == true } }
                .sorted { ($0.createdAt, $0.id.rawValue) > ($1.createdAt, $1.id.rawValue) }
                .map { $0.email ?? "(none)" }
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func substringsOfEmailAndNamesInAnyCaseFromOneCharacterUp(kind: TestDatabaseKind) throws {
        try withDatabase(kind) { test in
            let fixture = try Fixture(test.database)
            try fixture.add("ada.lovelace@example.com", "Ada", "Lovelace")
            try fixture.add("grace@navy.example", "Grace", "Hopper")
            try fixture.add("alan@example.org", "Alan", "Turing")
            try fixture.add(nil, "Nameless", nil)
            try fixture.add("katherine@nasa.example", nil, "Johnson")
            try fixture.add("ada.lovelace@example.com", "Elsewhere", "Other", to: fixture.other)
            try fixture.add("lovelace@other.example", "Ada", "Lovelace", to: fixture.other)

            #expect(try fixture.search("LOVELACE@EX") == ["ada.lovelace@example.com"], "the middle of the email, any case")
            #expect(try fixture.search("race") == ["grace@navy.example"], "the middle of a first name")
            #expect(try fixture.search("OPPE") == ["grace@navy.example"], "the middle of a last name")
            #expect(try fixture.search("meles") == ["(none)"], "a user without an email")
            #expect(try fixture.search("oth") == [], "another app's users, never")
            for query in ["a", "A", "n", "z", "ad", "AD", "ur", "@", ".e", "example", "xample.", "a.l", "on"] {
                #expect(try fixture.search(query) == (try fixture.expected(query)), "\(query)")
            }
            #expect(try fixture.search("ad") == ["ada.lovelace@example.com"])
            #expect(try fixture.search("z").isEmpty)
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func wildcardsAndTheEscapeAreCharacters(kind: TestDatabaseKind) throws {
        try withDatabase(kind) { test in
            let fixture = try Fixture(test.database)
            try fixture.add("percent%sign@example.com", "Hundred%", nil)
            try fixture.add("under_score@example.com", nil, "Snake_Case")
            try fixture.add("back\\slash@example.com", "Back\\Slash", nil)
            try fixture.add("plain@example.com", "Quote\"d", "O'Brien")
            try fixture.add("pxrcentxsign@example.com", "underxscore", "backxslash")
            let cases: [(String, [String])] = [
                ("%", ["percent%sign@example.com"]),
                ("_", ["under_score@example.com"]),
                ("\\", ["back\\slash@example.com"]),
                ("%s", ["percent%sign@example.com"]),
                ("t%s", ["percent%sign@example.com"]),
                ("r_s", ["under_score@example.com"]),
                ("k\\s", ["back\\slash@example.com"]),
                ("nt%sign", ["percent%sign@example.com"]),
                ("e_ca", ["under_score@example.com"]),
                ("%%", []),
                ("__", []),
                ("\\\\", []),
                ("\"d", ["plain@example.com"]),
                ("te\"d", ["plain@example.com"]),
                ("o'b", ["plain@example.com"]),
                ("\" OR \"", []),
            ]
            for (query, emails) in cases {
                #expect(try fixture.search(query) == emails, "\(query)")
            }
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func changesAreFoundUnderTheNewTextOnly(kind: TestDatabaseKind) throws {
        try withDatabase(kind) { test in
            let fixture = try Fixture(test.database)
            let renamed = try fixture.add("renamed@example.com", "Oldfirst", "Oldlast")
            let moved = try fixture.add("before@example.com", "Mover", nil)
            let gone = try fixture.add("tombstone@example.com", "Tomb", "Stone")
            let erased = try fixture.add("erased@example.com", "Erased", "Person")
            try fixture.add("bystander@example.com", "Oldfield", "Newman")

            _ = try fixture.app.users.updateProfile(renamed.id, firstName: "Newfirst", lastName: nil, photoURL: nil, now: 1)
            #expect(try fixture.search("oldfirst").isEmpty)
            #expect(try fixture.search("oldlast").isEmpty, "a name set to NULL")
            #expect(try fixture.search("newfirst") == ["renamed@example.com"])
            #expect(try fixture.search("oldfi") == ["bystander@example.com"])

            _ = try fixture.app.users.changeEmail(moved.id, from: "before@example.com", to: "after@example.com", now: 2)
            #expect(try fixture.search("before@").isEmpty)
            #expect(try fixture.search("after@") == ["after@example.com"])

            // A deleted account's tombstone: its email and names become NULL.
            try test.database.execute("UPDATE users SET email = NULL, first_name = NULL, last_name = NULL WHERE id = \(gone.id)")
            #expect(try fixture.search("tombstone").isEmpty)
            #expect(try fixture.search("stone").isEmpty)
            try test.database.execute("UPDATE users SET first_name = 'Reborn' WHERE id = \(gone.id)")
            #expect(try fixture.search("reborn") == ["(none)"])

            // An account erased by the deletion's own store call: a tombstone, skipped.
            let deleted = try fixture.add("deleted@example.com", "Deleted", "Account")
            #expect(try fixture.app.deletion.erase(deleted.id, dueBy: nil, now: 3) != nil)
            #expect(try fixture.search("deleted").isEmpty)
            #expect(try fixture.search("account").isEmpty)

            try test.database.execute("DELETE FROM users WHERE id = \(erased.id)")
            #expect(try fixture.search("erased").isEmpty)
            #expect(try fixture.search("person").isEmpty)
            for query in ["o", "ne", "new", "example", "@example.com", "r"] {
                #expect(try fixture.search(query) == (try fixture.expected(query)), "\(query)")
            }
            if test.database.dialect == .sqlite {
                // The contentless index was told every old text exactly.
                try test.database.execute("INSERT INTO user_search (user_search, rank) VALUES ('integrity-check', 0)")
                let rows = try test.database.query("SELECT count(*) AS n FROM user_search_rows").first?.int64("n")
                #expect(rows == 5, "the tombstone keeps its row until the purge")
            }
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func pagesOfASearchNeitherRepeatNorSkip(kind: TestDatabaseKind) throws {
        try withDatabase(kind) { test in
            let fixture = try Fixture(test.database)
            // 45 matches, three to a millisecond (ties broken by id), among others; and 2,050 users
            // sharing "bulk", more than SQLite's index hands over (the scan answers those).
            for n in 0..<90 {
                try fixture.add(n % 2 == 0 ? "pager\(n)@example.com" : "other\(n)@example.com", "Person \(n)", nil, tie: n % 3 != 0)
            }
            try fixture.add("pager-elsewhere@example.com", to: fixture.other)
            try insertBulk(fixture, count: UserSearchTests.bulkCount)
            for (query, limit) in [("pager", 10), ("PAGER", 7), ("ag", 10), ("r1", 4), ("person 1", 5), ("bulk", 100), ("k1", 50), ("bulk-20", 3)] {
                let expected = try fixture.expected(query)
                let found = try fixture.search(query, limit: limit)
                #expect(found == expected, "\(query) by \(limit)")
                #expect(Set(found).count == found.count)
            }
            #expect(try fixture.search("pager", limit: 10).count == 45)
            #expect(try fixture.search("bulk").count == UserSearchTests.bulkCount)
        }
    }

    static let bulkCount = 2_050

    /// Users inserted by one statement (the triggers index them all the same).
    private func insertBulk(_ fixture: Fixture, count: Int) throws {
        var rows: [SQL] = []
        for n in 0..<count {
            let user = User(
                id: .generate(), email: "bulk-\(n)@example.com", emailVerified: false, firstName: nil, lastName: "Bulk",
                createdAt: 1_600_000_000_000 + Int64(n), updatedAt: 0, lastSignInAt: nil)
            rows.append("(\(user.id), 'app_search', \(user.email), 0, NULL, \(user.lastName), \(user.createdAt), 0)")
        }
        try fixture.database.execute("""
            INSERT INTO users (id, app_id, email, email_verified, first_name, last_name, created_at, updated_at)
            VALUES \(rows.joined(separator: ", "))
            """)
    }
}
