import GatehouseCore
import GatehouseOutbound
import GatehouseProviders
import GatehouseTesting
import Testing

@Suite struct GoogleVerificationTests {
    let f: ProviderFixture
    let clientID = "1234-abc.apps.googleusercontent.com"

    init() throws { f = try ProviderFixture() }

    private func verify(_ token: String, nonce: String? = nil) throws -> ProviderIdentity {
        try f.verifier.verifyGoogle(token, audiences: ["other-client", clientID], nonce: nonce)
    }

    @Test func bothIssuersAreAccepted() throws {
        for issuer in ["accounts.google.com", "https://accounts.google.com"] {
            let token = f.google.mintIDToken(sub: "1098", aud: clientID, email: "ada@gmail.com", issuer: issuer)
            var expected = ProviderIdentity(subject: "1098", email: "ada@gmail.com", emailVerified: true, audience: clientID)
            (expected.issuer, expected.issuedAt, expected.expiresAt) = (issuer, f.now, f.now + 3600)
            #expect(try verify(token) == expected)
        }
        for issuer in ["http://accounts.google.com", "https://accounts.google.com/", "https://appleid.apple.com"] {
            #expect(invalidTokenReason { try verify(f.google.mintIDToken(aud: clientID, issuer: issuer)) } == "wrong issuer")
        }
    }

    @Test func aWrongAudienceIsRefused() {
        #expect(invalidTokenReason { try verify(f.google.mintIDToken(aud: "someone-else")) } == "wrong audience")
    }

    @Test func theNonceMustEqualTheRawNonceWhenSent() throws {
        let token = f.google.mintIDToken(aud: clientID, nonce: "n-123")
        #expect(try verify(token, nonce: "n-123").subject != "")
        #expect(invalidTokenReason { try verify(token, nonce: "n-124") } == "nonce does not match")
        #expect(invalidTokenReason { try verify(f.google.mintIDToken(aud: clientID), nonce: "n-123") } == "nonce claim missing")
        #expect(try verify(token).subject != "")  // no nonce sent: not checked
    }

    @Test func namesAndEmailVerificationAreRead() throws {
        let named = f.google.mintIDToken(aud: clientID, emailVerified: false, givenName: "Ada", familyName: "Lovelace")
        let identity = try verify(named)
        #expect(identity.name == ProviderIdentity.Name(first: "Ada", last: "Lovelace"))
        #expect(!identity.emailVerified)
        #expect(!identity.isPrivateRelayEmail)
        #expect(try verify(f.google.mintIDToken(aud: clientID, givenName: "Ada")).name == .init(first: "Ada", last: nil))
        #expect(try verify(f.google.mintIDToken(aud: clientID)).name == nil)
    }

    @Test func expiredAndForgedTokensAreRefused() {
        let now = f.now
        #expect(invalidTokenReason { try verify(f.google.mintIDToken(aud: clientID, issuedAt: now - 4000, expiresAt: now - 61)) } == "token expired")
        #expect(invalidTokenReason { try verify(f.google.mintIDToken(aud: clientID, signature: .hs256WithPublicKey)) } != nil)
        #expect(invalidTokenReason { try verify(f.google.mintIDToken(aud: clientID, signature: .foreignKey)) } == "bad signature")
    }

    @Test func anAppleTokenIsNotAGoogleToken() {
        #expect(invalidTokenReason { try verify(f.apple.mintIdentityToken(aud: clientID)) } != nil)
    }
}

@Suite struct FirebaseVerificationTests {
    let f: ProviderFixture
    let project = "swappr-prod"

    init() throws { f = try ProviderFixture() }

    @Test func theProviderIsPinnedWithTheClientFacingDetail() throws {
        let google = f.firebase.mintIDToken(projectID: project, signInProvider: "google.com")
        let error = providerError { try f.verifier.verifyFirebase(google, projectID: project, expectedProvider: "apple.com") }
        #expect(error == .invalidToken("Expected a apple.com token but received google.com"))
        let apple = f.firebase.mintIDToken(projectID: project, signInProvider: "apple.com")
        let reverse = providerError { try f.verifier.verifyFirebase(apple, projectID: project, expectedProvider: "google.com") }
        #expect(reverse == .invalidToken("Expected a google.com token but received apple.com"))
        #expect(reverse?.clientDetail == "Expected a google.com token but received apple.com")
        let otherFailure = providerError { try f.verifier.verifyFirebase(apple, projectID: "other", expectedProvider: "apple.com") }
        #expect(otherFailure != nil && otherFailure?.clientDetail == nil)
        #expect(try f.verifier.verifyFirebase(apple, projectID: project, expectedProvider: "apple.com").audience == project)
    }

    @Test func theSubjectIsTheProvidersOwnIdWhenPresent() throws {
        let withIdentity = f.firebase.mintIDToken(
            uid: "fbUID1", projectID: project, signInProvider: "apple.com", providerSubject: "001.apple.sub",
            email: "x@privaterelay.appleid.com")
        let identity = try f.verifier.verifyFirebase(withIdentity, projectID: project, expectedProvider: "apple.com")
        #expect(identity.subject == "001.apple.sub")
        #expect(identity.email == "x@privaterelay.appleid.com")
        #expect(identity.emailVerified)
        #expect(identity.isPrivateRelayEmail)
        let without = f.firebase.mintIDToken(uid: "fbUID2", projectID: project, signInProvider: "google.com")
        #expect(try f.verifier.verifyFirebase(without, projectID: project, expectedProvider: "google.com").subject == "firebase:fbUID2")
    }

    @Test func anotherProjectIsRefused() {
        let other = f.firebase.mintIDToken(projectID: "someone-else")
        #expect(invalidTokenReason { try f.verifier.verifyFirebase(other, projectID: project, expectedProvider: "apple.com") } == "wrong issuer")
        let mixed = f.firebase.mintIDToken(projectID: project, audience: "someone-else")
        #expect(invalidTokenReason { try f.verifier.verifyFirebase(mixed, projectID: project, expectedProvider: "apple.com") } == "wrong audience")
        let token = f.firebase.mintIDToken(projectID: project)
        #expect(invalidTokenReason { try f.verifier.verifyFirebase(token, projectID: "", expectedProvider: "apple.com") } != nil)
    }

    @Test func anEmptySubjectAndExpiredTokensAreRefused() {
        let noSub = f.firebase.mintIDToken(uid: "", projectID: project)
        #expect(invalidTokenReason { try f.verifier.verifyFirebase(noSub, projectID: project, expectedProvider: "apple.com") } == "sub missing")
        let now = f.now
        let expired = f.firebase.mintIDToken(projectID: project, issuedAt: now - 4000, expiresAt: now - 61)
        #expect(invalidTokenReason { try f.verifier.verifyFirebase(expired, projectID: project, expectedProvider: "apple.com") } == "token expired")
    }

    @Test func aForgedProviderClaimBreaksTheSignature() {
        let google = f.firebase.mintIDToken(projectID: project, signInProvider: "google.com")
        let forged = tamper(google) { $0["firebase"] = ["sign_in_provider": "apple.com", "identities": [:]] }
        #expect(invalidTokenReason { try f.verifier.verifyFirebase(forged, projectID: project, expectedProvider: "apple.com") } == "bad signature")
    }

    @Test func keysComeFromTheFirebaseURLOnly() {
        // A token signed by Apple's fake, claiming Firebase's issuer, has a kid the Firebase JWKS lacks.
        let token = f.apple.mintIdentityToken(
            aud: project, issuer: "https://securetoken.google.com/\(project)",
            extraClaims: ["firebase": ["sign_in_provider": "apple.com"]])
        #expect(invalidTokenReason { try f.verifier.verifyFirebase(token, projectID: project, expectedProvider: "apple.com") }?.hasPrefix("unknown kid") == true)
    }
}
