import GatehouseCore
import GatehouseCrypto
import GatehouseProviders
import GatehouseTesting
import Testing

/// `ProviderVerifier.verifyAppleNotification`: Apple's server-to-server notification JWTs, from
/// the fake Apple's keys over real HTTP.
@Suite struct AppleNotificationVerificationTests {
    let f: ProviderFixture
    let bundleID = "com.example.app"
    let servicesID = "com.example.web"

    init() throws { f = try ProviderFixture() }

    private func verify(_ token: String) throws -> AppleAccountEvent {
        try f.verifier.verifyAppleNotification(token, audiences: [bundleID, servicesID])
    }

    @Test func aGoodNotificationGivesItsEvent() throws {
        let time = f.clock.nowMillis() - 5_000
        let token = f.apple.mintNotification(type: "email-disabled", sub: "001.abc.002", aud: servicesID, email: "x1@privaterelay.appleid.com", eventTime: time)
        let event = try verify(token)
        #expect(event == AppleAccountEvent(
            type: "email-disabled", subject: "001.abc.002", eventTime: time, email: "x1@privaterelay.appleid.com", isPrivateEmail: true, audience: servicesID))
        #expect(event.kind == .emailDisabled)
        for type in AppleAccountEvent.Kind.allCases {
            #expect(try verify(f.apple.mintNotification(type: type.rawValue, sub: "s", aud: bundleID)).kind == type)
        }
        // A type Apple may add later verifies; the service ignores it.
        #expect(try verify(f.apple.mintNotification(type: "something-new", sub: "s", aud: bundleID)).kind == nil)
        #expect(f.fakeErrors.isEmpty)
    }

    @Test func theClaimsAreCheckedAsForIdentityTokens() {
        let now = f.now
        #expect(invalidTokenReason { try verify(f.apple.mintNotification(type: "consent-revoked", sub: "s", aud: "com.other.app")) } == "wrong audience")
        #expect(invalidTokenReason { try verify(f.apple.mintNotification(type: "consent-revoked", sub: "s", aud: bundleID, issuer: "https://evil.example.com")) } == "wrong issuer")
        #expect(invalidTokenReason { try verify(f.apple.mintNotification(type: "consent-revoked", sub: "s", aud: bundleID, issuedAt: now - 7200, expiresAt: now - 61)) } == "token expired")
        #expect(invalidTokenReason { try verify(f.apple.mintNotification(type: "consent-revoked", sub: "s", aud: bundleID, signature: .foreignKey)) } == "bad signature")
        #expect(invalidTokenReason { try verify("not.a.jwt") }?.hasPrefix("malformed token") == true)
    }

    @Test func eventsMustBeAJSONStringOfTheRightShape() {
        let bad: [(JSON, String)] = [
            (["type": "consent-revoked", "sub": "s", "event_time": 1], "events is not a JSON string"),
            ("not json", "events does not hold a JSON object"),
            ("[1, 2]", "events does not hold a JSON object"),
            (.string(#"{"sub": "s", "event_time": 1}"#), "events.type missing"),
            (.string(#"{"type": "consent-revoked", "sub": "", "event_time": 1}"#), "events.sub missing"),
            (.string(#"{"type": "consent-revoked", "sub": "s"}"#), "events.event_time missing"),
            (.string(#"{"type": "consent-revoked", "sub": "s", "event_time": "1"}"#), "events.event_time missing"),
            (.string(#"{"type": "email-disabled", "sub": "s", "event_time": 1, "email": 7}"#), "events.email is not an address"),
        ]
        for (events, reason) in bad {
            #expect(invalidTokenReason { try verify(f.apple.mintNotification(type: "x", sub: "s", aud: bundleID, events: events)) } == reason, "\(events)")
        }
        let missing = f.apple.mintNotification(type: "x", sub: "s", aud: bundleID, extraClaims: ["events": .null])
        #expect(invalidTokenReason { try verify(missing) } == "events is not a JSON string")
    }

    @Test func anUnknownKidFetchesApplesKeysOnceMore() throws {
        _ = try verify(f.apple.mintNotification(type: "consent-revoked", sub: "s", aud: bundleID))
        #expect(f.apple.keysFetchCount == 1)
        try f.apple.rotateKeys()
        f.clock.advance(seconds: 31)  // the unknown-kid refetch interval
        _ = try verify(f.apple.mintNotification(type: "consent-revoked", sub: "s", aud: bundleID))
        #expect(f.apple.keysFetchCount == 2, "the new kid was fetched")
        // A made-up kid within the refetch interval: refused without asking Apple again.
        #expect(invalidTokenReason { try verify(f.apple.mintNotification(type: "consent-revoked", sub: "s", aud: bundleID, kid: "made-up")) } == "unknown kid made-up")
        #expect(f.apple.keysFetchCount == 2)
        #expect(invalidTokenReason { try verify(f.apple.mintNotification(type: "consent-revoked", sub: "s", aud: bundleID, signature: .none)) } == "alg none is not RS256")
    }
}
