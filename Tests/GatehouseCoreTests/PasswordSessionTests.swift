import GatehouseCore
import GatehouseTesting
import Testing

/// Passwords, sessions and refresh tokens, through AccountService with no HTTP in between.
@Suite struct PasswordSessionTests {
    @Test(arguments: TestDatabase.kinds)
    func signingUpThenSigningInWithThePasswordOpensASecondSessionOfTheSameUser(kind: TestDatabaseKind) throws {
        try CoreWorld.with(kind) { world in
            let app = try world.createApp()
            let signedUp = try world.signUp(app)
            #expect(signedUp.isNewUser)
            #expect(signedUp.user.email == "ada@example.com")
            #expect(!signedUp.user.emailVerified)
            #expect(signedUp.identities.map(\.provider) == [.password])

            let signedIn = try world.signIn(app)
            #expect(!signedIn.isNewUser)
            #expect(signedIn.user.id == signedUp.user.id)
            let first = try world.claims(signedUp, app: app)
            let second = try world.claims(signedIn, app: app)
            #expect(first.userID == signedUp.user.id && second.userID == signedUp.user.id)
            #expect(first.sessionID != second.sessionID)
            #expect(Set(try world.sessions.sessions(app: app, claims: second).map(\.id)) == [first.sessionID, second.sessionID])
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func aWrongPasswordAndAnUnknownAddressAreRefusedAlikeAndRecorded(kind: TestDatabaseKind) throws {
        try CoreWorld.with(kind) { world in
            let app = try world.createApp()
            let user = try world.signUp(app).user
            expectRefusal(.invalidCredential) { _ = try world.signIn(app, password: "not the password at all") }
            expectRefusal(.invalidCredential) { _ = try world.signIn(app, "nobody@example.com") }
            let failed = try world.events(app, .userSignInFailed)
            #expect(failed.count == 2)
            #expect(Set(failed.map(\.userID)) == [user.id, nil])
            #expect(try world.events(app, .userSignedIn).count == 1)  // the sign-up's session only
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func signingUpAgainWithATakenAddressIsRefused(kind: TestDatabaseKind) throws {
        try CoreWorld.with(kind) { world in
            let app = try world.createApp()
            _ = try world.signUp(app)
            expectRefusal(.emailAlreadyInUse) { _ = try world.signUp(app) }
            #expect(try world.adminUsers.list(app: app, query: nil, after: nil, limit: 10).users.count == 1)
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func aRefreshRotatesTheTokenAndTheSuccessorRefreshesAgain(kind: TestDatabaseKind) throws {
        try CoreWorld.with(kind) { world in
            let app = try world.createApp()
            let grant = try world.signUp(app)
            let first = try world.refresh(app, grant.refreshToken)
            #expect(first.refreshToken != grant.refreshToken)
            #expect(first.user.id == grant.user.id)
            #expect(try world.claims(first, app: app).sessionID == world.claims(grant, app: app).sessionID)
            let second = try world.refresh(app, first.refreshToken)
            #expect(second.refreshToken != first.refreshToken)
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func theOldTokenWithinTheGraceWindowAnswersTheSameSuccessor(kind: TestDatabaseKind) throws {
        try CoreWorld.with(kind) { world in
            let app = try world.createApp()
            let grant = try world.signUp(app)
            let rotated = try world.refresh(app, grant.refreshToken)
            world.clock.advance(seconds: 5)  // inside the default 10 s: a client's retry of a lost answer
            let retried = try world.refresh(app, grant.refreshToken)
            #expect(retried.refreshToken == rotated.refreshToken)
            _ = try world.refresh(app, rotated.refreshToken)
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func reusingARotatedRefreshTokenEndsTheWholeSession(kind: TestDatabaseKind) throws {
        try CoreWorld.with(kind) { world in
            let app = try world.createApp()
            let grant = try world.signUp(app)
            let rotated = try world.refresh(app, grant.refreshToken)
            world.clock.advance(seconds: 11)  // past the grace window
            expectRefusal(.refreshTokenReused) { _ = try world.refresh(app, grant.refreshToken) }
            // The thief's token and the owner's current one alike are dead now, and so is the access token.
            expectRefusal(.invalidRefreshToken) { _ = try world.refresh(app, rotated.refreshToken) }
            expectRefusal(.sessionRevoked) { _ = try world.claims(rotated, app: app) }
            #expect(try world.events(app, .sessionRefreshReused).count == 1)
            #expect(try world.events(app, .sessionRevoked).first?.data["reason"] == "refresh_reused")
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func signingOutEndsThatSessionAndLeavesTheOthers(kind: TestDatabaseKind) throws {
        try CoreWorld.with(kind) { world in
            let app = try world.createApp()
            let phone = try world.signUp(app)
            let laptop = try world.signIn(app)
            try world.sessions.signOut(app: app, claims: world.claims(phone, app: app), scope: .current, origin: origin)
            expectRefusal(.invalidRefreshToken) { _ = try world.refresh(app, phone.refreshToken) }
            expectRefusal(.sessionRevoked) { _ = try world.claims(phone, app: app) }
            _ = try world.refresh(app, laptop.refreshToken)
        }
    }
}
