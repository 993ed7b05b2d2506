import Foundation
import GatehouseCore
import GatehouseCrypto
import GatehouseTesting
import GatehouseWebAuthn
import Testing

/// The WebAuthn checks below HTTP (ADR 0028): libcbor's decoding as Gatehouse uses it, the
/// authenticator data's layout, COSE keys, and the ceremonies with a software authenticator.
@Suite("WebAuthn verifier")
struct WebAuthnVerifierTests {
    static let rp = RelyingParty(id: "example.com", origins: ["https://example.com"])
    // Read at each use: a certificate made during the test starts at the second it was made.
    static var now: Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    /// A registration made by `authenticator` over `challenge`, as the verifier gets it.
    static func registration(_ authenticator: SoftAuthenticator, challenge: String = "Y2hhbGxlbmdl") throws -> (ClientData, [UInt8]) {
        let credential = try authenticator.register(["challenge": .string(challenge), "user": ["id": "aGFuZGxl"]])
        let response = try #require(credential["response"])
        let clientDataText = try #require(response["clientDataJSON"]?.stringValue)
        let objectText = try #require(response["attestationObject"]?.stringValue)
        let clientData = try ClientData(try #require(Base64URL.decode(clientDataText)))
        return (clientData, try #require(Base64URL.decode(objectText)))
    }

    @Test func cborDecodesWhatLibcborEncodesAndRefusesWhatWebAuthnNeverSends() throws {
        let value = CBORValue.map([(.int(1), .int(2)), (.int(-257), .bytes([1, 2, 3])), (.text("fmt"), .text("none")), (.text("ok"), .bool(true))])
        let bytes = CBOR.encode(value)
        #expect(try CBOR.decode(bytes) == value)
        #expect(CBOR.encode(.int(-7)) == [0x26])  // shortest form
        #expect(CBOR.encode(.int(-257)) == [0x39, 0x01, 0x00])
        #expect(throws: WebAuthnError.self) { try CBOR.decode(bytes + [0x00]) }  // trailing bytes
        #expect(throws: WebAuthnError.self) { try CBOR.decode([0x5F, 0x41, 0x00, 0xFF]) }  // indefinite byte string
        #expect(throws: WebAuthnError.self) { try CBOR.decode([0xA2, 0x01, 0x01, 0x01, 0x02]) }  // repeated key
        #expect(throws: WebAuthnError.self) { try CBOR.decode([0x5A, 0xFF, 0xFF, 0xFF, 0xFF]) }  // length past the end
        #expect(throws: WebAuthnError.self) { try CBOR.decode(Array(repeating: 0x81, count: 20) + [0x01]) }  // nested too deep
        #expect(throws: WebAuthnError.self) { try CBOR.decode([]) }
        // Headers that declare more items than the bytes hold are refused before libcbor
        // allocates for them (an array of 2^28, a map of 2^28 pairs, nested declarations).
        #expect(throws: WebAuthnError.self) { try CBOR.decode([0x9A, 0x10, 0x00, 0x00, 0x00]) }
        #expect(throws: WebAuthnError.self) { try CBOR.decode([0xBA, 0x10, 0x00, 0x00, 0x00, 0x01, 0x01]) }
        #expect(throws: WebAuthnError.self) { try CBOR.decode([0x82, 0x9A, 0x00, 0x10, 0x00, 0x00, 0x01]) }
        #expect(throws: WebAuthnError.self) { _ = try CBOR.decodePrefix([0x9A, 0x10, 0x00, 0x00, 0x00, 0x00][...]) }
        // A map of more entries than WebAuthn has any use for.
        let wide = CBORValue.map((0..<65).map { (.int($0), .int($0)) })
        #expect(throws: WebAuthnError.self) { try CBOR.decode(CBOR.encode(wide)) }
        // What the scan lets through is what libcbor reads: nested containers, tags, the prefix of longer bytes.
        let nested = CBORValue.map([(.text("a"), .array([.int(1), .array([]), .map([])])), (.int(3), .bytes([]))])
        #expect(try CBOR.decode(CBOR.encode(nested)) == nested)
        #expect(try CBOR.decodePrefix((CBOR.encode(nested) + [0xFF, 0xFF])[...]).1 == CBOR.encode(nested).count)
        #expect(try CBOR.decode([0xC2, 0x41, 0x01]) == .other)  // a tagged bignum: read, never used
    }

    @Test func authenticatorDataIsReadByItsLayoutAndTheKeyMeasuredByLibcbor() throws {
        let authenticator = try SoftAuthenticator(origin: "https://example.com", rpID: "example.com")
        let (_, object) = try Self.registration(authenticator)
        let authData = try #require(try CBOR.decode(object)[text: "authData"]?.bytesValue)
        let parsed = try AuthenticatorData(authData)
        #expect(parsed.rpIDHash == Self.rp.idHash)
        #expect(parsed.flags.contains([.userPresent, .userVerified, .attestedCredentialData]))
        #expect(parsed.signCount == 1)
        #expect(parsed.attestedCredential?.credentialID == authenticator.credentialID)
        #expect(parsed.attestedCredential?.aaguid == authenticator.aaguid)
        #expect(parsed.attestedCredential?.publicKey == authenticator.coseKey)
        #expect(throws: WebAuthnError.self) { try AuthenticatorData(authData + [0x00]) }
        #expect(throws: WebAuthnError.self) { try AuthenticatorData(Array(authData.prefix(36))) }
        #expect(throws: WebAuthnError.self) { try AuthenticatorData(Array(authData.prefix(authData.count - 3))) }  // key cut short
    }

    @Test func coseKeysBecomeOpenSSLKeysOnlyWhenTheyAreES256OrRS256() throws {
        for algorithm in [SignatureAlgorithm.es256, .rs256] {
            let authenticator = try SoftAuthenticator(algorithm, origin: "https://example.com", rpID: "example.com")
            #expect(try COSEKey(authenticator.coseKey).algorithm == (algorithm == .es256 ? .es256 : .rs256))
        }
        let x = [UInt8](repeating: 1, count: 32)
        let refused: [CBORValue] = [
            .map([(.int(1), .int(2)), (.int(3), .int(-8)), (.int(-1), .int(6)), (.int(-2), .bytes(x))]),  // EdDSA
            .map([(.int(1), .int(2)), (.int(3), .int(-7)), (.int(-1), .int(2)), (.int(-2), .bytes(x)), (.int(-3), .bytes(x))]),  // P-384 with ES256
            .map([(.int(1), .int(2)), (.int(3), .int(-7)), (.int(-1), .int(1)), (.int(-2), .bytes(x)), (.int(-3), .bytes(x))]),  // not on the curve
            .map([(.int(1), .int(3)), (.int(3), .int(-257)), (.int(-1), .bytes([UInt8](repeating: 0xFF, count: 128))), (.int(-2), .bytes([1, 0, 1]))]),  // RSA-1024
            .array([]),
        ]
        for key in refused {
            #expect(throws: WebAuthnError.self) { try COSEKey(CBOR.encode(key)) }
        }
    }

    @Test func packedAttestationWithACertificateIsHeldToItsRules() throws {
        let good = try AttestationCertificateMaker.make()
        let authenticator = try SoftAuthenticator(origin: "https://example.com", rpID: "example.com")
        authenticator.configure { $0.attestation = .packedCertificate(good) }
        let (clientData, object) = try Self.registration(authenticator)
        let verified = try WebAuthnVerifier.verifyRegistration(
            clientData: clientData, attestationObject: object, challenge: "Y2hhbGxlbmdl", relyingParty: Self.rp, now: Self.now)
        #expect(verified.attestationFormat == "packed")
        #expect(verified.credentialID == authenticator.credentialID)

        let cases: [(AttestationCertificateMaker.Certificate, String)] = [
            (try AttestationCertificateMaker.make(ca: true), "CA"),
            (try AttestationCertificateMaker.make(subject: "/C=US/O=Test/OU=Something Else/CN=Soft"), "OU"),
        ]
        for (certificate, detail) in cases {
            authenticator.configure { $0.attestation = .packedCertificate(certificate) }
            let (clientData, object) = try Self.registration(authenticator)
            let error = #expect(throws: WebAuthnError.self) {
                try WebAuthnVerifier.verifyRegistration(clientData: clientData, attestationObject: object, challenge: "Y2hhbGxlbmdl", relyingParty: Self.rp, now: Self.now)
            }
            #expect(error?.message.contains(detail) == true, "\(detail): \(error?.message ?? "")")
        }
        // Signed by another key than the certificate's.
        let other = try AttestationCertificateMaker.make()
        let mixed = AttestationCertificateMaker.Certificate(der: good.der, key: other.key)
        authenticator.configure { $0.attestation = .packedCertificate(mixed) }
        let (mixedClientData, mixedObject) = try Self.registration(authenticator)
        #expect(throws: WebAuthnError("The packed attestation's signature does not verify with its certificate.")) {
            try WebAuthnVerifier.verifyRegistration(clientData: mixedClientData, attestationObject: mixedObject, challenge: "Y2hhbGxlbmdl", relyingParty: Self.rp, now: Self.now)
        }
        // Not yet valid: the certificate is checked against the time given.
        authenticator.configure { $0.attestation = .packedCertificate(good) }
        let (earlyClientData, earlyObject) = try Self.registration(authenticator)
        #expect(throws: WebAuthnError("The attestation certificate is not valid at this time.")) {
            try WebAuthnVerifier.verifyRegistration(
                clientData: earlyClientData, attestationObject: earlyObject, challenge: "Y2hhbGxlbmdl", relyingParty: Self.rp, now: Self.now - 86_400_000)
        }
    }

    @Test func anAssertionIsCheckedAgainstTheStoredKey() throws {
        let authenticator = try SoftAuthenticator(.rs256, origin: "https://example.com", rpID: "example.com")
        let assertion = try authenticator.assert(challenge: "Y2hhbGxlbmdl")
        let response = try #require(assertion["response"])
        func bytes(_ key: String) throws -> [UInt8] {
            let text = try #require(response[key]?.stringValue)
            return try #require(Base64URL.decode(text))
        }
        let clientData = try ClientData(try bytes("clientDataJSON"))
        let verified = try WebAuthnVerifier.verifyAssertion(
            clientData: clientData, authenticatorData: try bytes("authenticatorData"), signature: try bytes("signature"), publicKey: authenticator.coseKey,
            challenge: "Y2hhbGxlbmdl", relyingParty: Self.rp)
        #expect(verified.signCount == 1)
        // Another credential's key does not verify it; nor does another challenge.
        let other = try SoftAuthenticator(.rs256, origin: "https://example.com", rpID: "example.com")
        #expect(throws: WebAuthnError.self) {
            try WebAuthnVerifier.verifyAssertion(
                clientData: clientData, authenticatorData: try bytes("authenticatorData"), signature: try bytes("signature"), publicKey: other.coseKey,
                challenge: "Y2hhbGxlbmdl", relyingParty: Self.rp)
        }
        #expect(throws: WebAuthnError("clientDataJSON.challenge is not the challenge issued.")) {
            try WebAuthnVerifier.verifyAssertion(
                clientData: clientData, authenticatorData: try bytes("authenticatorData"), signature: try bytes("signature"), publicKey: authenticator.coseKey,
                challenge: "b3RoZXI", relyingParty: Self.rp)
        }
        #expect(throws: WebAuthnError.self) { try ClientData(Array("{\"type\":1}".utf8)) }
    }
}
