import GatehouseCore
import GatehouseCrypto
import GatehouseWebAuthn
import Synchronization

/// A software WebAuthn authenticator and browser in one, for tests: it makes ES256 or RS256
/// credentials with OpenSSL (``SigningKey``), encodes attestation objects and COSE keys with
/// libcbor, and answers creation and request options with the Level 3 JSON a browser sends
/// (base64url without padding, with the extra members Chromium adds). Every knob a tampered
/// ceremony needs is settable: origin, rp id, flags, sign count, attestation.
public final class SoftAuthenticator: Sendable {
    public enum Attestation: Sendable {
        case none
        /// `packed` self attestation: signed with the credential key.
        case packedSelf
        /// `packed` self attestation whose signature is over other bytes.
        case packedSelfWrongSignature
        /// `packed` with `x5c`: signed by the certificate's key (``AttestationCertificateMaker``).
        case packedCertificate(AttestationCertificateMaker.Certificate)
    }

    public struct Settings: Sendable {
        public var origin: String
        public var rpID: String
        public var userPresent = true
        public var userVerified = true
        public var backupEligible = false
        public var backedUp = false
        public var signCount: UInt32 = 1
        /// Added to the sign count after each ceremony (``signCount`` is what the next one presents).
        public var signCountStep: UInt32 = 1
        public var attestation = Attestation.none
        public var clientDataType: String?
    }

    public let algorithm: SignatureAlgorithm
    public let credentialID: [UInt8]
    public let aaguid: [UInt8]
    private let key: SigningKey
    private let state: Mutex<(settings: Settings, userHandle: String?)>

    public init(_ algorithm: SignatureAlgorithm = .es256, origin: String, rpID: String) throws {
        self.algorithm = algorithm
        key = try SigningKey.generate(algorithm)
        credentialID = SecureRandom.bytes(32)
        aaguid = Array(SecureRandom.bytes(16))
        state = Mutex((Settings(origin: origin, rpID: rpID), nil))
    }

    /// Changes what the next ceremonies say.
    public func configure(_ change: (inout Settings) -> Void) { state.withLock { change(&$0.settings) } }
    public var settings: Settings { state.withLock { $0.settings } }
    public var credentialIDText: String { Base64URL.encode(credentialID) }

    /// The COSE_Key of the credential, encoded by libcbor (map keys in CTAP2 canonical order).
    public var coseKey: [UInt8] {
        let jwk = key.publicJWK(kid: "k")
        switch algorithm {
        case .es256:
            return CBOR.encode(.map([
                (.int(1), .int(2)), (.int(3), .int(-7)), (.int(-1), .int(1)),
                (.int(-2), .bytes(Base64URL.decode(jwk.x!)!)), (.int(-3), .bytes(Base64URL.decode(jwk.y!)!)),
            ]))
        case .rs256:
            return CBOR.encode(.map([
                (.int(1), .int(3)), (.int(3), .int(-257)), (.int(-1), .bytes(Base64URL.decode(jwk.n!)!)), (.int(-2), .bytes(Base64URL.decode(jwk.e!)!)),
            ]))
        }
    }

    /// A `RegistrationResponseJSON` for creation options (the server's `data`).
    public func register(_ options: JSON) throws -> JSON {
        let challenge = options["challenge"]?.stringValue ?? ""
        let handle = options["user"]?["id"]?.stringValue
        let s = state.withLock { state in
            state.userHandle = handle
            let current = state.settings
            state.settings.signCount &+= state.settings.signCountStep
            return current
        }
        let clientData = clientDataJSON(type: s.clientDataType ?? "webauthn.create", challenge: challenge, origin: s.origin)
        let authData = authenticatorData(s, attested: true)
        let clientHash = Digest.sha256(clientData)
        let statement: CBORValue
        switch s.attestation {
        case .none:
            statement = .map([])
        case .packedSelf:
            statement = .map([(.text("alg"), .int(algorithm == .es256 ? -7 : -257)), (.text("sig"), .bytes(try signature(authData + clientHash)))])
        case .packedSelfWrongSignature:
            let wrong = authData + Digest.sha256(Array("other".utf8))
            statement = .map([(.text("alg"), .int(algorithm == .es256 ? -7 : -257)), (.text("sig"), .bytes(try signature(wrong)))])
        case .packedCertificate(let certificate):
            let raw = try certificate.key.sign(authData + clientHash)
            statement = .map([
                (.text("alg"), .int(-7)), (.text("sig"), .bytes(ECDSASignature.der(fromRaw: raw)!)), (.text("x5c"), .array([.bytes(certificate.der)])),
            ])
        }
        let format = if case .none = s.attestation { "none" } else { "packed" }
        let object = CBOR.encode(.map([(.text("fmt"), .text(format)), (.text("attStmt"), statement), (.text("authData"), .bytes(authData))]))
        return [
            "id": .string(credentialIDText), "rawId": .string(credentialIDText), "type": "public-key", "authenticatorAttachment": "platform",
            "clientExtensionResults": ["credProps": ["rk": true]],
            "response": [
                "clientDataJSON": .string(Base64URL.encode(clientData)), "attestationObject": .string(Base64URL.encode(object)),
                "transports": ["internal", "hybrid"], "publicKeyAlgorithm": .int(algorithm == .es256 ? -7 : -257),
                "publicKey": .string(Base64URL.encode(Array(key.verificationKey.spkiPEM().utf8))),
                "authenticatorData": .string(Base64URL.encode(self.authenticatorData(s, attested: true))),
            ],
        ]
    }

    /// An `AuthenticationResponseJSON` for request options (the server's `data`) or a challenge;
    /// the sign count then moves on by ``Settings/signCountStep``. `userHandle`: nil for the
    /// handle of the registration, `.some(nil)` for none.
    public func assert(_ options: JSON, userHandle: String?? = nil) throws -> JSON {
        try assert(challenge: options["challenge"]?.stringValue ?? "", userHandle: userHandle)
    }

    public func assert(challenge: String, userHandle: String?? = nil) throws -> JSON {
        let (s, storedHandle) = state.withLock { state in
            let current = state
            state.settings.signCount &+= state.settings.signCountStep
            return (current.settings, current.userHandle)
        }
        let clientData = clientDataJSON(type: s.clientDataType ?? "webauthn.get", challenge: challenge, origin: s.origin)
        let authData = authenticatorData(s, attested: false)
        let sig = try signature(authData + Digest.sha256(clientData))
        var response: [String: JSON] = [
            "clientDataJSON": .string(Base64URL.encode(clientData)), "authenticatorData": .string(Base64URL.encode(authData)),
            "signature": .string(Base64URL.encode(sig)),
        ]
        let handle = userHandle ?? storedHandle
        if let handle { response["userHandle"] = .string(handle) }
        return [
            "id": .string(credentialIDText), "rawId": .string(credentialIDText), "type": "public-key", "authenticatorAttachment": "platform",
            "clientExtensionResults": [:], "response": .object(response),
        ]
    }

    /// A signature as WebAuthn carries it: DER for ECDSA.
    private func signature(_ message: [UInt8]) throws -> [UInt8] {
        let raw = try key.sign(message)
        return algorithm == .es256 ? ECDSASignature.der(fromRaw: raw)! : raw
    }

    private func clientDataJSON(type: String, challenge: String, origin: String) -> [UInt8] {
        // Member order and spacing as Chromium writes them.
        JSON.object(["type": .string(type), "challenge": .string(challenge), "origin": .string(origin), "crossOrigin": false]).serialized()
    }

    private func authenticatorData(_ s: Settings, attested: Bool) -> [UInt8] {
        var flags: UInt8 = 0
        if s.userPresent { flags |= 0x01 }
        if s.userVerified { flags |= 0x04 }
        if s.backupEligible { flags |= 0x08 }
        if s.backedUp { flags |= 0x10 }
        if attested { flags |= 0x40 }
        var data = Digest.sha256(Array(s.rpID.utf8))
        data.append(flags)
        data += [UInt8(s.signCount >> 24 & 0xFF), UInt8(s.signCount >> 16 & 0xFF), UInt8(s.signCount >> 8 & 0xFF), UInt8(s.signCount & 0xFF)]
        if attested {
            data += aaguid
            data += [UInt8(credentialID.count >> 8), UInt8(credentialID.count & 0xFF)]
            data += credentialID
            data += coseKey
        }
        return data
    }
}
