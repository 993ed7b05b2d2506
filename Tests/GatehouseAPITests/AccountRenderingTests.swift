import GatehouseCrypto
import GatehouseTesting
import Synchronization
import Testing

@testable import GatehouseCore

/// `GET /v1/me`'s body is kept with the account the cache read (`Account.meBody`). That a
/// change shows at once, on this node and on others, is `AccessTokenRejectionTests`'s.
@Suite struct AccountRenderingTests {
    private final class Counter: Sendable {
        let value = Atomic<Int>(0)
    }

    private let user = User(
        id: UserID.generate(), email: "ada@example.com", emailVerified: true, firstName: "Ada", lastName: nil, createdAt: 1, updatedAt: 1,
        lastSignInAt: nil)

    @Test func anAccountIsRenderedOnceAndEveryCallerGetsTheRenderingKept() async {
        let account = Account(user: user, identities: [], loadedAt: 0)
        let renders = Counter()
        // Eight callers at once, each rendering something of its own: some may render, one
        // rendering is kept, and all of them return that one.
        let bodies = await withTaskGroup(of: [UInt8].self) { group in
            for caller in 0..<8 {
                group.addTask {
                    account.meBody {
                        renders.value.add(1, ordering: .relaxed)
                        return [UInt8(caller)]
                    }
                }
            }
            return await group.reduce(into: [[UInt8]]()) { $0.append($1) }
        }
        #expect(Set(bodies).count == 1)
        #expect(renders.value.load(ordering: .relaxed) >= 1)
        let before = renders.value.load(ordering: .relaxed)
        #expect(account.meBody { renders.value.add(1, ordering: .relaxed); return [99] } == bodies[0])
        #expect(renders.value.load(ordering: .relaxed) == before)
    }

    @Test func anotherReadingOfTheSameAccountIsRenderedAfresh() {
        let first = Account(user: user, identities: [], loadedAt: 0)
        #expect(first.meBody { Array("Ada".utf8) } == Array("Ada".utf8))
        // What the cache reads after a change is another `Account`; nothing carries over.
        let renamed = User(
            id: user.id, email: user.email, emailVerified: true, firstName: "Grace", lastName: nil, createdAt: 1, updatedAt: 2, lastSignInAt: nil)
        let second = Account(user: renamed, identities: [], loadedAt: 1)
        #expect(second.meBody { Array("Grace".utf8) } == Array("Grace".utf8))
        #expect(first.meBody { [] } == Array("Ada".utf8))
    }
}

/// The account cache and the ended-sessions list shard by an identifier's last character.
@Suite struct IdentifierShardTests {
    @Test func eachOfThe32LastCharactersStandsForOneValue() {
        let numbers = Base32.lowercaseAlphabet.map { UserID(unchecked: "usr_" + String(repeating: "a", count: 23) + String(UnicodeScalar($0))).shardNumber }
        #expect(numbers == Array(0..<32))
        // Whatever the text (identifiers come from generate(), but a shard index must never trap).
        let odd = (0..<128).map { UserID(unchecked: String(UnicodeScalar(UInt8($0)))).shardNumber } + [UserID(unchecked: "").shardNumber]
        #expect(odd.allSatisfy { (0..<32).contains($0) })
    }
}

/// `AccountCache` hashes its key by the user alone; the app is still part of the key.
@Suite struct AccountCacheTenancyTests {
    @Test(arguments: TestDatabase.kinds)
    func anAccountCachedForOneAppIsNotAnsweredForAnother(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let home = try server.createApp(["name": "Home"])
        let other = try server.createApp(["name": "Other"])
        let user = UserID(unchecked: try #require(try server.signUp(home)["user"]?["id"]?.stringValue))
        let store = server.gatehouse.store
        let cache = AccountCache(clock: server.clock)
        let homeID = AppID(unchecked: home.id)
        let otherID = AppID(unchecked: other.id)

        #expect(try cache.account(app: homeID, user: user, store: store)?.user.id == user)
        // Same user id, same shard and hash: the cached entry of `home` must not answer.
        #expect(try cache.account(app: otherID, user: user, store: store) == nil)
        #expect(try cache.account(app: homeID, user: user, store: store)?.user.id == user)
        // A change reported for the other app drops nothing of `home`'s: the same entry answers.
        let cached = try #require(try cache.account(app: homeID, user: user, store: store))
        cache.userChanged(app: otherID, user: user)
        #expect(try cache.account(app: homeID, user: user, store: store) === cached)
        cache.userChanged(app: homeID, user: user)
        #expect(try cache.account(app: homeID, user: user, store: store) !== cached)
    }
}
