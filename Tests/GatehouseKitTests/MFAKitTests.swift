import COpenSSL
import Foundation
import GatehouseCore
import GatehouseKit
import GatehouseTesting
import Testing

/// TOTP, the second step and passkeys through GatehouseKit, against the real server (its clock
/// is the world's manual clock, so the codes here are computed for the server's time).
@Suite("GatehouseKit second factors and passkeys")
struct MFAKitTests {
    static let mfa: [String: JSON] = ["mfa": ["policy": "optional", "methods": ["totp", "passkey"]]]

    /// The helper below against RFC 6238's SHA-1 vectors (its 8-digit codes, cut to 6).
    @Test
    func theTestsTOTPIsRFC6238() {
        let secret = TOTP.base32Encode(Array("12345678901234567890".utf8))
        #expect(secret == "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ")
        #expect(TOTP.code(secret: secret, at: 59) == "287082")
        #expect(TOTP.code(secret: secret, at: 1_111_111_109) == "081804")
        #expect(TOTP.code(secret: secret, at: 20_000_000_000) == "353130")
    }

    @Test(arguments: TestDatabase.kinds)
    func totpEnrolmentTheSecondStepAndRecoveryCodes(_ kind: TestDatabaseKind) async throws {
        let world = try KitWorld(kind, settings: Self.mfa)
        defer { world.stop() }
        let client = world.client()
        let user = try await client.signUp(email: "ada@example.com", password: "correct horse battery").user
        let before = try await client.listFactors()
        #expect(before.policy == .optional && before.factors.isEmpty && before.passkeys == 0)

        let enrolment = try await client.enrollTOTP(name: "Phone")
        let url = enrolment.otpauthURL.absoluteString
        #expect(url.hasPrefix("otpauth://totp/") && url.contains("secret=\(enrolment.secret)") && url.contains("issuer=Kit"))
        #expect(url.contains("algorithm=SHA1") && url.contains("digits=6") && url.contains("period=30"))
        #expect(!enrolment.secret.contains("="), "base32 without padding")
        let notTheCode = TOTP.code(secret: enrolment.secret, at: world.seconds + 3600)
        #expect(await kitError { try await client.confirmTOTP(id: enrolment.id, code: notTheCode) }?.code == .invalidCode)
        let recoveryCodes = try await client.confirmTOTP(id: enrolment.id, code: TOTP.code(secret: enrolment.secret, at: world.seconds))
        #expect(recoveryCodes.count == 10 && Set(recoveryCodes).count == 10)
        #expect(recoveryCodes.allSatisfy { $0.count == 11 && $0.split(separator: "-").map(\.count) == [5, 5] }, "\(recoveryCodes)")
        let enrolled = try await client.listFactors()
        #expect(enrolled.factors.map(\.id) == [enrolment.id] && enrolled.factors[0].type == "totp" && enrolled.factors[0].name == "Phone")
        #expect(enrolled.recoveryCodesLeft == 10)
        try await client.signOut()

        // The password is right: no session yet, a challenge instead.
        let phone = world.client()
        let challenge = try await Self.challenge { try await phone.signIn(email: "ada@example.com", password: "correct horse battery") }
        #expect(!challenge.enroll && challenge.expiresIn == 300 && challenge.mfaToken.hasPrefix("mfa_"))
        #expect(Set(challenge.methods).isSuperset(of: [.totp, .recoveryCode]))
        #expect(phone.currentUser == nil)
        #expect(await kitError { try await phone.verifyMFA(challenge, code: notTheCode) }?.code == .invalidCode)
        world.clock.advance(seconds: 30)  // past the step that confirmed the factor
        let code = TOTP.code(secret: enrolment.secret, at: world.seconds)
        let signedIn = try await phone.verifyMFA(challenge, code: code)
        #expect(signedIn.user.id == user.id && !signedIn.isNewUser)
        let amr = try KitWorld.claims(try await phone.accessToken())["amr"]?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(Set(amr) == ["pwd", "otp", "mfa"], "\(amr)")
        #expect(try await phone.getUser().id == user.id)
        #expect(
            await kitError { try await world.client().verifyMFA(challenge, code: TOTP.code(secret: enrolment.secret, at: world.seconds + 30)) }?.code
                == .invalidMFAToken, "the challenge is used")
        let again = try await Self.challenge { try await world.client().signIn(email: "ada@example.com", password: "correct horse battery") }
        #expect(await kitError { try await world.client().verifyMFA(again, code: code) }?.code == .invalidCode, "a used code, within its step")

        // A recovery code, once.
        let laptop = world.client()
        let second = try await Self.challenge { try await laptop.signIn(email: "ada@example.com", password: "correct horse battery") }
        _ = try await laptop.verifyMFA(second, recoveryCode: recoveryCodes[0])
        #expect(try await laptop.listFactors().recoveryCodesLeft == 9)
        let third = try await Self.challenge { try await world.client().signIn(email: "ada@example.com", password: "correct horse battery") }
        #expect(await kitError { try await world.client().verifyMFA(third, recoveryCode: recoveryCodes[0]) }?.code == .invalidCode, "a used recovery code")

        // A challenge lives 5 minutes.
        let late = try await Self.challenge { try await world.client().signIn(email: "ada@example.com", password: "correct horse battery") }
        world.clock.advance(seconds: 301)
        #expect(await kitError { try await world.client().verifyMFA(late, recoveryCode: recoveryCodes[1]) }?.code == .invalidMFAToken)

        // Removed, the factor is asked no more.
        let fresh = world.client()
        let fourth = try await Self.challenge { try await fresh.signIn(email: "ada@example.com", password: "correct horse battery") }
        _ = try await fresh.verifyMFA(fourth, recoveryCode: recoveryCodes[1])
        try await fresh.removeTOTP(id: enrolment.id)
        #expect(try await fresh.listFactors().factors.isEmpty)
        let plain = try await world.client().signIn(email: "ada@example.com", password: "correct horse battery")
        #expect(plain.user.id == user.id)
    }

    /// Google and an emailed code, like the password, stop at the second step.
    @Test
    func everyFirstFactorAsksForTheSecondStep() async throws {
        let world = try KitWorld(settings: Self.mfa)
        defer { world.stop() }
        let client = world.client()
        let first = world.google.mintIDToken(sub: "g-mfa-1", aud: KitWorld.googleClient, email: "gus@gmail.com", nonce: "nonce-1", givenName: "Gus")
        let user = try await client.signInWithGoogle(idToken: first, nonce: "nonce-1").user
        let enrolment = try await client.enrollTOTP()
        _ = try await client.confirmTOTP(id: enrolment.id, code: TOTP.code(secret: enrolment.secret, at: world.seconds))

        let second = world.google.mintIDToken(sub: "g-mfa-1", aud: KitWorld.googleClient, email: "gus@gmail.com", nonce: "nonce-2", givenName: "Gus")
        let viaGoogle = world.client()
        let challenge = try await Self.challenge { try await viaGoogle.signInWithGoogle(idToken: second, nonce: "nonce-2") }
        #expect(viaGoogle.currentUser == nil)
        world.clock.advance(seconds: 30)
        let signedIn = try await viaGoogle.verifyMFA(challenge, code: TOTP.code(secret: enrolment.secret, at: world.seconds))
        #expect(signedIn.user.id == user.id)
        let amr = Set(try KitWorld.claims(try await viaGoogle.accessToken())["amr"]?.arrayValue?.compactMap(\.stringValue) ?? [])
        #expect(amr.isSuperset(of: ["otp", "mfa"]), "\(amr)")

        let viaCode = world.client()
        try await viaCode.sendSignInCode(to: "gus@gmail.com")
        let code = try world.code(to: "gus@gmail.com")
        let byCode = try await Self.challenge { try await viaCode.verifySignInCode(email: "gus@gmail.com", code: code) }
        #expect(byCode.methods.contains(.totp) && byCode.mfaToken != challenge.mfaToken)
    }

    @Test
    func underRequiredASignUpEnrolsWithItsChallengeAndThenFinishes() async throws {
        let world = try KitWorld(settings: ["mfa": ["policy": "required", "methods": ["totp", "passkey"]]])
        defer { world.stop() }
        let client = world.client()
        let challenge = try await Self.challenge { try await client.signUp(email: "grace@example.com", password: "correct horse battery") }
        #expect(challenge.enroll && Set(challenge.methods).isSuperset(of: [.totp]))
        #expect(client.currentUser == nil)
        let enrolment = try await client.enrollTOTP(name: "Phone", during: challenge)
        let codes = try await client.confirmTOTP(id: enrolment.id, code: TOTP.code(secret: enrolment.secret, at: world.seconds), during: challenge)
        #expect(codes.count == 10)
        let finished = try await client.finishMFAEnrollment(challenge)
        #expect(finished.isNewUser && finished.user.email == "grace@example.com")
        #expect(try await client.listFactors().factors.map(\.id) == [enrolment.id])

        // From now on the sign-in asks for the factor.
        let next = try await Self.challenge { try await world.client().signIn(email: "grace@example.com", password: "correct horse battery") }
        #expect(!next.enroll)
    }

    @Test
    func passkeyOptionsNeedTheAppsPasskeySettings() async throws {
        let bare = try KitWorld(settings: Self.mfa)
        defer { bare.stop() }
        #expect(await kitError { try await bare.client().passkeySignInOptions() }?.code == .providerNotConfigured)

        var settings = Self.mfa
        settings["passkeys"] = ["rp_id": "example.com", "origins": ["https://app.example.com"]]
        let world = try KitWorld(settings: settings)
        defer { world.stop() }
        let signIn = try await world.client().passkeySignInOptions()
        #expect(signIn.relyingPartyIdentifier == "example.com" && signIn.allowedCredentialIDs.isEmpty && signIn.userVerification == "required")
        #expect(signIn.challenge.count >= 16 && signIn.timeout == 300)

        let client = world.client()
        let user = try await client.signUp(email: "ada@example.com", password: "correct horse battery").user
        let creation = try await client.passkeyRegistrationOptions()
        #expect(creation.relyingPartyIdentifier == "example.com" && creation.relyingPartyName == "Kit")
        #expect(creation.userName == "ada@example.com" && !creation.userID.isEmpty)
        #expect(creation.userID != Data(user.id.utf8), "the user handle is not the user id")
        #expect(creation.algorithms.contains(-7) && creation.algorithms.contains(-257) && creation.excludedCredentialIDs.isEmpty)
        #expect(creation.challenge != signIn.challenge)
        #expect(try await client.listPasskeys().isEmpty)
        #expect(try await client.passkeyRegistrationOptions().userID == creation.userID, "one user handle per user")
    }

    /// The challenge `call` throws (a test failure when it throws anything else or succeeds).
    static func challenge<T>(_ call: () async throws -> T) async throws -> GatehouseKit.MFAChallenge {
        let error = await kitError(call)
        guard case .mfaRequired(let challenge)? = error else {
            throw KitWorld.NoCode(description: "expected auth/mfa-required, got \(String(describing: error))")
        }
        return challenge
    }
}

extension KitWorld {
    /// The server's time in seconds.
    var seconds: Int64 { clock.nowMillis() / 1000 }
}

/// RFC 6238 codes (SHA-1, 6 digits, 30 s), with OpenSSL's HMAC, for the tests' authenticator app.
enum TOTP {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)

    static func base32Decode(_ text: String) -> [UInt8] {
        var bits = 0
        var value = 0
        var out: [UInt8] = []
        for character in text.uppercased().utf8 where character != UInt8(ascii: "=") {
            guard let index = alphabet.firstIndex(of: character) else { return [] }
            value = value << 5 | index
            bits += 5
            if bits >= 8 {
                out.append(UInt8(truncatingIfNeeded: value >> (bits - 8)))
                bits -= 8
            }
        }
        return out
    }

    static func base32Encode(_ bytes: [UInt8]) -> String {
        var bits = 0
        var value = 0
        var out: [UInt8] = []
        for byte in bytes {
            value = value << 8 | Int(byte)
            bits += 8
            while bits >= 5 {
                out.append(alphabet[(value >> (bits - 5)) & 31])
                bits -= 5
            }
        }
        if bits > 0 { out.append(alphabet[(value << (5 - bits)) & 31]) }
        return String(decoding: out, as: UTF8.self)
    }

    static func code(secret: String, at seconds: Int64) -> String {
        let key = base32Decode(secret)
        let counter = UInt64(seconds / 30)
        let message = (0..<8).map { UInt8(truncatingIfNeeded: counter >> (56 - 8 * $0)) }
        var tag = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        _ = key.withUnsafeBytes { keyBytes in
            HMAC(EVP_sha1(), keyBytes.baseAddress, Int32(key.count), message, message.count, &tag, &length)
        }
        let offset = Int(tag[19] & 0x0F)
        let binary = (UInt32(tag[offset] & 0x7F) << 24) | (UInt32(tag[offset + 1]) << 16) | (UInt32(tag[offset + 2]) << 8) | UInt32(tag[offset + 3])
        let code = String(binary % 1_000_000)
        return String(repeating: "0", count: 6 - code.count) + code
    }
}
