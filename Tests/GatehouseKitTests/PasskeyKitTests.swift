// GatehouseKit's passkey calls against the real server, with GatehouseTesting's software
// authenticator standing in for ASAuthorizationController.
import Foundation
import GatehouseCore
import GatehouseCrypto
import GatehouseKit
import GatehouseTesting
import Testing

@Suite("GatehouseKit passkeys")
struct PasskeyKitTests {
    static let settings: [String: JSON] = [
        "mfa": ["policy": "optional", "methods": ["totp", "passkey"]],
        "passkeys": ["rp_id": "example.com", "origins": ["https://app.example.com"]],
    ]

    /// What ASAuthorizationController would hand back for `options`, made by the authenticator.
    static func registration(_ authenticator: SoftAuthenticator, _ options: PasskeyRegistrationOptions) throws -> PasskeyRegistration {
        let made = try authenticator.register([
            "challenge": .string(Base64URL.encode([UInt8](options.challenge))), "user": ["id": .string(Base64URL.encode([UInt8](options.userID)))],
        ])
        return PasskeyRegistration(
            credentialID: try bytes(made["rawId"]), rawClientDataJSON: try bytes(made["response"]?["clientDataJSON"]),
            rawAttestationObject: try bytes(made["response"]?["attestationObject"]))
    }

    static func assertion(_ authenticator: SoftAuthenticator, _ options: PasskeySignInOptions) throws -> PasskeyAssertion {
        let made = try authenticator.assert(challenge: Base64URL.encode([UInt8](options.challenge)))
        return PasskeyAssertion(
            credentialID: try bytes(made["rawId"]), rawClientDataJSON: try bytes(made["response"]?["clientDataJSON"]),
            rawAuthenticatorData: try bytes(made["response"]?["authenticatorData"]), signature: try bytes(made["response"]?["signature"]),
            userID: try made["response"]?["userHandle"].map { try bytes($0) })
    }

    static func bytes(_ value: JSON?) throws -> Data {
        Data(try #require(value?.stringValue.flatMap { Base64URL.decode($0) }))
    }

    static func amr(_ client: GatehouseClient) async throws -> Set<String> {
        Set(try KitWorld.claims(try await client.accessToken())["amr"]?.arrayValue?.compactMap(\.stringValue) ?? [])
    }

    @Test(arguments: TestDatabase.kinds)
    func registerSignInSecondStepAndReauthenticate(_ kind: TestDatabaseKind) async throws {
        let world = try KitWorld(kind, settings: Self.settings)
        defer { world.stop() }
        let authenticator = try SoftAuthenticator(origin: "https://app.example.com", rpID: "example.com")
        let client = world.client()
        let user = try await client.signUp(email: "ada@example.com", password: "correct horse battery").user

        let creation = try await client.passkeyRegistrationOptions()
        let passkey = try await client.registerPasskey(try Self.registration(authenticator, creation), name: "Soft key")
        #expect(passkey.name == "Soft key" && !passkey.backedUp && passkey.lastUsedAt == nil)
        #expect(try await client.listPasskeys().map(\.id) == [passkey.id])
        #expect(try await client.listFactors().passkeys == 1)
        #expect(try await client.passkeyRegistrationOptions().excludedCredentialIDs == [Data(authenticator.credentialID)])

        // Without an email: the passkey says who it is; two factors in one.
        let phone = world.client()
        let options = try await phone.passkeySignInOptions()
        #expect(options.allowedCredentialIDs.isEmpty)
        let assertion = try Self.assertion(authenticator, options)
        let signedIn = try await phone.signInWithPasskey(assertion)
        #expect(signedIn.user.id == user.id && !signedIn.isNewUser)
        #expect(try await Self.amr(phone) == ["hwk", "mfa"])
        #expect(try await phone.getSessions().first { $0.current }?.method == "passkey")
        #expect(await kitError { try await world.client().signInWithPasskey(assertion) }?.code == .invalidCredential, "a replayed assertion")

        // As the second step of a password sign-in.
        let laptop = world.client()
        let challenge = try await MFAKitTests.challenge { try await laptop.signIn(email: "ada@example.com", password: "correct horse battery") }
        #expect(challenge.methods.contains(.passkey) && !challenge.enroll)
        let forSecondStep = try await laptop.passkeySignInOptions(for: challenge)
        #expect(forSecondStep.allowedCredentialIDs == [Data(authenticator.credentialID)])
        _ = try await laptop.verifyMFA(challenge, passkey: try Self.assertion(authenticator, forSecondStep))
        #expect(try await Self.amr(laptop) == ["pwd", "hwk", "mfa"])

        // Renamed; removed after a passkey reauthentication.
        #expect(try await laptop.renamePasskey(id: passkey.id, name: "Desk key").name == "Desk key")
        world.clock.advance(seconds: 301)
        #expect(await kitError { try await laptop.removePasskey(id: passkey.id) }?.code == .requiresRecentLogin)
        let again = try await laptop.passkeyReauthenticationOptions()
        try await laptop.reauthenticate(passkey: try Self.assertion(authenticator, again))
        try await laptop.removePasskey(id: passkey.id)
        #expect(try await laptop.listPasskeys().isEmpty)
        let refused = try Self.assertion(authenticator, try await world.client().passkeySignInOptions())
        #expect(await kitError { try await world.client().signInWithPasskey(refused) }?.code == .invalidCredential, "a removed passkey")
    }

    @Test
    func underRequiredAPasskeyEnrolsWithTheChallenge() async throws {
        var settings = Self.settings
        settings["mfa"] = ["policy": "required", "methods": ["totp", "passkey"]]
        let world = try KitWorld(settings: settings)
        defer { world.stop() }
        let authenticator = try SoftAuthenticator(origin: "https://app.example.com", rpID: "example.com")
        let client = world.client()
        let challenge = try await MFAKitTests.challenge { try await client.signUp(email: "grace@example.com", password: "correct horse battery") }
        #expect(challenge.enroll && challenge.methods.contains(.passkey))
        let creation = try await client.passkeyRegistrationOptions(during: challenge)
        _ = try await client.registerPasskey(try Self.registration(authenticator, creation), during: challenge)
        let finished = try await client.finishMFAEnrollment(challenge)
        #expect(finished.isNewUser)
        #expect(try await client.listPasskeys().count == 1)
    }
}
