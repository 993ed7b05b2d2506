import Foundation
import GatehouseCrypto
import GatehouseTesting
import Synchronization
import Testing

@testable import GatehouseCore

/// A sign-in reads the account, then hashes for tens of milliseconds before it opens the
/// session. A ban or a password change that commits in between ends the sessions it finds, and
/// the new one is not among them yet: the store must refuse it (`insertSession`). Each test here
/// plays the sign-in's last step with the account as it was read before the change.
@Suite struct SignInRaceTests {
    private static let origin = RequestOrigin(ip: nil, userAgent: nil)

    private struct Signed {
        let server: TestServer
        let app: TestServer.CreatedApp
        let context: AppContext
        let data: any AppScopedStore
        let user: User
        let accessToken: String
    }

    private static func signedUp(_ kind: TestDatabaseKind) throws -> Signed {
        let server = try TestServer(kind)
        do {
            let app = try server.createApp(["name": "Race"])
            let session = try server.signUp(app)
            let id = UserID(unchecked: try #require(session["user"]?["id"]?.stringValue))
            let data = server.gatehouse.store.app(AppID(unchecked: app.id))
            return Signed(
                server: server, app: app, context: try #require(try server.gatehouse.directory.app(id: AppID(unchecked: app.id))), data: data,
                user: try #require(try data.users.user(id)), accessToken: try #require(session["access_token"]?.stringValue))
        } catch {
            server.stop()
            throw error
        }
    }

    /// Stores the user's password hashed with other parameters than the test server's (m=1024,
    /// t=1, p=1), so that the next sign-in hashes it again; returns that hash.
    private static func storeHashToRedo(_ signed: Signed) throws -> String {
        let old = try #require(try signed.data.passwords.passwordHash(signed.user.id))
        let other = try Argon2id.hash(password: Array("correct horse battery".utf8), parameters: .init(memoryKiB: 1024, iterations: 2, parallelism: 1))
        #expect(try signed.data.passwords.setPasswordHash(signed.user.id, hash: other, replacing: old, addIdentity: nil, now: signed.server.clock.nowMillis()))
        return other
    }

    private static func liveSessions(_ signed: Signed) throws -> Int {
        try signed.server.gatehouse.database.query("SELECT 1 AS live FROM sessions WHERE ended_at IS NULL").count
    }

    @Test(arguments: TestDatabase.kinds)
    func aSignInThatRacedABanGetsNoSession(_ kind: TestDatabaseKind) throws {
        let signed = try Self.signedUp(kind)
        defer { signed.server.stop() }
        let ban = try signed.server.request("POST", "/v1/admin/users/\(signed.user.id.rawValue)/ban", bearer: signed.app.secretKey, json: ["sanction_code": "spam"])
        #expect(ban.status == 200)
        #expect(try Self.liveSessions(signed) == 0)
        let signInEvents = try signed.server.gatehouse.database.query("SELECT 1 AS signed_in FROM events WHERE type = 'user.signed_in'").count
        // `signed.user` is the reading from before the ban, as a sign-in hashing meanwhile has it.
        let error = #expect(throws: GatehouseError.self) {
            try signed.server.gatehouse.sessions.startSession(app: signed.context, signed.data, user: signed.user, method: .apple, isNewUser: false, origin: Self.origin)
        }
        #expect(error?.code == .userDisabled)
        #expect(error?.extensions["sanction_code"] == "spam")
        #expect(try Self.liveSessions(signed) == 0)
        #expect(try signed.server.gatehouse.database.query("SELECT 1 AS signed_in FROM events WHERE type = 'user.signed_in'").count == signInEvents)
    }

    /// The sign-in's transaction waits for the row the ban's transaction holds, and the ban ends
    /// the sessions before the sign-in's is committed. On PostgreSQL the sign-in's update then
    /// checks its condition again on the banned row; on SQLite it begins after the ban. (If the
    /// sign-in reaches the row only after the commit, it is refused all the same.)
    @Test(arguments: TestDatabase.kinds)
    func aSignInWaitingOnABansTransactionGetsNoSession(_ kind: TestDatabaseKind) throws {
        let signed = try Self.signedUp(kind)
        defer { signed.server.stop() }
        let outcome = Mutex<Result<SessionGrant, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        let now = signed.server.clock.nowMillis()
        try signed.data.transaction { tx in
            #expect(try tx.users.setBan(signed.user.id, Ban(sanctionCode: "spam", reason: nil, suspendedUntil: nil), now: now) != nil)
            Thread.detachNewThread {
                let result = Result {
                    try signed.server.gatehouse.sessions.startSession(
                        app: signed.context, signed.data, user: signed.user, method: .apple, isNewUser: false, origin: Self.origin).session()
                }
                outcome.withLock { $0 = result }
                done.signal()
            }
            Thread.sleep(forTimeInterval: 0.3)  // for the sign-in to reach the user's row
            _ = try tx.sessions.endSessions(of: signed.user.id, keeping: nil, reason: .revoked, now: now)
        }
        #expect(done.wait(timeout: .now() + 30) == .success)
        let result = try #require(outcome.withLock { $0 })
        guard case .failure(let error as GatehouseError) = result else {
            Issue.record("the sign-in was not refused: \(result)")
            return
        }
        #expect(error.code == .userDisabled)
        #expect(try Self.liveSessions(signed) == 0)
    }

    @Test(arguments: TestDatabase.kinds)
    func aPasswordSignInThatRacedAPasswordChangeGetsNoSession(_ kind: TestDatabaseKind) throws {
        let signed = try Self.signedUp(kind)
        defer { signed.server.stop() }
        let checked = try #require(try signed.data.passwords.passwordHash(signed.user.id))
        let change = try signed.server.request(
            "PUT", "/v1/me/password", appKey: signed.app.appKey, bearer: signed.accessToken,
            json: ["current_password": "correct horse battery", "password": "a brand new password"])
        #expect(change.status == 204)
        #expect(try Self.liveSessions(signed) == 1, "the changer's own session")
        let error = #expect(throws: GatehouseError.self) {
            try signed.server.gatehouse.sessions.startSession(
                app: signed.context, signed.data, user: signed.user, method: .password, isNewUser: false, origin: Self.origin, passwordHash: checked)
        }
        #expect(error?.code == .invalidCredential)
        #expect(try Self.liveSessions(signed) == 1)
        // Against the hash the account has now, the same step opens a session.
        let current = try #require(try signed.data.passwords.passwordHash(signed.user.id))
        _ = try signed.server.gatehouse.sessions.startSession(
            app: signed.context, signed.data, user: signed.user, method: .password, isNewUser: false, origin: Self.origin, passwordHash: current)
        #expect(try Self.liveSessions(signed) == 2)
        // Another method proves no password: a password change does not stop it.
        _ = try signed.server.gatehouse.sessions.startSession(app: signed.context, signed.data, user: signed.user, method: .emailCode, isNewUser: false, origin: Self.origin)
        #expect(try Self.liveSessions(signed) == 3)
    }

    /// A password stored with other argon2id parameters is hashed again at sign-in; the session is
    /// then opened against the new hash, not refused for the change the sign-in made itself.
    @Test(arguments: TestDatabase.kinds)
    func aSignInThatRehashesThePasswordGetsItsSession(_ kind: TestDatabaseKind) throws {
        let signed = try Self.signedUp(kind)
        defer { signed.server.stop() }
        let weaker = try Self.storeHashToRedo(signed)
        let signIn = try signed.server.request(
            "POST", "/v1/auth/signin", appKey: signed.app.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"])
        #expect(signIn.status == 200)
        let rehashed = try #require(try signed.data.passwords.passwordHash(signed.user.id))
        #expect(rehashed != weaker)
        #expect(try Self.liveSessions(signed) == 2)
    }

    /// Two sign-ins of one user with the right password, both reading a hash that needs a rehash:
    /// the second to write finds the first one's hash, and signs in against that. On PostgreSQL
    /// the user's row is held so that both reach their rehash before either commits; on SQLite the
    /// held transaction makes the two run one after the other.
    @Test(arguments: TestDatabase.kinds)
    func twoSignInsThatBothRehashThePasswordBothGetASession(_ kind: TestDatabaseKind) throws {
        let signed = try Self.signedUp(kind)
        defer { signed.server.stop() }
        _ = try Self.storeHashToRedo(signed)
        let statuses = Mutex<[Int]>([])
        let group = DispatchGroup()
        try signed.data.transaction { tx in
            let locked = try tx.users.lockUser(signed.user.id)
            #expect(locked != nil)
            for _ in 0..<2 {
                group.enter()
                Thread.detachNewThread {
                    let response = try? signed.server.request(
                        "POST", "/v1/auth/signin", appKey: signed.app.appKey, json: ["email": "ada@example.com", "password": "correct horse battery"])
                    statuses.withLock { $0.append(response?.status ?? 0) }
                    group.leave()
                }
            }
            Thread.sleep(forTimeInterval: 1)  // for both to verify the old hash and wait to replace it
        }
        #expect(group.wait(timeout: .now() + 30) == .success)
        #expect(statuses.withLock { $0 } == [200, 200])
        #expect(try Self.liveSessions(signed) == 3)
    }
}
