import GatehouseCore
import GatehouseCrypto
import GatehouseTesting
import Testing

/// One app's users, tokens and codes mean nothing to another app, whatever service is asked.
@Suite struct TenantIsolationTests {
    @Test(arguments: TestDatabase.kinds)
    func aUserOfOneAppCannotBeSignedInReadOrChangedThroughAnother(kind: TestDatabaseKind) throws {
        try CoreWorld.with(kind) { world in
            let a = try world.createApp(["name": "A"])
            let b = try world.createApp(["name": "B"])
            let user = try world.signUp(a).user
            let id = user.id.rawValue

            expectRefusal(.invalidCredential) { _ = try world.signIn(b) }
            expectRefusal(.notFound) { _ = try world.adminUsers.user(app: b, id: id) }
            #expect(try world.adminUsers.list(app: b, query: nil, after: nil, limit: 10).users.isEmpty)
            #expect(try world.adminUsers.list(app: b, query: id, after: nil, limit: 10).users.isEmpty)
            expectRefusal(.notFound) { _ = try world.adminUsers.ban(app: b, id: id, sanctionCode: "x", reason: nil, suspendedUntil: nil) }
            expectRefusal(.notFound) { try world.adminUsers.endSessions(app: b, id: id) }
            expectRefusal(.notFound) { try world.deletion.deleteByAdmin(app: b, id: id) }

            // Nothing of it touched A's user, and B's log holds nothing of theirs.
            #expect(try world.signIn(a).user.id == user.id)
            #expect(try world.auditLog.page(app: b, EventQuery(limit: 100)).events.allSatisfy { $0.userID == nil })
            // The same address is free in B: another account.
            let inB = try world.signUp(b)
            #expect(inB.isNewUser && inB.user.id != user.id)
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func tokensOfOneAppAreRefusedByAnother(kind: TestDatabaseKind) throws {
        try CoreWorld.with(kind) { world in
            let a = try world.createApp(["name": "A"])
            let b = try world.createApp(["name": "B"])
            let grant = try world.signUp(a)
            expectRefusal(.invalidToken) { _ = try world.tokens.verifyAccessToken(grant.accessToken, app: b) }
            expectRefusal(.invalidRefreshToken) { _ = try world.refresh(b, grant.refreshToken) }
            // B's refusal used nothing up: the token rotates in A as if B had never seen it.
            world.clock.advance(seconds: 11)
            #expect(try world.refresh(a, grant.refreshToken).user.id == grant.user.id)
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func aCodeMailedForOneAppSignsInToNoOther(kind: TestDatabaseKind) throws {
        try CoreWorld.with(kind) { world in
            let settings: JSON = ["name": "Codes", "sign_in_methods": ["password", "email_code"]]
            let a = try world.createApp(settings)
            let b = try world.createApp(settings)
            try world.emailFlows.sendSignInCode(app: a, email: "bea@example.com", origin: origin)
            let code = try #require(try world.newestCode(to: "bea@example.com", app: a))
            #expect(try world.mails(to: "bea@example.com", app: b).isEmpty)
            expectRefusal(.invalidCode) { _ = try world.emailFlows.verifySignInCode(app: b, email: "bea@example.com", code: code, origin: origin) }
            #expect(try world.emailFlows.verifySignInCode(app: a, email: "bea@example.com", code: code, origin: origin).isNewUser)
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func oneAppsSecondFactorsAndSecondStepsMeanNothingToAnother(kind: TestDatabaseKind) throws {
        try CoreWorld.with(kind) { world in
            let a = try world.createApp(["name": "A", "mfa": ["policy": "optional"]])
            let b = try world.createApp(["name": "B", "mfa": ["policy": "optional"]])
            let grant = try world.signUp(a)
            let claims = try world.claims(grant, app: a)
            let enrolment = try world.mfa.beginTOTP(app: a, actor: .session(claims), name: nil, origin: CoreWorld.origin)
            let secret = try #require(Base32.decode(enrolment.secret))
            let code = TOTP.code(secret: secret, step: TOTP.step(at: world.clock.nowSeconds))
            _ = try world.mfa.confirmTOTP(app: a, actor: .session(claims), id: enrolment.id.rawValue, code: code, origin: CoreWorld.origin)
            var mfaToken = ""
            do { _ = try world.signIn(a) } catch let error as GatehouseError where error.code == .mfaRequired {
                mfaToken = error.extensions["mfa_token"]?.stringValue ?? ""
            }
            #expect(mfaToken.hasPrefix("mfa_"))

            // B's stores find none of it.
            let inB = world.store.app(b.id).mfa
            #expect(try inB.totpFactor(enrolment.id, user: grant.user.id) == nil)
            #expect(try inB.secondFactors(of: grant.user.id) == SecondFactors(totp: 0, recoveryCodesLeft: 0, passkeys: 0))
            #expect(try inB.challenge(tokenHash: SessionService.mfaTokenHash(mfaToken), now: world.clock.nowMillis()) == nil)
            #expect(try !inB.useTOTPStep(enrolment.id, user: grant.user.id, step: Int64.max, now: world.clock.nowMillis()))
            #expect(try world.mfa.factors(app: b, user: grant.user.id).isEmpty)
            // B's services refuse it.
            expectRefusal(.invalidMFAToken) { _ = try world.mfa.verify(app: b, mfaToken: mfaToken, proof: .totp(code), origin: CoreWorld.origin) }
            expectRefusal(.invalidMFAToken) { _ = try world.mfa.secondStepUser(app: b, mfaToken: mfaToken) }
            expectRefusal(.notFound) { try world.mfa.removeByAdmin(app: b, user: grant.user.id.rawValue, factor: enrolment.id.rawValue) }
            // And A still has it all.
            #expect(try world.mfa.factors(app: a, user: grant.user.id).map(\.id) == [enrolment.id.rawValue])
            #expect(try world.mfa.secondStepUser(app: a, mfaToken: mfaToken) == grant.user.id)
        }
    }
}
