import GatehouseCrypto
import GatehouseWebAuthn

/// Passkeys (WebAuthn Level 3, ADR 0028): registration by a signed-in user, sign-in without an
/// email (discoverable credentials), reauthentication, and the second step of a sign-in
/// (``verifySecondStep(app:userID:credential:origin:)``). The ceremonies' cryptography is
/// GatehouseWebAuthn's; here are the challenges (issued, single use, 5 minutes, bound to the app,
/// a purpose and a user), the credentials' owners, the sign counts and the events.
public final class PasskeyService: Sendable {
    private let store: any Store
    private let sessions: SessionService
    private let gate: SignInGate
    private let units: UnitOfWork
    private let clock: any Clock
    private let metrics: any DomainMetrics

    /// How long an issued challenge may be answered (also the options' `timeout`).
    public static let challengeLifetimeMillis: Int64 = 300_000
    /// Passkeys one user may hold.
    public static let maximumPerUser = 20

    public init(store: any Store, sessions: SessionService, gate: SignInGate, units: UnitOfWork, clock: any Clock, metrics: any DomainMetrics = NoDomainMetrics()) {
        self.store = store
        self.sessions = sessions
        self.gate = gate
        self.units = units
        self.clock = clock
        self.metrics = metrics
    }

    // MARK: - Registering

    /// Creation options (`PublicKeyCredentialCreationOptionsJSON`) for the user to register a
    /// passkey: a new `register` challenge, the user's opaque handle, the passkeys to exclude.
    public func creationOptions(app: AppContext, user: UserID, origin: RequestOrigin) throws -> JSON {
        let rp = try relyingParty(app)
        let data = store.app(app.id)
        try gate.limitAuth(app, data, origin)
        guard let account = try data.users.user(user) else { throw GatehouseError(.sessionRevoked, "This account no longer exists.") }
        // Not a way to upgrade an anonymous account: a passkey is registered to an account with
        // a way in already (and serves as its second factor too).
        try AnonymousUsers.requirePermanent(account, "register a passkey")
        let handle = try data.passkeys.userHandle(of: user, proposing: Base64URL.encode(SecureRandom.bytes(32)), now: clock.nowMillis())
        let challenge = try issueChallenge(data, purpose: .register, user: user)
        let existing = try data.passkeys.passkeys(of: user)
        let name = account.email ?? user.rawValue
        return [
            "challenge": .string(challenge),
            "rp": ["id": .string(rp.id), "name": .string(app.settings.name)],
            "user": ["id": .string(handle), "name": .string(name), "displayName": .string(account.shownName ?? name)],
            "pubKeyCredParams": .array(COSEAlgorithm.allCases.map { ["type": "public-key", "alg": .int(Int64($0.rawValue))] }),
            "timeout": .int(Self.challengeLifetimeMillis),
            "excludeCredentials": .array(existing.map(Self.descriptor)),
            "authenticatorSelection": ["residentKey": "required", "requireResidentKey": true, "userVerification": "required"],
            "attestation": "none",
        ]
    }

    /// Registers the passkey of a `RegistrationResponseJSON` made from the user's creation
    /// options; records `passkey.added`.
    public func register(app: AppContext, user: UserID, session: SessionID?, credential: JSON, name: String?, origin: RequestOrigin) throws -> Passkey {
        let rp = try relyingParty(app)
        let data = store.app(app.id)
        let response = try RegistrationResponse(credential)
        let clientData = try Self.clientData(response.clientDataJSON)
        try takeChallenge(data, clientData, purpose: .register, user: user)
        let verified: VerifiedRegistration
        do {
            verified = try WebAuthnVerifier.verifyRegistration(
                clientData: clientData, attestationObject: response.attestationObject, challenge: clientData.challenge, relyingParty: rp, now: clock.nowMillis())
        } catch {
            throw Self.refusal(error, field: "credential.response.attestationObject")
        }
        guard verified.credentialID == response.rawID else {
            throw GatehouseError(.invalidCredential, "The credential's rawId is not the credential id in its authenticator data.")
        }
        let now = clock.nowMillis()
        let passkey = Passkey(
            id: .generate(), userID: user, credentialID: Base64URL.encode(verified.credentialID), publicKey: Base64URL.encode(verified.publicKey),
            algorithm: Int64(verified.algorithm.rawValue), signCount: Int64(verified.signCount), aaguid: Self.uuid(verified.aaguid),
            backupEligible: verified.backupEligible, backedUp: verified.backedUp, transports: response.transports,
            name: name ?? "Passkey", createdAt: now, lastUsedAt: nil)
        try units.run(data) { tx in
            guard try tx.passkeys.passkeys(of: user).count < Self.maximumPerUser else {
                throw GatehouseError.validation("credential", "An account may hold at most \(Self.maximumPerUser) passkeys: remove one first.")
            }
            try PasskeyConflict.answering { try tx.passkeys.insert(passkey) }
            try tx.auditLog.record(Event(
                type: .passkeyAdded, userID: user, sessionID: session, ip: origin.ip, userAgent: origin.userAgent,
                data: ["passkey_id": .string(passkey.id.rawValue), "name": .string(passkey.name), "aaguid": .string(passkey.aaguid),
                       "backup_eligible": .bool(passkey.backupEligible)],
                createdAt: now))
        }
        return passkey
    }

    // MARK: - The user's passkeys

    public func list(app: AppContext, user: UserID) throws -> [Passkey] {
        try store.app(app.id).passkeys.passkeys(of: user)
    }

    public func rename(app: AppContext, user: UserID, id: String, name: String) throws -> Passkey {
        guard let id = PasskeyID(parsing: id), let renamed = try store.app(app.id).passkeys.rename(id, of: user, to: name) else { throw Self.notFound }
        return renamed
    }

    /// Removes one of the user's passkeys (`by`: `user`, or `admin` for a tenant admin's removal);
    /// records `passkey.removed`.
    public func remove(app: AppContext, user: UserID, session: SessionID?, id: String, by: String, origin: RequestOrigin) throws {
        guard let id = PasskeyID(parsing: id) else { throw Self.notFound }
        let data = store.app(app.id)
        let now = clock.nowMillis()
        try units.run(data) { tx in
            guard let removed = try tx.passkeys.delete(id, of: user) else { throw Self.notFound }
            try tx.auditLog.record(Event(
                type: .passkeyRemoved, userID: user, sessionID: session, ip: origin.ip, userAgent: origin.userAgent,
                data: ["passkey_id": .string(removed.id.rawValue), "by": .string(by)], createdAt: now))
        }
    }

    // MARK: - Using a passkey

    /// Request options (`PublicKeyCredentialRequestOptionsJSON`) with a new challenge of
    /// `purpose`: for a sign-in, no user and no `allowCredentials` (the browser offers the
    /// discoverable passkeys of the rp id); for a reauthentication or a second step, the user's.
    public func requestOptions(app: AppContext, purpose: PasskeyPurpose, user: UserID?, origin: RequestOrigin) throws -> JSON {
        let rp = try relyingParty(app)
        let data = store.app(app.id)
        guard purpose != .register, (purpose == .signIn) == (user == nil) else {
            throw InternalError("request options for \(purpose.rawValue) \(user == nil ? "without" : "with") a user")
        }
        // Each stores a challenge, and a sign-in's anyone with the app key may ask for: counted
        // with the app's sign-ins per address.
        try gate.limitAuth(app, data, origin)
        let challenge = try issueChallenge(data, purpose: purpose, user: user)
        let allowed = try user.map { try data.passkeys.passkeys(of: $0) } ?? []
        return [
            "challenge": .string(challenge), "rpId": .string(rp.id), "timeout": .int(Self.challengeLifetimeMillis), "userVerification": "required",
            "allowCredentials": .array(allowed.map(Self.descriptor)),
        ]
    }

    /// The request options of a second step for `userID` (`POST /v1/auth/passkey/options {mfa_token}`, through `MFAService`).
    public func secondStepOptions(app: AppContext, userID: UserID, origin: RequestOrigin) throws -> JSON {
        try requestOptions(app: app, purpose: .secondStep, user: userID, origin: origin)
    }

    /// Signs in with a discoverable passkey: the credential is found by its id within the app,
    /// its `userHandle` must be its owner's. Opens a session of method `passkey` (`amr`
    /// `hwk`/`swk` and `mfa`).
    public func signIn(app: AppContext, credential: JSON, origin: RequestOrigin) throws -> SessionGrant {
        try metrics.countingSignIn(.passkey) {
            let data = store.app(app.id)
            try gate.limitAuth(app, data, origin)
            let use = try verifyUse(app, data, credential: credential, purpose: .signIn, user: nil, origin: origin)
            guard let user = try data.users.user(use.passkey.userID) else { throw GatehouseError(.invalidCredential, "This passkey's account no longer exists.") }
            return try sessions.startSession(app: app, data, user: user, method: .passkey, isNewUser: false, origin: origin, secondStep: .done(amr: [use.amr, "mfa"])).session()
        }
    }

    /// Proves the signed-in user again with one of their passkeys (`POST /v1/auth/reauthenticate`).
    public func reauthenticate(app: AppContext, claims: AccessClaims, credential: JSON, origin: RequestOrigin) throws -> (token: String, expiresIn: Int64) {
        let data = store.app(app.id)
        try gate.limitAuth(app, data, origin)
        try sessions.requireReauthenticationGuessesLeft(app, claims: claims)
        do {
            _ = try verifyUse(app, data, credential: credential, purpose: .reauth, user: claims.userID, origin: origin)
        } catch let error as GatehouseError where error.code == .invalidCredential {
            try sessions.countFailedReauthentication(app, claims: claims)
            throw error
        }
        return try sessions.refreshAuthTime(app: app, claims: claims)
    }

    /// The second step of a sign-in answered with a passkey: the credential must be one of
    /// `userID`'s, made over a `second_step` challenge issued to that user
    /// (``secondStepOptions(app:userID:origin:)``). Records the use (sign count); opens nothing.
    public func verifySecondStep(app: AppContext, userID: UserID, credential: JSON, origin: RequestOrigin) throws -> PasskeyUse {
        try verifyUse(app, store.app(app.id), credential: credential, purpose: .secondStep, user: userID, origin: origin)
    }

    private func verifyUse(
        _ app: AppContext, _ data: any AppScopedStore, credential: JSON, purpose: PasskeyPurpose, user: UserID?, origin: RequestOrigin
    ) throws -> PasskeyUse {
        let rp = try relyingParty(app)
        let response = try AuthenticationResponse(credential)
        let clientData = try Self.clientData(response.clientDataJSON)
        try takeChallenge(data, clientData, purpose: purpose, user: user)
        guard let passkey = try data.passkeys.passkey(credentialID: Base64URL.encode(response.rawID)) else {
            throw GatehouseError(.invalidCredential, "This passkey is not registered with this app.")
        }
        if let user, passkey.userID != user { throw GatehouseError(.invalidCredential, "This passkey is not one of this account's.") }
        if let handle = response.userHandle {
            guard let stored = try data.passkeys.existingUserHandle(of: passkey.userID), constantTimeEquals(Array(stored.utf8), Array(Base64URL.encode(handle).utf8)) else {
                throw GatehouseError(.invalidCredential, "The credential's userHandle is not its account's.")
            }
        } else if purpose == .signIn {
            throw GatehouseError.validation("credential.response.userHandle", "Required for a sign-in with a discoverable passkey.")
        }
        guard let publicKey = Base64URL.decode(passkey.publicKey) else { throw InternalError("a stored passkey's key is not base64url") }
        let verified: VerifiedAssertion
        do {
            verified = try WebAuthnVerifier.verifyAssertion(
                clientData: clientData, authenticatorData: response.authenticatorData, signature: response.signature, publicKey: publicKey,
                challenge: clientData.challenge, relyingParty: rp)
        } catch {
            throw Self.refusal(error, field: "credential.response.authenticatorData")
        }
        let now = clock.nowMillis()
        let presented = Int64(verified.signCount)
        if !(passkey.signCount == 0 && presented == 0), presented <= passkey.signCount {
            try units.run(data) { tx in
                try tx.auditLog.record(Event(
                    type: .passkeyCloneSuspected, userID: passkey.userID, sessionID: nil, ip: origin.ip, userAgent: origin.userAgent,
                    data: ["passkey_id": .string(passkey.id.rawValue), "stored_count": .int(passkey.signCount), "presented_count": .int(presented)],
                    createdAt: now))
            }
            throw GatehouseError(.invalidCredential, "This passkey's signature counter went backwards: the authenticator may have been cloned.")
        }
        guard try data.passkeys.recordUse(passkey.id, expectedCount: passkey.signCount, signCount: presented, backedUp: verified.backedUp, now: now) else {
            throw GatehouseError(.invalidCredential, "This passkey was used at the same moment by another request.")
        }
        var used = passkey
        used.signCount = presented
        used.backedUp = verified.backedUp
        used.lastUsedAt = now
        return PasskeyUse(passkey: used, amr: passkey.backupEligible || verified.backupEligible ? "swk" : "hwk")
    }

    // MARK: - Challenges

    private func issueChallenge(_ data: any AppScopedStore, purpose: PasskeyPurpose, user: UserID?) throws -> String {
        let challenge = Base64URL.encode(SecureRandom.bytes(32))
        try data.passkeys.insertChallenge(
            hash: Self.challengeHash(challenge), purpose: purpose, user: user, expiresAt: clock.nowMillis() + Self.challengeLifetimeMillis)
        return challenge
    }

    /// Takes the challenge the client data names: issued by this app, for `purpose`, to `user`.
    private func takeChallenge(_ data: any AppScopedStore, _ clientData: ClientData, purpose: PasskeyPurpose, user: UserID?) throws {
        guard clientData.challenge.utf8.count <= 128,
            let taken = try data.passkeys.takeChallenge(hash: Self.challengeHash(clientData.challenge), purpose: purpose, now: clock.nowMillis())
        else {
            throw GatehouseError(.invalidCredential, "The challenge is unknown, expired or used already: ask for new options.")
        }
        guard taken.userID == user else { throw GatehouseError(.invalidCredential, "The challenge was issued to another account.") }
    }

    private static func challengeHash(_ challenge: String) -> String { Digest.hex(Digest.sha256(Array(challenge.utf8))) }

    // MARK: -

    private func relyingParty(_ app: AppContext) throws -> RelyingParty {
        guard let settings = app.settings.passkeys else {
            throw GatehouseError(.providerNotConfigured, "Passkeys are not configured for this app.")
        }
        return RelyingParty(id: settings.rpID, origins: settings.origins)
    }

    private static func clientData(_ bytes: [UInt8]) throws -> ClientData {
        do { return try ClientData(bytes) } catch { throw GatehouseError.validation("credential.response.clientDataJSON", error.message) }
    }

    private static func refusal(_ error: WebAuthnError, field: String) -> GatehouseError {
        error.isMalformed ? .validation(field, error.message) : GatehouseError(.invalidCredential, error.message)
    }

    private static let notFound = GatehouseError(.notFound, "No such passkey.")

    private static func descriptor(_ passkey: Passkey) -> JSON {
        var descriptor: [String: JSON] = ["type": "public-key", "id": .string(passkey.credentialID)]
        if !passkey.transports.isEmpty { descriptor["transports"] = .strings(passkey.transports) }
        return .object(descriptor)
    }

    /// 16 bytes as a lowercase UUID.
    static func uuid(_ bytes: [UInt8]) -> String {
        let hex = Digest.hex(bytes)
        guard hex.count == 32 else { return "00000000-0000-0000-0000-000000000000" }
        let h = Array(hex)
        return [h[0..<8], h[8..<12], h[12..<16], h[16..<20], h[20..<32]].map { String($0) }.joined(separator: "-")
    }

    /// The passkey as the API shows it: no key material.
    public static func json(_ passkey: Passkey) -> JSON {
        [
            "id": .string(passkey.id.rawValue), "name": .string(passkey.name), "created_at": .string(rfc3339(millis: passkey.createdAt)),
            "last_used_at": passkey.lastUsedAt.map { .string(rfc3339(millis: $0)) } ?? .null, "backed_up": .bool(passkey.backedUp),
            "aaguid": .string(passkey.aaguid),
        ]
    }
}
