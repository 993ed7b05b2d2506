import GatehouseCore
import GatehouseTesting
import Testing

/// Emailed codes: sent into the outbox in the flow's own transaction, read back from it here.
@Suite struct EmailCodeTests {
    static let settings: JSON = ["name": "Codes", "sign_in_methods": ["password", "email_code"]]

    @Test(arguments: TestDatabase.kinds)
    func anEmailedCodeSignsInOnceAndMakesAVerifiedAccount(kind: TestDatabaseKind) throws {
        try CoreWorld.with(kind) { world in
            let app = try world.createApp(Self.settings)
            try world.emailFlows.sendSignInCode(app: app, email: "bea@example.com", origin: origin)
            let code = try #require(try world.newestCode(to: "bea@example.com", app: app))
            let wrong = code == "000000" ? "111111" : "000000"
            expectRefusal(.invalidCode) { _ = try world.emailFlows.verifySignInCode(app: app, email: "bea@example.com", code: wrong, origin: origin) }

            let grant = try world.emailFlows.verifySignInCode(app: app, email: "bea@example.com", code: code, origin: origin)
            #expect(grant.isNewUser)
            #expect(grant.user.emailVerified)
            #expect(try world.claims(grant, app: app).userID == grant.user.id)
            // Used up.
            expectRefusal(.invalidCode) { _ = try world.emailFlows.verifySignInCode(app: app, email: "bea@example.com", code: code, origin: origin) }
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func theCodeMailedAtSignUpVerifiesTheAddress(kind: TestDatabaseKind) throws {
        try CoreWorld.with(kind) { world in
            let app = try world.createApp()
            let grant = try world.signUp(app)
            let code = try #require(try world.newestCode(to: "ada@example.com", app: app))
            let (user, _) = try world.emailFlows.confirmVerification(app: app, claims: world.claims(grant, app: app), code: code, origin: origin)
            #expect(user.emailVerified)
            #expect(try world.accounts.me(app: app, claims: world.claims(grant, app: app)).user.emailVerified)
            #expect(try world.events(app, .userEmailVerified).map(\.userID) == [grant.user.id])
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func noCodeIsMailedWhenTheAppTakesNoSignUpsAndTheAddressHasNoAccount(kind: TestDatabaseKind) throws {
        try CoreWorld.with(kind) { world in
            let app = try world.createApp(["name": "Closed", "sign_in_methods": ["password", "email_code"], "allow_signup": false])
            // The same answer as for a known address; only no mail goes out.
            try world.emailFlows.sendSignInCode(app: app, email: "stranger@example.com", origin: origin)
            #expect(try world.mails(to: "stranger@example.com", app: app).isEmpty)
        }
    }
}
