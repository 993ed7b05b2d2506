import Foundation

/// A way to answer (or enrol for) the second step. A struct rather than an enum so that a value a
/// newer server adds decodes too (as its raw string: the standard library's `RawRepresentable` coding).
public struct MFAMethod: RawRepresentable, Codable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// A 6-digit code of an authenticator app (RFC 6238).
    public static let totp = MFAMethod(rawValue: "totp")
    /// One of the 10 recovery codes shown at enrolment.
    public static let recoveryCode = MFAMethod(rawValue: "recovery_code")
    /// A passkey of the user.
    public static let passkey = MFAMethod(rawValue: "passkey")
}

/// What an `auth/mfa-required` answer asks for; thrown as ``GatehouseError/mfaRequired(_:)`` by
/// every sign-in call (password, emailed code, Apple, Google, Firebase, the web flow's exchange).
///
/// - ``enroll`` false: ask the user for one of ``methods`` and call
///   ``GatehouseClient/verifyMFA(_:code:)``, ``GatehouseClient/verifyMFA(_:recoveryCode:)`` or
///   ``GatehouseClient/verifyMFA(_:passkey:)``.
/// - ``enroll`` true (the app requires a second factor and the user has none): enrol one of
///   ``methods`` with this challenge (``GatehouseClient/enrollTOTP(name:during:)`` and
///   ``GatehouseClient/confirmTOTP(id:code:during:)``, or
///   ``GatehouseClient/passkeyRegistrationOptions(during:)`` and
///   ``GatehouseClient/registerPasskey(_:name:during:)``), then
///   ``GatehouseClient/finishMFAEnrollment(_:)``.
///
/// The token is single use and lives ``expiresIn`` seconds (5 minutes); after that, sign in
/// again. Printed, the token is left out.
public struct MFAChallenge: Sendable, Equatable, CustomStringConvertible {
    /// The opaque `mfa_token` (`mfa_…`).
    public let mfaToken: String
    /// What the user can answer with; when ``enroll`` is true, what the app lets them enrol.
    public let methods: [MFAMethod]
    /// The user has no factor yet and the app requires one: enrol first.
    public let enroll: Bool
    /// Seconds the token lives from ``receivedAt`` (300).
    public let expiresIn: TimeInterval
    /// When the client received the challenge.
    public let receivedAt: Date
    /// The request's id, for a report.
    public let requestID: String?

    public init(mfaToken: String, methods: [MFAMethod], enroll: Bool, expiresIn: TimeInterval, receivedAt: Date = Date(), requestID: String? = nil) {
        self.mfaToken = mfaToken
        self.methods = methods
        self.enroll = enroll
        self.expiresIn = expiresIn
        self.receivedAt = receivedAt
        self.requestID = requestID
    }

    /// When the token stops working.
    public var expiresAt: Date { receivedAt.addingTimeInterval(expiresIn) }

    public var description: String {
        "MFAChallenge(methods: \(methods.map(\.rawValue)), enroll: \(enroll), expiresIn: \(expiresIn), mfaToken: <redacted>)"
    }

    /// The challenge of an `auth/mfa-required` answer, or nil when it carries no `mfa_token`.
    init?(_ answer: HTTPAnswer, problem: Problem) {
        struct Body: Decodable {
            let mfa_token: String?
            let methods: [MFAMethod]?
            let enroll: Bool?
            let expires_in: Double?
        }
        guard let body = try? JSONDecoder().decode(Body.self, from: answer.body), let token = body.mfa_token, !token.isEmpty else { return nil }
        self.init(
            mfaToken: token, methods: body.methods ?? [], enroll: body.enroll ?? false, expiresIn: body.expires_in ?? 300,
            requestID: problem.requestID)
    }
}

/// A TOTP factor being enrolled (`POST /v1/me/mfa/totp`): show ``otpauthURL`` as a QR code (or
/// ``secret`` for typing in), then confirm with a code from the authenticator app. Printed, the
/// secret is left out.
public struct TOTPEnrollment: Decodable, Sendable, Equatable, CustomStringConvertible {
    /// The factor's id, for ``GatehouseClient/confirmTOTP(id:code:during:)``.
    public let id: String
    /// The shared secret, base32 without padding.
    public let secret: String
    /// `otpauth://totp/<issuer>:<email>?secret=…&issuer=…&algorithm=SHA1&digits=6&period=30`.
    public let otpauthURL: URL

    enum CodingKeys: String, CodingKey {
        case id, secret
        case otpauthURL = "otpauth_url"
    }

    public var description: String { "TOTPEnrollment(id: \(id), secret: <redacted>)" }
}

/// The app's second-factor policy.
public struct MFAPolicy: RawRepresentable, Codable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// No second step is asked and nothing can be enrolled.
    public static let off = MFAPolicy(rawValue: "off")
    /// Users may enrol; those who did are asked at every sign-in.
    public static let optional = MFAPolicy(rawValue: "optional")
    /// Every user needs a factor; one without enrols at their next sign-in.
    public static let required = MFAPolicy(rawValue: "required")
}

/// One enrolled TOTP factor (no secret).
public struct MFAFactor: Decodable, Sendable, Equatable {
    public let id: String
    /// `totp` (`passkey` too, in ``AccountExport/factors``).
    public let type: String
    public let name: String?
    public let createdAt: Date
    public let lastUsedAt: Date?

    enum CodingKeys: String, CodingKey {
        case id, type, name
        case createdAt = "created_at"
        case lastUsedAt = "last_used_at"
    }
}

/// The user's second factors (`GET /v1/me/mfa`).
public struct MFAStatus: Decodable, Sendable, Equatable {
    /// The app's policy.
    public let policy: MFAPolicy
    /// The TOTP factors.
    public let factors: [MFAFactor]
    /// How many passkeys the user has (``GatehouseClient/listPasskeys()`` lists them).
    public let passkeys: Int
    /// How many unused recovery codes are left.
    public let recoveryCodesLeft: Int

    enum CodingKeys: String, CodingKey {
        case policy, factors, passkeys
        case recoveryCodesLeft = "recovery_codes_left"
    }
}

extension GatehouseClient {
    // MARK: - Second factors

    /// `GET /v1/me/mfa`: the app's policy and the user's factors (no secrets).
    public func listFactors() async throws -> MFAStatus {
        try Transport.decode(MFAStatus.self, from: try await authorized("GET", "/v1/me/mfa"))
    }

    @available(*, deprecated, renamed: "listFactors()")
    public func factors() async throws -> MFAStatus { try await listFactors() }

    /// `POST /v1/me/mfa/totp` (recent login): starts a TOTP enrolment. During a sign-in that must
    /// enrol first (``MFAChallenge/enroll``), pass the challenge as `during`: its token
    /// authorizes the call instead of a session.
    public func enrollTOTP(name: String? = nil, during challenge: MFAChallenge? = nil) async throws -> TOTPEnrollment {
        var body: [String: JSONValue] = [:]
        if let name { body["name"] = .string(name) }
        return try Transport.decode(TOTPEnrollment.self, from: try await send("POST", "/v1/me/mfa/totp", body: .json(body), during: challenge))
    }

    /// `POST /v1/me/mfa/totp/{id}/confirm` with a code from the authenticator app: the factor is
    /// on, and the answer is the 10 recovery codes, shown this once (a new confirmation replaces
    /// the earlier set). A wrong code: `auth/invalid-code`.
    public func confirmTOTP(id: String, code: String, during challenge: MFAChallenge? = nil) async throws -> [String] {
        struct Codes: Decodable { let recovery_codes: [String] }
        let answer = try await send("POST", "/v1/me/mfa/totp/\(pathSegment(id))/confirm", body: .json(["code": .string(code)]), during: challenge)
        return try Transport.decode(Codes.self, from: answer).recovery_codes
    }

    /// `DELETE /v1/me/mfa/totp/{id}` (recent login).
    public func removeTOTP(id: String) async throws {
        try Transport.check(try await authorized("DELETE", "/v1/me/mfa/totp/\(pathSegment(id))"))
    }

    // MARK: - The second step

    /// `POST /v1/auth/mfa/verify` with a code of the authenticator app: the session the sign-in
    /// would have given. A wrong code: `auth/invalid-code` (the challenge stays usable until it
    /// expires; too many: `auth/too-many-attempts`); a used or expired challenge:
    /// `auth/invalid-mfa-token`.
    public func verifyMFA(_ challenge: MFAChallenge, code: String) async throws -> SignInResult {
        try await signIn("/v1/auth/mfa/verify", ["mfa_token": .string(challenge.mfaToken), "code": .string(code)])
    }

    /// The second step with one of the recovery codes (each works once).
    public func verifyMFA(_ challenge: MFAChallenge, recoveryCode: String) async throws -> SignInResult {
        try await signIn("/v1/auth/mfa/verify", ["mfa_token": .string(challenge.mfaToken), "recovery_code": .string(recoveryCode)])
    }

    /// The second step with a passkey: ask for its assertion with
    /// ``passkeySignInOptions(for:)`` (given this challenge, it lists the user's passkeys).
    public func verifyMFA(_ challenge: MFAChallenge, passkey: PasskeyAssertion) async throws -> SignInResult {
        try await signIn("/v1/auth/mfa/verify", ["mfa_token": .string(challenge.mfaToken), "passkey": passkey.jsonValue])
    }

    /// After enrolling with an ``MFAChallenge/enroll`` challenge (a TOTP factor confirmed or a
    /// passkey registered with it): `POST /v1/auth/mfa/verify` with the token alone finishes the
    /// sign-in.
    public func finishMFAEnrollment(_ challenge: MFAChallenge) async throws -> SignInResult {
        try await signIn("/v1/auth/mfa/verify", ["mfa_token": .string(challenge.mfaToken)])
    }

    /// A call authorized by the session, or by an enrolling challenge's token.
    func send(_ method: String, _ path: String, body: RequestBody? = nil, during challenge: MFAChallenge?) async throws -> HTTPAnswer {
        guard let challenge else { return try await authorized(method, path, body: body) }
        return try await transport.send(method, path, body: body, bearer: challenge.mfaToken)
    }
}
