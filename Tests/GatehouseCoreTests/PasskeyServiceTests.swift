import GatehouseCore
import GatehouseTesting
import Testing

/// PasskeyService below HTTP (ADR 0028): the second step's entry point, challenge lifetime and
/// purpose, and the challenges the maintenance job prunes.
@Suite struct PasskeyServiceTests {
    static let settings: JSON = [
        "name": "Passkeys", "rate_limits": ["auth_per_minute_per_ip": 1000],
        "passkeys": ["rp_id": "example.com", "origins": ["https://example.com"]],
    ]

    /// An app with passkeys, Ada, and a passkey of hers registered.
    static func registered(_ world: CoreWorld) throws -> (AppContext, SessionGrant, SoftAuthenticator) {
        let app = try world.createApp(Self.settings)
        let ada = try world.signUp(app)
        let authenticator = try SoftAuthenticator(origin: "https://example.com", rpID: "example.com")
        let options = try world.passkeys.creationOptions(app: app, user: ada.user.id, origin: origin)
        _ = try world.passkeys.register(app: app, user: ada.user.id, session: nil, credential: try authenticator.register(options), name: nil, origin: origin)
        return (app, ada, authenticator)
    }

    @Test(arguments: TestDatabase.kinds)
    func theSecondStepTakesOnlyItsOwnUsersPasskeyOverASecondStepChallenge(kind: TestDatabaseKind) throws {
        try CoreWorld.with(kind) { world in
            let (app, ada, authenticator) = try Self.registered(world)
            let options = try world.passkeys.secondStepOptions(app: app, userID: ada.user.id, origin: origin)
            #expect(options["allowCredentials"]?.arrayValue?.first?["id"] == .string(authenticator.credentialIDText))
            let use = try world.passkeys.verifySecondStep(app: app, userID: ada.user.id, credential: try authenticator.assert(options), origin: origin)
            #expect(use.passkey.userID == ada.user.id)
            #expect(use.amr == "hwk")
            #expect(use.passkey.signCount == 2)
            #expect(try !world.passkeys.list(app: app, user: ada.user.id).isEmpty)

            // Another user's second step: the challenge was issued to Bob, the passkey is Ada's.
            let bob = try world.signUp(app, "bob@example.com")
            #expect(try world.passkeys.list(app: app, user: bob.user.id).isEmpty)
            let bobs = try world.passkeys.secondStepOptions(app: app, userID: bob.user.id, origin: origin)
            expectRefusal(.invalidCredential) {
                _ = try world.passkeys.verifySecondStep(app: app, userID: bob.user.id, credential: try authenticator.assert(bobs), origin: origin)
            }
            // A sign-in's challenge is not a second step's, nor the reverse.
            let signIn = try world.passkeys.requestOptions(app: app, purpose: .signIn, user: nil, origin: origin)
            expectRefusal(.invalidCredential) {
                _ = try world.passkeys.verifySecondStep(app: app, userID: ada.user.id, credential: try authenticator.assert(signIn), origin: origin)
            }
            let second = try world.passkeys.secondStepOptions(app: app, userID: ada.user.id, origin: origin)
            expectRefusal(.invalidCredential) { _ = try world.passkeys.signIn(app: app, credential: try authenticator.assert(second), origin: origin) }
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func aChallengeLastsFiveMinutesAndTheMaintenanceJobPrunesItAfterwards(kind: TestDatabaseKind) throws {
        try CoreWorld.with(kind) { world in
            let (app, ada, authenticator) = try Self.registered(world)
            let late = try world.passkeys.requestOptions(app: app, purpose: .signIn, user: nil, origin: origin)
            let inTime = try world.passkeys.requestOptions(app: app, purpose: .signIn, user: nil, origin: origin)
            world.clock.advance(seconds: 299)
            let grant = try world.passkeys.signIn(app: app, credential: try authenticator.assert(inTime), origin: origin)
            #expect(grant.user.id == ada.user.id)
            #expect(try world.claims(grant, app: app).userID == ada.user.id)
            world.clock.advance(seconds: 2)
            expectRefusal(.invalidCredential) { _ = try world.passkeys.signIn(app: app, credential: try authenticator.assert(late), origin: origin) }

            // Two challenges are left: the late one (expired), and one issued now.
            _ = try world.passkeys.requestOptions(app: app, purpose: .signIn, user: nil, origin: origin)
            let maintenance = Maintenance(
                store: try #require(world.store as? any MaintenanceStore),
                policy: MaintenancePolicy(intervalSeconds: 60, refreshGraceSeconds: 10, eventRetentionDays: 30))
            #expect(try maintenance.run(now: world.clock.nowMillis())?.deleted[.webauthnChallenges] == 1)
            world.clock.advance(seconds: 301)
            #expect(try maintenance.run(now: world.clock.nowMillis())?.deleted[.webauthnChallenges] == 1)
        }
    }
}
