import GatehouseCore
import GatehouseCrypto
import GatehouseOutbound
import GatehouseProviders
import GatehouseTesting
import Testing

@Suite struct AppleVerificationTests {
    let f: ProviderFixture
    let bundleID = "com.example.app"
    let servicesID = "com.example.web"
    let rawNonce = "raw-nonce-0123456789"
    var nonceHash: String { Digest.hex(Digest.sha256(rawNonce.utf8)) }
    var audiences: [String] { [bundleID, servicesID] }

    init() throws { f = try ProviderFixture() }

    private func verify(_ token: String, nonceHash: String? = nil) throws -> ProviderIdentity {
        try f.verifier.verifyApple(token, audiences: audiences, expectedNonceHash: nonceHash)
    }

    @Test func aGoodTokenGivesTheIdentity() throws {
        let token = f.apple.mintIdentityToken(sub: "001.abc.002", aud: bundleID, email: "ada@example.com", nonce: nonceHash)
        let identity = try verify(token, nonceHash: nonceHash)
        var expected = ProviderIdentity(
            subject: "001.abc.002", email: "ada@example.com", emailVerified: true, isPrivateRelayEmail: false,
            audience: bundleID, name: nil)
        // What the token says of itself, for the freshness and replay checks.
        expected.issuer = "https://appleid.apple.com"
        (expected.issuedAt, expected.expiresAt, expected.authTime, expected.nonce) = (f.now, f.now + 600, f.now, nonceHash)
        #expect(identity == expected)
        #expect(f.fakeErrors.isEmpty)
    }

    @Test func theMatchedAudienceIsReported() throws {
        let token = f.apple.mintIdentityToken(aud: servicesID)
        #expect(try verify(token).audience == servicesID)
    }

    @Test func anExpiredTokenIsRefusedAfterTheLeeway() throws {
        let now = f.now
        #expect(try verify(f.apple.mintIdentityToken(aud: bundleID, issuedAt: now - 700, expiresAt: now - 59)).subject != "")
        let reason = invalidTokenReason { try verify(f.apple.mintIdentityToken(aud: bundleID, issuedAt: now - 700, expiresAt: now - 60)) }
        #expect(reason == "token expired")
    }

    @Test func aTokenIssuedInTheFutureIsRefusedBeyondTheLeeway() throws {
        let now = f.now
        #expect(try verify(f.apple.mintIdentityToken(aud: bundleID, issuedAt: now + 60)).subject != "")
        let reason = invalidTokenReason { try verify(f.apple.mintIdentityToken(aud: bundleID, issuedAt: now + 61)) }
        #expect(reason == "token issued in the future")
    }

    @Test func aNotBeforeInTheFutureIsRefusedBeyondTheLeeway() throws {
        let now = f.now
        #expect(try verify(f.apple.mintIdentityToken(aud: bundleID, extraClaims: ["nbf": .int(now + 60)])).subject != "")
        #expect(invalidTokenReason { try verify(f.apple.mintIdentityToken(aud: bundleID, extraClaims: ["nbf": .int(now + 61)])) } == "token not valid yet")
        #expect(invalidTokenReason { try verify(f.apple.mintIdentityToken(aud: bundleID, extraClaims: ["nbf": "soon"])) } == "token not valid yet")
    }

    @Test func missingTimesAreRefused() {
        for claim in ["exp", "iat"] {
            let token = f.apple.mintIdentityToken(aud: bundleID, extraClaims: [claim: .null])
            #expect(invalidTokenReason { try verify(token) } == "\(claim) missing")
        }
    }

    @Test func aWrongAudienceIsRefused() {
        for aud in ["com.example.other", "", "com.example.app.evil"] {
            #expect(invalidTokenReason { try verify(f.apple.mintIdentityToken(aud: aud)) } == "wrong audience")
        }
        let twoAudiences = f.apple.mintIdentityToken(aud: bundleID, extraClaims: ["aud": [.string(bundleID), "com.other"]])
        #expect(invalidTokenReason { try verify(twoAudiences) } == "wrong audience")
    }

    @Test func aWrongIssuerIsRefusedEvenTheKeyServersOwnURL() {
        for issuer in ["https://appleid.apple.com/", "https://evil.example.com", f.apple.baseURL, "accounts.google.com"] {
            #expect(invalidTokenReason { try verify(f.apple.mintIdentityToken(aud: bundleID, issuer: issuer)) } == "wrong issuer")
        }
    }

    @Test func anUnknownKidIsRefused() {
        let token = f.apple.mintIdentityToken(aud: bundleID, kid: "not-a-published-kid")
        #expect(invalidTokenReason { try verify(token) } == "unknown kid not-a-published-kid")
        let noKid = f.apple.mintIdentityToken(aud: bundleID, headerOverrides: ["kid": .null])
        #expect(invalidTokenReason { try verify(noKid) } == "no kid in header")
    }

    @Test func algNoneIsRefused() {
        let token = f.apple.mintIdentityToken(aud: bundleID, signature: .none)
        #expect(invalidTokenReason { try verify(token) } == "alg none is not RS256")
        let disguised = f.apple.mintIdentityToken(aud: bundleID, signature: .none, headerOverrides: ["alg": "RS256"])
        #expect(invalidTokenReason { try verify(disguised) } != nil)
    }

    @Test func hs256SignedWithThePublicKeyIsRefused() {
        let token = f.apple.mintIdentityToken(aud: bundleID, signature: .hs256WithPublicKey)
        #expect(invalidTokenReason { try verify(token) } == "alg HS256 is not RS256")
    }

    @Test func aSignatureByAnotherKeyIsRefused() {
        let token = f.apple.mintIdentityToken(aud: bundleID, signature: .foreignKey)
        #expect(invalidTokenReason { try verify(token) } == "bad signature")
    }

    @Test func aTamperedPayloadIsRefused() throws {
        let token = f.apple.mintIdentityToken(sub: "victim", aud: bundleID)
        #expect(try verify(token).subject == "victim")
        let forged = tamper(token) { $0["sub"] = "attacker" }
        #expect(invalidTokenReason { try verify(forged) } == "bad signature")
    }

    @Test func malformedTokensAreRefused() {
        for token in ["", "a.b", "a.b.c.d", "not a token", String(repeating: "x", count: 20_000)] {
            #expect(invalidTokenReason { try verify(token) } != nil, "\(token.prefix(20))")
        }
    }

    @Test func theNonceMustMatchWhenExpected() throws {
        let missing = f.apple.mintIdentityToken(aud: bundleID)
        #expect(invalidTokenReason { try verify(missing, nonceHash: nonceHash) } == "nonce claim missing")
        let raw = f.apple.mintIdentityToken(aud: bundleID, nonce: rawNonce)  // the raw nonce is not its hash
        #expect(invalidTokenReason { try verify(raw, nonceHash: nonceHash) } == "nonce does not match")
        let other = f.apple.mintIdentityToken(aud: bundleID, nonce: Digest.hex(Digest.sha256("other".utf8)))
        #expect(invalidTokenReason { try verify(other, nonceHash: nonceHash) } == "nonce does not match")
        // Without an expected nonce (the app set require_nonce: false) the claim is not checked.
        #expect(try verify(other).subject != "")
    }

    @Test func emailVerifiedMayBeAStringOrABool() throws {
        let cases: [(JSON?, Bool)] = [("true", true), ("false", false), (true, true), (false, false), (nil, false), ("TRUE", true)]
        for (value, expected) in cases {
            let token = f.apple.mintIdentityToken(aud: bundleID, emailVerified: value)
            #expect(try verify(token).emailVerified == expected, "\(String(describing: value))")
        }
    }

    @Test func aPrivateRelayEmailIsFlagged() throws {
        let byClaim = f.apple.mintIdentityToken(aud: bundleID, email: "x7q@privaterelay.appleid.com", isPrivateEmail: "true")
        let identity = try verify(byClaim)
        #expect(identity.isPrivateRelayEmail)
        #expect(identity.email == "x7q@privaterelay.appleid.com")
        let byDomain = f.apple.mintIdentityToken(aud: bundleID, email: "x7q@PrivateRelay.AppleID.com")
        #expect(try verify(byDomain).isPrivateRelayEmail)
        let byBool = f.apple.mintIdentityToken(aud: bundleID, email: "someone@icloud.com", isPrivateEmail: true)
        #expect(try verify(byBool).isPrivateRelayEmail)
        let plain = f.apple.mintIdentityToken(aud: bundleID, email: "someone@icloud.com", isPrivateEmail: "false")
        #expect(try !verify(plain).isPrivateRelayEmail)
    }

    @Test func anAbsentEmailIsNil() throws {
        let identity = try verify(f.apple.mintIdentityToken(aud: bundleID, email: nil))
        #expect(identity.email == nil)
        #expect(!identity.emailVerified)
    }

    @Test func anEmptySubjectIsRefused() {
        #expect(invalidTokenReason { try verify(f.apple.mintIdentityToken(sub: "", aud: bundleID)) } == "sub missing")
    }

    @Test func theKeyServerDownWithNothingCachedIsUnavailable() {
        f.apple.setDown(true)
        let error = providerError { try verify(f.apple.mintIdentityToken(aud: bundleID)) }
        #expect(error?.isUnavailable == true)
    }

    @Test func aGoogleTokenIsNotAnAppleToken() {
        let token = f.google.mintIDToken(aud: bundleID)
        #expect(invalidTokenReason { try verify(token) } != nil)
    }

    @Test func theFakesTokensPassAnIndependentVerifier() throws {
        let token = f.apple.mintIdentityToken(aud: bundleID)
        let outcome = try IndependentJWTVerifier.verify(
            token: token, jwksURL: f.apple.keysURL, audience: bundleID, issuer: "https://appleid.apple.com", algorithm: "RS256")
        guard case .valid(let claims) = outcome else {
            Issue.record("PyJWT refused the fake's token: \(outcome)")
            return
        }
        #expect(claims["email_verified"] == "true")
        #expect(claims["nonce_supported"] == true)
    }

    @Test func tokenTextInReasonsIsShortAndPrintable() {
        let token = f.apple.mintIdentityToken(aud: bundleID, kid: "evil\nkid" + String(repeating: "x", count: 100))
        let reason = invalidTokenReason { try verify(token) }
        #expect(reason == "unknown kid evil?kid" + String(repeating: "x", count: 56) + "…")
    }
}
