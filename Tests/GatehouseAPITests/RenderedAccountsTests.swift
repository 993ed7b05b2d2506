import GatehouseCore
import Testing

@testable import GatehouseAPI

@Suite struct RenderedAccountsTests {
    private let app = AppID.generate()

    private func user(_ id: UserID, firstName: String = "Ada") -> User {
        User(id: id, email: "ada@example.com", emailVerified: true, firstName: firstName, lastName: nil, createdAt: 1, updatedAt: 1, lastSignInAt: nil)
    }

    @Test func aBodyIsRenderedOnceForTheSameAccountAndAgainWhenAnythingChanged() {
        let rendered = RenderedAccounts()
        var renders = 0
        func body(_ user: User, _ identities: [Identity]) -> [UInt8] {
            rendered.body(app: app, user: user, identities: identities) {
                renders += 1
                return Array("\(user.firstName ?? "") \(identities.count) \(renders)".utf8)
            }
        }
        let id = UserID.generate()
        let password = Identity(provider: "password", subject: "ada@example.com", email: "ada@example.com", createdAt: 1)
        let first = body(user(id), [password])
        #expect(body(user(id), [password]) == first)
        #expect(renders == 1)
        #expect(String(decoding: body(user(id, firstName: "Grace"), [password]), as: UTF8.self) == "Grace 1 2")
        let apple = Identity(provider: "apple", subject: "001.apple", email: nil, createdAt: 2)
        #expect(String(decoding: body(user(id, firstName: "Grace"), [password, apple]), as: UTF8.self) == "Grace 2 3")
        #expect(renders == 3)
        // The same account under another app is another entry (ids are random; the key holds the app all the same).
        _ = rendered.body(app: AppID.generate(), user: user(id, firstName: "Grace"), identities: [password, apple]) {
            renders += 1
            return []
        }
        #expect(renders == 4)
    }

    @Test func aBodyGoesWhenTheAccountCacheDropsTheAccount() {
        let rendered = RenderedAccounts()
        let cache = AccountCache(clock: SystemClock(), alsoInvalidate: rendered)
        let id = UserID.generate()
        var renders = 0
        for _ in 0..<2 { _ = rendered.body(app: app, user: user(id), identities: []) { renders += 1; return [1] } }
        #expect(renders == 1)
        // A change committed on this node (or seen by the poll), a deletion: the body goes with the entry.
        cache.userChanged(app: app, user: id)
        _ = rendered.body(app: app, user: user(id), identities: []) { renders += 1; return [1] }
        #expect(renders == 2)
    }

    @Test func itKeepsAtMostFourThousandBodies() {
        let rendered = RenderedAccounts()
        let ids = (0..<5_000).map { _ in UserID.generate() }
        for id in ids { _ = rendered.body(app: app, user: user(id), identities: []) { [1] } }
        var renders = 0
        for id in ids { _ = rendered.body(app: app, user: user(id), identities: []) { renders += 1; return [1] } }
        #expect(renders >= 5_000 - 4_096)
    }
}
