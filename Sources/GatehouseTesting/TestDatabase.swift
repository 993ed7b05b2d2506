import Foundation
import GatehouseCore
import GatehouseCrypto
import GatehouseSQL
import PostgresDriver

/// The databases the same tests run on.
public enum TestDatabaseKind: String, Sendable, CaseIterable, CustomStringConvertible {
    case sqlite, postgres
    public var description: String { rawValue }
}

/// A fresh, empty database for one test, removed by `drop()`.
public struct TestDatabase: Sendable {
    public let kind: TestDatabaseKind
    /// What `GATEHOUSE_DATABASE_URL` would say.
    public let configuration: Configuration.Database
    private let cleanup: @Sendable () -> Void

    /// `GATEHOUSE_TEST_POSTGRES_URL` must name a server where the tests may create databases. Without
    /// it the PostgreSQL tests fail — unless `GATEHOUSE_TEST_SKIP_POSTGRES=1` says to leave them out.
    public static var postgresBaseURL: String? { ProcessInfo.processInfo.environment["GATEHOUSE_TEST_POSTGRES_URL"] }
    private static var skipPostgres: Bool { ProcessInfo.processInfo.environment["GATEHOUSE_TEST_SKIP_POSTGRES"] == "1" }

    /// "On both databases", the one way tests say it (`@Test(arguments: TestDatabase.kinds)`):
    /// SQLite always, PostgreSQL unless `GATEHOUSE_TEST_SKIP_POSTGRES=1` leaves it out. A test
    /// only for PostgreSQL asks `TestDatabase.kinds.contains(.postgres)`.
    public static var kinds: [TestDatabaseKind] { skipPostgres ? [.sqlite] : [.sqlite, .postgres] }

    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    /// `postgresBase`: another server than `GATEHOUSE_TEST_POSTGRES_URL`'s (a test's own cluster).
    public static func make(_ kind: TestDatabaseKind, postgresBase: String? = nil) throws -> TestDatabase {
        let suffix = Digest.hex(SecureRandom.bytes(6))
        switch kind {
        case .sqlite:
            let folder = NSTemporaryDirectory() + "gatehouse-test-\(suffix)"
            return TestDatabase(kind: kind, configuration: .sqlite(path: folder + "/gatehouse.db")) {
                try? FileManager.default.removeItem(atPath: folder)
            }
        case .postgres:
            guard let base = postgresBase ?? postgresBaseURL else {
                throw Unavailable(
                    description: "GATEHOUSE_TEST_POSTGRES_URL is not set: start one with scripts/postgres-test-server (or set GATEHOUSE_TEST_SKIP_POSTGRES=1).")
            }
            let name = "gh_test_\(suffix)"
            let admin = try PostgresDatabase(url: base, poolSize: 1)
            defer { admin.close() }
            try admin.execute(SQL(unsafeSQL: "CREATE DATABASE \(name)"))
            return TestDatabase(kind: kind, configuration: .postgres(url: replacingDatabase(in: base, with: name))) {
                guard let admin = try? PostgresDatabase(url: base, poolSize: 1) else { return }
                _ = try? admin.execute(SQL(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"))
                admin.close()
            }
        }
    }

    private init(kind: TestDatabaseKind, configuration: Configuration.Database, cleanup: @escaping @Sendable () -> Void) {
        self.kind = kind
        self.configuration = configuration
        self.cleanup = cleanup
    }

    public func drop() { cleanup() }

    static func replacingDatabase(in url: String, with name: String) -> String {
        var components = URLComponents(string: url)!
        components.path = "/" + name
        return components.string!
    }
}

extension AppScopedStore {
    /// For tests that write through a store directly: `body` in one transaction of a unit of work
    /// with no effects (no webhooks fanned out, nothing revoked or woken). Services run theirs
    /// through the server's ``UnitOfWork``.
    public func transaction<T>(_ body: (any AppScopedStore) throws -> T) throws -> T {
        try UnitOfWork(fanOut: nil, revocations: nil).run(self, body)
    }
}
