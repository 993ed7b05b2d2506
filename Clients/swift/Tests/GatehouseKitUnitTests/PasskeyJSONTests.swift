import Foundation
import Testing

@testable import GatehouseKit

/// The WebAuthn JSON encodings GatehouseKit sends (RegistrationResponseJSON,
/// AuthenticationResponseJSON) and the options it reads, against the WebAuthn Level 3 shapes
/// and the contract's answers. Base64url without padding is checked on lengths that need 0, 1
/// and 2 padding characters in ordinary base64.
@Suite("Passkey JSON")
struct PasskeyJSONTests {
    static func object(_ value: some Encodable) throws -> [String: Any] {
        let data = try JSONEncoder().encode(value)
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    static let credentialID = Data([0xFB, 0xFF, 0x00, 0x10, 0x83])  // base64 "+/8AEIM=" → "-_8AEIM"
    static let clientData = Data(#"{"type":"webauthn.create","challenge":"AAEC","origin":"https://example.com"}"#.utf8)

    @Test
    func aRegistrationEncodesAsRegistrationResponseJSON() throws {
        let attestation = Data([0xA3, 0x63, 0x66, 0x6D, 0x74, 0x64, 0x6E, 0x6F, 0x6E, 0x65])  // 10 bytes: 2 padding characters in base64
        let registration = PasskeyRegistration(credentialID: Self.credentialID, rawClientDataJSON: Self.clientData, rawAttestationObject: attestation)
        let json = try Self.object(registration)
        #expect(json["id"] as? String == "-_8AEIM")
        #expect(json["rawId"] as? String == "-_8AEIM")
        #expect(json["type"] as? String == "public-key")
        #expect((json["clientExtensionResults"] as? [String: Any])?.isEmpty == true)
        #expect(json["authenticatorAttachment"] == nil, "not sent when unknown")
        let response = try #require(json["response"] as? [String: Any])
        #expect(response["attestationObject"] as? String == "o2NmbXRkbm9uZQ")
        #expect(Set(response.keys) == ["clientDataJSON", "attestationObject"], "no transports when none are known")
        let clientDataText = try #require(response["clientDataJSON"] as? String)
        #expect(!clientDataText.contains("=") && !clientDataText.contains("+") && !clientDataText.contains("/"))
        #expect(try Base64URL.decode(clientDataText, field: "clientDataJSON") == Self.clientData, "the client data byte for byte")
        #expect(Set(json.keys) == ["id", "rawId", "type", "response", "clientExtensionResults"])

        let withMore = PasskeyRegistration(
            credentialID: Self.credentialID, rawClientDataJSON: Self.clientData, rawAttestationObject: attestation, transports: ["internal", "hybrid"],
            authenticatorAttachment: "platform")
        let more = try Self.object(withMore)
        #expect(more["authenticatorAttachment"] as? String == "platform")
        #expect((more["response"] as? [String: Any])?["transports"] as? [String] == ["internal", "hybrid"])
    }

    @Test
    func anAssertionEncodesAsAuthenticationResponseJSON() throws {
        let authenticatorData = Data(repeating: 0x49, count: 37)  // 37 bytes: 1 padding character in base64
        let signature = Data([0x30, 0x45, 0x02, 0x21, 0x00, 0xFF])  // 6 bytes: none
        let userID = Data([0x01, 0x02, 0x03, 0x04])
        let assertion = PasskeyAssertion(
            credentialID: Self.credentialID, rawClientDataJSON: Self.clientData, rawAuthenticatorData: authenticatorData, signature: signature, userID: userID)
        let json = try Self.object(assertion)
        #expect(json["id"] as? String == "-_8AEIM" && json["rawId"] as? String == "-_8AEIM")
        #expect(json["type"] as? String == "public-key")
        let response = try #require(json["response"] as? [String: Any])
        #expect(response["authenticatorData"] as? String == String(repeating: "SUlJ", count: 12) + "SQ")
        #expect(response["signature"] as? String == "MEUCIQD_")
        #expect(response["userHandle"] as? String == "AQIDBA")
        #expect(try Base64URL.decode(try #require(response["clientDataJSON"] as? String), field: "") == Self.clientData)

        let anonymous = PasskeyAssertion(
            credentialID: Self.credentialID, rawClientDataJSON: Self.clientData, rawAuthenticatorData: authenticatorData, signature: signature, userID: nil)
        let noHandle = try #require(try Self.object(anonymous)["response"] as? [String: Any])
        #expect(noHandle["userHandle"] == nil, "no user handle: the member is left out, not null")
    }

    @Test
    func creationOptionsAsTheServerAnswersThem() throws {
        let answer = #"""
            {"data":{"challenge":"3q2-7w","rp":{"id":"example.com","name":"Example"},
            "user":{"id":"AAEC_w","name":"ada@example.com","displayName":"Ada Lovelace"},
            "pubKeyCredParams":[{"type":"public-key","alg":-7},{"type":"public-key","alg":-257}],"timeout":300000,
            "excludeCredentials":[{"type":"public-key","id":"-_8AEIM"}],
            "authenticatorSelection":{"residentKey":"required","requireResidentKey":true,"userVerification":"required"},"attestation":"none"}}
            """#
        let options = try Transport.decode(PasskeyRegistrationOptions.self, from: HTTPAnswer(status: 200, body: Data(answer.utf8), retryAfterHeader: nil, requestID: nil))
        #expect(options.challenge == Data([0xDE, 0xAD, 0xBE, 0xEF]))
        #expect(options.userID == Data([0x00, 0x01, 0x02, 0xFF]))
        #expect(options.userName == "ada@example.com" && options.userDisplayName == "Ada Lovelace")
        #expect(options.relyingPartyIdentifier == "example.com" && options.relyingPartyName == "Example")
        #expect(options.excludedCredentialIDs == [Self.credentialID])
        #expect(options.algorithms == [-7, -257])
        #expect(options.timeout == 300)
    }

    @Test
    func requestOptionsAsTheServerAnswersThem() throws {
        let answer = #"{"data":{"challenge":"3q2-7w","rpId":"example.com","timeout":300000,"userVerification":"required","allowCredentials":[]}}"#
        let options = try Transport.decode(PasskeySignInOptions.self, from: HTTPAnswer(status: 200, body: Data(answer.utf8), retryAfterHeader: nil, requestID: nil))
        #expect(options.challenge == Data([0xDE, 0xAD, 0xBE, 0xEF]))
        #expect(options.relyingPartyIdentifier == "example.com")
        #expect(options.allowedCredentialIDs.isEmpty)
        #expect(options.userVerification == "required")

        let second = #"{"data":{"challenge":"AA","rpId":"example.com","timeout":300000,"userVerification":"required","allowCredentials":[{"type":"public-key","id":"-_8AEIM"},{"type":"public-key","id":"AQIDBA"}]}}"#
        let forSecondStep = try Transport.decode(PasskeySignInOptions.self, from: HTTPAnswer(status: 200, body: Data(second.utf8), retryAfterHeader: nil, requestID: nil))
        #expect(forSecondStep.allowedCredentialIDs == [Self.credentialID, Data([1, 2, 3, 4])])
    }

    @Test
    func optionsThatAreNotBase64URLAreAnUnexpectedAnswer() {
        for challenge in ["3q2+7w", "3q2/7w", "not base64!", "é"] {
            let answer = #"{"data":{"challenge":"\#(challenge)","rpId":"example.com","allowCredentials":[]}}"#
            #expect(throws: GatehouseError.unexpectedResponse(status: 200)) {
                try Transport.decode(PasskeySignInOptions.self, from: HTTPAnswer(status: 200, body: Data(answer.utf8), retryAfterHeader: nil, requestID: nil))
            }
        }
    }

    @Test
    func base64URLDecodesWhatItEncodes() throws {
        for length in 0..<70 {
            let bytes = (0..<length).map { UInt8(($0 * 37 + 11) % 256) }
            let text = Base64URL.encode(bytes)
            #expect(!text.contains("="))
            #expect(try Base64URL.decode(text, field: "x") == Data(bytes))
        }
    }
}
