import GatehouseCore
import GatehouseTesting
import Testing

/// Bans and deletions: what they end, and what signing in answers afterwards.
@Suite struct AccountLifecycleTests {
    @Test(arguments: TestDatabase.kinds)
    func aBannedUserCannotSignInAndLosesTheirSessionsUntilUnbanned(kind: TestDatabaseKind) throws {
        try CoreWorld.with(kind) { world in
            let app = try world.createApp()
            let grant = try world.signUp(app)
            let (banned, _) = try world.adminUsers.ban(app: app, id: grant.user.id.rawValue, sanctionCode: "tos-4.2", reason: "spam", suspendedUntil: nil)
            #expect(banned.ban?.sanctionCode == "tos-4.2")
            expectRefusal(.userDisabled) { _ = try world.signIn(app) }
            expectRefusal(.invalidRefreshToken) { _ = try world.refresh(app, grant.refreshToken) }
            expectRefusal(.sessionRevoked) { _ = try world.claims(grant, app: app) }

            _ = try world.adminUsers.unban(app: app, id: grant.user.id.rawValue)
            #expect(try world.signIn(app).user.id == grant.user.id)
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func aSuspensionEndsAtItsTime(kind: TestDatabaseKind) throws {
        try CoreWorld.with(kind) { world in
            let app = try world.createApp()
            let user = try world.signUp(app).user
            let until = world.clock.nowMillis() + 3_600_000
            _ = try world.adminUsers.ban(app: app, id: user.id.rawValue, sanctionCode: "cool-off", reason: nil, suspendedUntil: until)
            expectRefusal(.userDisabled) { _ = try world.signIn(app) }
            world.clock.advance(seconds: 3_601)
            #expect(try world.signIn(app).user.id == user.id)
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func deletingTheAccountErasesItAndEndsItsSessions(kind: TestDatabaseKind) throws {
        try CoreWorld.with(kind) { world in
            let app = try world.createApp()
            let grant = try world.signUp(app)
            try world.deletion.deleteOwnAccount(
                app: app, claims: world.claims(grant, app: app), reason: "moving on", appleAuthorizationCode: nil, origin: origin)
            expectRefusal(.invalidCredential) { _ = try world.signIn(app) }
            expectRefusal(.invalidRefreshToken) { _ = try world.refresh(app, grant.refreshToken) }
            expectRefusal(.sessionRevoked) { _ = try world.claims(grant, app: app) }
            expectRefusal(.notFound) { _ = try world.adminUsers.user(app: app, id: grant.user.id.rawValue) }
            #expect(try world.events(app, .userDeleted).map(\.userID) == [grant.user.id])
            // The address is free again: a new account, not the old one back.
            let again = try world.signUp(app)
            #expect(again.isNewUser && again.user.id != grant.user.id)
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func signingInDuringTheGracePeriodRestoresTheAccountAndLaterThePurgeErasesIt(kind: TestDatabaseKind) throws {
        try CoreWorld.with(kind) { world in
            let app = try world.createApp(["name": "Grace", "deletion_grace_days": 7])
            let grant = try world.signUp(app)
            try world.deletion.deleteOwnAccount(app: app, claims: world.claims(grant, app: app), reason: nil, appleAuthorizationCode: nil, origin: origin)
            expectRefusal(.invalidRefreshToken) { _ = try world.refresh(app, grant.refreshToken) }
            let restored = try world.signIn(app)
            #expect(restored.isRestored && restored.user.id == grant.user.id)

            try world.deletion.deleteOwnAccount(app: app, claims: world.claims(restored, app: app), reason: nil, appleAuthorizationCode: nil, origin: origin)
            world.clock.advance(seconds: 8 * 86_400)
            #expect(try world.deletion.purge(now: world.clock.nowMillis()) >= 1)
            expectRefusal(.invalidCredential) { _ = try world.signIn(app) }
            #expect(try world.events(app, .userPurged).map(\.userID) == [grant.user.id])
        }
    }
}
