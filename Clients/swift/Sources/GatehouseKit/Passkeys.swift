import Foundation

// Passkeys (WebAuthn Level 3). Gatehouse answers the options an authenticator needs and takes
// back what the authenticator made, in WebAuthn's JSON encodings (binary fields as base64url
// without padding). These types hold the binary fields as `Data`, as
// `ASAuthorizationController` takes and gives them; on Apple platforms
// (`import AuthenticationServices`) ``PasskeyRegistrationOptions/authorizationRequest()``,
// ``PasskeySignInOptions/authorizationRequest()``, ``PasskeyRegistration/init(_:)`` and
// ``PasskeyAssertion/init(_:)`` do the translation.

/// What `POST /v1/me/passkeys/options` answers: the creation options for a new passkey
/// (`ASAuthorizationPlatformPublicKeyCredentialProvider(relyingPartyIdentifier:)` and its
/// `createCredentialRegistrationRequest(challenge:name:userID:)`). The user must verify
/// (`userVerificationPreference = .required`) and the passkey is discoverable.
public struct PasskeyRegistrationOptions: Sendable, Equatable {
    /// The challenge (single use, 5 minutes).
    public let challenge: Data
    /// The WebAuthn user handle: opaque and random per user (not the user's id).
    public let userID: Data
    /// The account name the passkey shows (the user's email).
    public let userName: String
    /// The name to show for the user.
    public let userDisplayName: String
    /// The app's `passkeys.rp_id`: the domain the passkey is bound to.
    public let relyingPartyIdentifier: String
    /// The app's name.
    public let relyingPartyName: String
    /// The user's existing passkeys, which the authenticator should not register again.
    public let excludedCredentialIDs: [Data]
    /// COSE algorithms Gatehouse takes (-7 ES256, -257 RS256).
    public let algorithms: [Int]
    /// How long the ceremony may take.
    public let timeout: TimeInterval

    public init(
        challenge: Data, userID: Data, userName: String, userDisplayName: String, relyingPartyIdentifier: String, relyingPartyName: String,
        excludedCredentialIDs: [Data] = [], algorithms: [Int] = [-7, -257], timeout: TimeInterval = 300
    ) {
        self.challenge = challenge
        self.userID = userID
        self.userName = userName
        self.userDisplayName = userDisplayName
        self.relyingPartyIdentifier = relyingPartyIdentifier
        self.relyingPartyName = relyingPartyName
        self.excludedCredentialIDs = excludedCredentialIDs
        self.algorithms = algorithms
        self.timeout = timeout
    }
}

extension PasskeyRegistrationOptions: Decodable {
    private struct JSON: Decodable {
        struct Party: Decodable {
            let id: String
            let name: String?
        }
        struct User: Decodable {
            let id: String
            let name: String
            let displayName: String?
        }
        struct Parameter: Decodable { let alg: Int }
        let challenge: String
        let rp: Party
        let user: User
        let pubKeyCredParams: [Parameter]?
        let timeout: Double?
        let excludeCredentials: [CredentialDescriptor]?
    }

    public init(from decoder: any Decoder) throws {
        let json = try JSON(from: decoder)
        self.init(
            challenge: try Base64URL.decode(json.challenge, field: "challenge"), userID: try Base64URL.decode(json.user.id, field: "user.id"),
            userName: json.user.name, userDisplayName: json.user.displayName ?? json.user.name, relyingPartyIdentifier: json.rp.id,
            relyingPartyName: json.rp.name ?? json.rp.id,
            excludedCredentialIDs: try (json.excludeCredentials ?? []).map { try Base64URL.decode($0.id, field: "excludeCredentials.id") },
            algorithms: json.pubKeyCredParams?.map(\.alg) ?? [-7, -257], timeout: (json.timeout ?? 300_000) / 1000)
    }
}

/// What `POST /v1/auth/passkey/options` answers: the request options of a passkey sign-in,
/// reauthentication or second step (`createCredentialAssertionRequest(challenge:)`).
public struct PasskeySignInOptions: Sendable, Equatable {
    /// The challenge (single use, 5 minutes, for this purpose only).
    public let challenge: Data
    /// The app's `passkeys.rp_id`.
    public let relyingPartyIdentifier: String
    /// The passkeys that may answer; empty for a sign-in without an email (any passkey of the
    /// app, chosen by the user), the user's passkeys for a second step.
    public let allowedCredentialIDs: [Data]
    /// `required`: the user must verify.
    public let userVerification: String
    /// How long the ceremony may take.
    public let timeout: TimeInterval

    public init(challenge: Data, relyingPartyIdentifier: String, allowedCredentialIDs: [Data] = [], userVerification: String = "required", timeout: TimeInterval = 300) {
        self.challenge = challenge
        self.relyingPartyIdentifier = relyingPartyIdentifier
        self.allowedCredentialIDs = allowedCredentialIDs
        self.userVerification = userVerification
        self.timeout = timeout
    }
}

extension PasskeySignInOptions: Decodable {
    private struct JSON: Decodable {
        let challenge: String
        let rpId: String
        let allowCredentials: [CredentialDescriptor]?
        let userVerification: String?
        let timeout: Double?
    }

    public init(from decoder: any Decoder) throws {
        let json = try JSON(from: decoder)
        self.init(
            challenge: try Base64URL.decode(json.challenge, field: "challenge"), relyingPartyIdentifier: json.rpId,
            allowedCredentialIDs: try (json.allowCredentials ?? []).map { try Base64URL.decode($0.id, field: "allowCredentials.id") },
            userVerification: json.userVerification ?? "required", timeout: (json.timeout ?? 300_000) / 1000)
    }
}

/// `{"type": "public-key", "id": "<base64url>"}`.
private struct CredentialDescriptor: Decodable {
    let id: String
}

/// A new passkey as the authenticator made it (what
/// `ASAuthorizationPlatformPublicKeyCredentialRegistration` gives), for
/// ``GatehouseClient/registerPasskey(_:name:during:)``. Encoded, it is WebAuthn's
/// `RegistrationResponseJSON`.
public struct PasskeyRegistration: Sendable, Equatable, Encodable {
    public let credentialID: Data
    /// The client data JSON, byte for byte as the authenticator's platform made it.
    public let rawClientDataJSON: Data
    /// The CBOR attestation object.
    public let rawAttestationObject: Data
    /// How the authenticator can be reached (`internal`, `hybrid`, …), when known.
    public let transports: [String]
    /// `platform` or `cross-platform`, when known.
    public let authenticatorAttachment: String?

    public init(credentialID: Data, rawClientDataJSON: Data, rawAttestationObject: Data, transports: [String] = [], authenticatorAttachment: String? = nil) {
        self.credentialID = credentialID
        self.rawClientDataJSON = rawClientDataJSON
        self.rawAttestationObject = rawAttestationObject
        self.transports = transports
        self.authenticatorAttachment = authenticatorAttachment
    }

    /// `RegistrationResponseJSON`.
    var jsonValue: JSONValue {
        var response: [String: JSONValue] = [
            "clientDataJSON": .string(Base64URL.encode(rawClientDataJSON)), "attestationObject": .string(Base64URL.encode(rawAttestationObject)),
        ]
        if !transports.isEmpty { response["transports"] = .array(transports.map(JSONValue.string)) }
        return .object(PublicKeyCredentialJSON.members(credentialID, response: response, attachment: authenticatorAttachment))
    }

    public func encode(to encoder: any Encoder) throws { try jsonValue.encode(to: encoder) }
}

/// A passkey's answer to a challenge (what `ASAuthorizationPlatformPublicKeyCredentialAssertion`
/// gives), for ``GatehouseClient/signInWithPasskey(_:)``, ``GatehouseClient/verifyMFA(_:passkey:)`` and
/// ``GatehouseClient/reauthenticate(passkey:)``. Encoded, it is WebAuthn's
/// `AuthenticationResponseJSON`.
public struct PasskeyAssertion: Sendable, Equatable, Encodable {
    public let credentialID: Data
    /// The client data JSON, byte for byte as the authenticator's platform made it.
    public let rawClientDataJSON: Data
    public let rawAuthenticatorData: Data
    public let signature: Data
    /// The user handle the passkey was registered with (``PasskeyRegistrationOptions/userID``).
    public let userID: Data?
    /// `platform` or `cross-platform`, when known.
    public let authenticatorAttachment: String?

    public init(credentialID: Data, rawClientDataJSON: Data, rawAuthenticatorData: Data, signature: Data, userID: Data?, authenticatorAttachment: String? = nil) {
        self.credentialID = credentialID
        self.rawClientDataJSON = rawClientDataJSON
        self.rawAuthenticatorData = rawAuthenticatorData
        self.signature = signature
        self.userID = userID
        self.authenticatorAttachment = authenticatorAttachment
    }

    /// `AuthenticationResponseJSON`.
    var jsonValue: JSONValue {
        var response: [String: JSONValue] = [
            "clientDataJSON": .string(Base64URL.encode(rawClientDataJSON)), "authenticatorData": .string(Base64URL.encode(rawAuthenticatorData)),
            "signature": .string(Base64URL.encode(signature)),
        ]
        if let userID { response["userHandle"] = .string(Base64URL.encode(userID)) }
        return .object(PublicKeyCredentialJSON.members(credentialID, response: response, attachment: authenticatorAttachment))
    }

    public func encode(to encoder: any Encoder) throws { try jsonValue.encode(to: encoder) }
}

/// The members both JSON encodings share.
private enum PublicKeyCredentialJSON {
    static func members(_ credentialID: Data, response: [String: JSONValue], attachment: String?) -> [String: JSONValue] {
        let id = Base64URL.encode(credentialID)
        var members: [String: JSONValue] = [
            "id": .string(id), "rawId": .string(id), "type": .string("public-key"), "response": .object(response), "clientExtensionResults": .object([:]),
        ]
        if let attachment { members["authenticatorAttachment"] = .string(attachment) }
        return members
    }
}

/// One of the user's passkeys (no key material).
public struct Passkey: Decodable, Sendable, Equatable {
    public let id: String
    public let name: String?
    public let createdAt: Date
    public let lastUsedAt: Date?
    /// The passkey is synced (iCloud Keychain, Google Password Manager): it survives a lost device.
    public let backedUp: Bool
    /// The authenticator model's AAGUID, when it gave one.
    public let aaguid: String?

    enum CodingKeys: String, CodingKey {
        case id, name, aaguid
        case createdAt = "created_at"
        case lastUsedAt = "last_used_at"
        case backedUp = "backed_up"
    }
}

extension Base64URL {
    static func encode(_ data: Data) -> String { encode([UInt8](data)) }

    struct InvalidText: Error {
        let field: String
    }

    /// Unpadded (or padded) base64url to bytes; anything else throws.
    static func decode(_ text: String, field: String) throws -> Data {
        guard text.utf8.allSatisfy({ $0 < 128 }), !text.contains("+"), !text.contains("/") else { throw InvalidText(field: field) }
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        if standard.count % 4 != 0 { standard += String(repeating: "=", count: 4 - standard.count % 4) }
        guard let data = Data(base64Encoded: standard) else { throw InvalidText(field: field) }
        return data
    }
}

extension GatehouseClient {
    // MARK: - Passkeys

    /// `POST /v1/me/passkeys/options` (recent login, or an enrolling ``MFAChallenge`` as
    /// `during`): the options for a new passkey. Without `passkeys` settings the app answers
    /// `auth/provider-not-configured`.
    public func passkeyRegistrationOptions(during challenge: MFAChallenge? = nil) async throws -> PasskeyRegistrationOptions {
        try Transport.decode(PasskeyRegistrationOptions.self, from: try await send("POST", "/v1/me/passkeys/options", body: .json([:]), during: challenge))
    }

    /// `POST /v1/me/passkeys`: keeps the passkey the authenticator made from
    /// ``passkeyRegistrationOptions(during:)``. A credential that fails a check:
    /// `auth/invalid-credential`.
    public func registerPasskey(_ registration: PasskeyRegistration, name: String? = nil, during challenge: MFAChallenge? = nil) async throws -> Passkey {
        var body: [String: JSONValue] = ["credential": registration.jsonValue]
        if let name { body["name"] = .string(name) }
        return try Transport.decode(Passkey.self, from: try await send("POST", "/v1/me/passkeys", body: .json(body), during: challenge))
    }

    /// `GET /v1/me/passkeys`.
    public func listPasskeys() async throws -> [Passkey] {
        try Transport.decode([Passkey].self, from: try await authorized("GET", "/v1/me/passkeys"))
    }

    @available(*, deprecated, renamed: "listPasskeys()")
    public func passkeys() async throws -> [Passkey] { try await listPasskeys() }

    /// `PATCH /v1/me/passkeys/{id}`.
    public func renamePasskey(id: String, name: String) async throws -> Passkey {
        try Transport.decode(Passkey.self, from: try await authorized("PATCH", "/v1/me/passkeys/\(pathSegment(id))", body: .json(["name": .string(name)])))
    }

    /// `DELETE /v1/me/passkeys/{id}` (recent login).
    public func removePasskey(id: String) async throws {
        try Transport.check(try await authorized("DELETE", "/v1/me/passkeys/\(pathSegment(id))"))
    }

    /// `POST /v1/auth/passkey/options` (no session needed): the options of a passkey sign-in
    /// without an email, or, given an ``MFAChallenge``, of that second step (the user's passkeys
    /// as ``PasskeySignInOptions/allowedCredentialIDs``).
    public func passkeySignInOptions(for challenge: MFAChallenge? = nil) async throws -> PasskeySignInOptions {
        var body: [String: JSONValue] = [:]
        if let challenge { body["mfa_token"] = .string(challenge.mfaToken) }
        return try Transport.decode(PasskeySignInOptions.self, from: try await transport.send("POST", "/v1/auth/passkey/options", body: .json(body)))
    }

    /// `POST /v1/auth/passkey/verify`: signs in with a passkey's assertion of
    /// ``passkeySignInOptions(for:)`` (without a challenge). A passkey is two factors in one: no
    /// second step follows.
    public func signInWithPasskey(_ assertion: PasskeyAssertion) async throws -> SignInResult {
        try await signIn("/v1/auth/passkey/verify", ["credential": assertion.jsonValue])
    }

    @available(*, deprecated, renamed: "signInWithPasskey(_:)")
    public func signIn(passkey: PasskeyAssertion) async throws -> SignInResult { try await signInWithPasskey(passkey) }

    /// `POST /v1/auth/passkey/options` as the signed-in user: a reauthentication challenge for
    /// ``reauthenticate(passkey:)``.
    public func passkeyReauthenticationOptions() async throws -> PasskeySignInOptions {
        try Transport.decode(PasskeySignInOptions.self, from: try await authorized("POST", "/v1/auth/passkey/options", body: .json([:])))
    }

    /// `POST /v1/auth/reauthenticate` with one of the user's passkeys.
    public func reauthenticate(passkey: PasskeyAssertion) async throws {
        try await reauthenticate(["passkey": passkey.jsonValue])
    }
}
