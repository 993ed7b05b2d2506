import Foundation
import GatehouseCrypto

/// Creating and configuring apps: the admin API, `Tenants/` files and the CLI all come here.
public final class AppService: Sendable {
    let store: any Store
    private let sealer: SecretSealer
    let directory: AppDirectory
    let clock: any Clock
    private let adminTokenHash: [UInt8]?
    let checksumKey: [UInt8]
    /// `GATEHOUSE_ALLOW_PRIVATE_OUTBOUND`: webhook URLs may be `http` or name private addresses.
    let allowPrivateOutbound: Bool
    /// The platform's maxima (``Configuration/platformCaps``): what an admin may set.
    let caps: AppSettings.PlatformCaps
    /// Runs the service's units of work (an app's events are recorded in them like any other).
    let units: UnitOfWork

    /// A retired signing key stays published this long: the longest access-token lifetime an app
    /// can set, plus five minutes of clock skew, so no token in flight loses its key.
    public static let retiredKeyLifetimeMillis: Int64 = (86400 + 300) * 1000
    /// How long a replaced secret key keeps working.
    public static let previousSecretKeyLifetimeMillis: Int64 = 86400 * 1000

    /// - Parameter masterKey: for the key of `Tenants/` checksums (``MasterKeyDerivation``).
    public init(
        store: any Store, sealer: SecretSealer, directory: AppDirectory, clock: any Clock, adminToken: String?, masterKey: [UInt8],
        units: UnitOfWork, allowPrivateOutbound: Bool = false, caps: AppSettings.PlatformCaps
    ) {
        self.units = units
        self.allowPrivateOutbound = allowPrivateOutbound
        self.caps = caps
        self.checksumKey = MasterKeyDerivation.key(for: .tenantChecksum, from: masterKey)
        self.store = store
        self.sealer = sealer
        self.directory = directory
        self.clock = clock
        self.adminTokenHash = adminToken.map { Digest.sha256(Array($0.utf8)) }
    }

    // MARK: - Credentials

    /// Checks the platform token in constant time. False when none is configured.
    public func isPlatformToken(_ token: String) -> Bool {
        guard let adminTokenHash else { return false }
        return constantTimeEquals(Digest.sha256(Array(token.utf8)), adminTokenHash)
    }

    /// The enabled app whose unexpired secret key this is, or nil. The key is looked up in the
    /// database on every call, so a disabled app's keys stop on every node at once.
    public func app(secretKey: String) throws -> AppContext? {
        guard secretKey.hasPrefix("sk_"), secretKey.utf8.count <= 128 else { return nil }
        guard let record = try store.apps.find(secretKeyHash: Self.hash(secretKey: secretKey), now: clock.nowMillis()), record.disabledAt == nil
        else { return nil }
        return try directory.app(id: record.id)
    }

    // MARK: - Creating

    /// The result of creating an app: the secret key is shown this once and never again.
    public struct Created: Sendable {
        public let app: AppContext
        public let secretKey: String
    }

    /// Creates an app from a settings object (admin API and CLI).
    public func create(settings json: JSON) throws -> Created {
        let settings = try AppSettings.decode(json, source: .admin(current: nil), caps: caps, allowPrivateOutbound: allowPrivateOutbound)
        if let problem = caps.problem(with: settings, before: nil) { throw GatehouseError.validation([problem]) }
        return try insert(settings: settings, appKey: Self.generateAppKey(), source: "api", sourceChecksum: nil)
    }

    func insert(settings: AppSettings, appKey: String, source: String, sourceChecksum: String?) throws -> Created {
        let now = clock.nowMillis()
        let id = AppID.generate()
        let (secretKey, secretRecord) = Self.newSecretKey(now: now)
        let record = AppRecord(
            id: id, appKey: appKey, settingsJSON: sealed(settings, app: id), source: source, sourceChecksum: sourceChecksum,
            createdAt: now, updatedAt: now)
        let keys = [
            try newSigningKey(app: id, algorithm: settings.signingAlgorithm, state: .current, now: now),
            try newSigningKey(app: id, algorithm: settings.signingAlgorithm, state: .next, now: now),
        ]
        try AppConflict.answering { try store.apps.insert(record, allowedOrigins: settings.allowedOrigins, secretKey: secretRecord, signingKeys: keys) }
        guard let context = try directory.app(id: id) else { throw InternalError("app \(id) vanished after insert") }
        return Created(app: context, secretKey: secretKey)
    }

    // MARK: - Settings

    /// The settings as admins see them: secrets as `{"set": true}`, plus `id` and `app_key`.
    public func adminView(_ app: AppContext) -> JSON {
        guard case .object(var o) = app.settings.json(secrets: .redacted) else { return .null }
        o["id"] = .string(app.id.rawValue)
        o["app_key"] = .string(app.record.appKey)
        o["created_at"] = .string(rfc3339(millis: app.record.createdAt))
        o["updated_at"] = .string(rfc3339(millis: app.record.updatedAt))
        return .object(o)
    }

    /// Applies an RFC 7396 merge patch to the settings, validates the result whole and stores it.
    public func update(_ app: AppContext, patch: JSON) throws -> AppContext {
        guard case .object(var patchObject) = patch else { throw GatehouseError.validation("body", "Must be a JSON object.") }
        // Read-only members of the admin view may be sent back unchanged (GET, edit, PATCH).
        var readOnlyErrors: [FieldError] = []
        let readOnly: [String: String] = [
            "id": app.id.rawValue, "app_key": app.record.appKey, "created_at": rfc3339(millis: app.record.createdAt),
            "updated_at": rfc3339(millis: app.record.updatedAt),
        ]
        for (key, value) in readOnly {
            guard let sent = patchObject.removeValue(forKey: key) else { continue }
            if key.hasSuffix("_at") { continue }
            if sent != .string(value) { readOnlyErrors.append(FieldError(key, "Read-only.")) }
        }
        if !readOnlyErrors.isEmpty { throw GatehouseError.validation(readOnlyErrors) }
        // The patch applies to the stored settings, not this node's cached copy (up to 5 s old),
        // and is written only if nobody changed them since it was read: else read again and
        // re-apply, so that concurrent patches of different fields all land.
        for _ in 0..<8 {
            let current = try latest(app)
            // A null removes a field; naming one the settings do not have is an unknown field.
            let merged = AppSettings.Email.keepingPasswordOnlyAsNamed(
                current.settings.json(secrets: .plain).merging(patch: .object(patchObject)).keepingRemovals(of: .object(patchObject)),
                patch: patchObject)
            let settings = try AppSettings.decode(merged, source: .admin(current: current.settings), caps: caps, allowPrivateOutbound: allowPrivateOutbound)
                .keepingReplacedWebhookSecrets(of: current.settings, now: clock.nowMillis())
            if let problem = caps.problem(with: settings, before: current.settings) { throw GatehouseError.validation([problem]) }
            if settings.signingAlgorithm != current.settings.signingAlgorithm {
                throw GatehouseError.validation(
                    "signing_algorithm", "Set when the app is created; changing it needs a key rotation, which this version does not do.")
            }
            guard settings != current.settings else { return current }
            let now = clock.nowMillis()
            let json = sealed(settings, app: app.id)
            let updated = try units.run(store.app(app.id)) { tx in
                try Self.requireProvidersKeepTheirUsers(tx, from: current.settings, to: settings)
                guard try tx.settings.updateSettings(
                    json: json, allowedOrigins: settings.allowedOrigins, sourceChecksum: current.record.sourceChecksum,
                    expectedVersion: current.record.version, now: now) != nil
                else { return false }
                try tx.auditLog.record(Event(type: .appSettingsChanged, userID: nil, sessionID: nil, ip: nil, userAgent: nil, data: ["source": "admin"], createdAt: now))
                return true
            }
            guard updated else { continue }
            return try reloaded(app.id)
        }
        throw GatehouseError(.busy, "The app's settings are changing too fast; retry shortly.", retryAfter: 1)
    }

    // MARK: - Switching an app off

    /// Every app, oldest first, disabled ones too (the platform operator's list).
    public func all() throws -> [AppContext] {
        try store.apps.all().compactMap { try directory.app(id: $0.id) }
    }

    /// The app with this id as stored now, disabled or not (the platform operator's routes):
    /// 404 `request/not-found` when there is none.
    public func app(id rawID: String) throws -> AppContext {
        guard let id = AppID(parsing: rawID), let app = try directory.current(id: id) else { throw GatehouseError(.notFound, "No such app.") }
        return app
    }

    /// Switches the app off (`disabled`) or on again. Nothing is deleted: a disabled app's key,
    /// secret keys, tokens, JWKS and metadata are refused and its outbox items wait until it is
    /// enabled. Records `app.disabled` or `app.enabled`; switching it to the state it is in does
    /// nothing. Every node sees the change within its cache's refresh interval (``AppDirectory``),
    /// the secret keys at once.
    public func setDisabled(_ app: AppContext, _ disabled: Bool) throws -> AppContext {
        let current = try latest(app)
        guard current.isDisabled != disabled else { return current }
        let now = clock.nowMillis()
        try units.run(store.app(app.id)) { tx in
            // Nothing changed: another switch to the same state came first, and recorded it.
            guard try tx.settings.setDisabled(at: disabled ? now : nil, now: now) != nil else { return }
            try tx.auditLog.record(Event(type: disabled ? .appDisabled : .appEnabled, userID: nil, sessionID: nil, ip: nil, userAgent: nil, data: [:], createdAt: now))
        }
        return try reloaded(app.id)
    }

    /// What the platform operator sees of an app: the admin view and whether it is disabled.
    public func platformView(_ app: AppContext) -> JSON {
        guard case .object(var o) = adminView(app) else { return .null }
        o["disabled"] = .bool(app.isDisabled)
        return .object(o)
    }

    // MARK: - Keys

    /// Issues a new secret key; the others keep working for 24 hours.
    /// - Parameter revokeOthers: end every other key at once instead of in 24 hours: for a key
    ///   that leaked (else whoever holds it keeps it a day, and could rotate keys of their own).
    public func rotateSecretKey(_ app: AppContext, revokeOthers: Bool = false) throws -> String {
        let now = clock.nowMillis()
        let (key, record) = Self.newSecretKey(now: now)
        try units.run(store.app(app.id)) { tx in
            try tx.settings.addSecretKey(record, othersExpireAt: revokeOthers ? now : now + Self.previousSecretKeyLifetimeMillis)
            try tx.auditLog.record(
                Event(type: .appSecretKeyRotated, userID: nil, sessionID: nil, ip: nil, userAgent: nil, data: ["others_revoked": .bool(revokeOthers)], createdAt: now))
        }
        return key
    }

    /// At most one signing-key rotation a minute per app: each one generates a key (an RSA key
    /// costs tens of milliseconds of CPU that every app shares).
    public static let signingKeyRotationIntervalMillis: Int64 = 60 * 1000
    /// Retired keys kept in the JWKS; older ones go at the next rotation.
    public static let maxRetiredSigningKeys = 3

    /// Promotes the published `next` key to signing, retires the current one (kept in the JWKS
    /// until its tokens have expired) and publishes a new `next`. Returns the new signing key's id.
    /// - Parameter revokePrevious: remove the current and retired keys from the JWKS at once, for a
    ///   key that leaked (every token they signed stops verifying).
    public func rotateSigningKey(_ app: AppContext, revokePrevious: Bool = false) throws -> String {
        let now = clock.nowMillis()
        // Checked before a key is generated (that is the cost the interval bounds), and again in
        // the rotation's transaction, for two rotations at once.
        if let newest = try store.app(app.id).settings.signingKeys(now: now).map(\.createdAt).max(), newest + Self.signingKeyRotationIntervalMillis > now {
            throw Self.rotationTooSoon(retryAfterMillis: newest + Self.signingKeyRotationIntervalMillis - now)
        }
        let next = try newSigningKey(app: app.id, algorithm: app.settings.signingAlgorithm, state: .next, now: now)
        let rotation = SigningKeyRotation(
            newNext: next, retiredExpiresAt: now + Self.retiredKeyLifetimeMillis, revokePrevious: revokePrevious,
            minimumIntervalMillis: Self.signingKeyRotationIntervalMillis, maxRetired: Self.maxRetiredSigningKeys)
        let outcome: SigningKeyRotation.Outcome
        do {
            outcome = try units.run(store.app(app.id)) { tx in
                let outcome = try tx.settings.rotateSigningKeys(rotation, now: now)
                if case .rotated(let current) = outcome {
                    try tx.auditLog.record(
                        Event(
                            type: .appSigningKeyRotated, userID: nil, sessionID: nil, ip: nil, userAgent: nil,
                            data: ["kid": .string(current.kid), "previous_revoked": .bool(revokePrevious)], createdAt: now))
                }
                return outcome
            }
        } catch let tooSoon as SigningKeyRotation.TooSoon {
            throw Self.rotationTooSoon(retryAfterMillis: tooSoon.retryAfterMillis)
        }
        guard case .rotated(let current) = outcome else { throw InternalError("app \(app.id) has no next signing key") }
        directory.invalidate(app.id)
        return current.kid
    }

    private static func rotationTooSoon(retryAfterMillis: Int64) -> GatehouseError {
        let seconds = Int((retryAfterMillis + 999) / 1000)
        return GatehouseError(.tooManyRequests, "Signing keys rotate at most once a minute; retry in \(seconds) s.", retryAfter: max(1, seconds))
    }

    // MARK: - Helpers

    /// The app as stored now, not this node's cached copy (up to 5 s old): what an admin reads.
    public func latest(_ app: AppContext) throws -> AppContext {
        guard let context = try directory.current(id: app.id) else { throw InternalError("app \(app.id) vanished") }
        return context
    }

    func reloaded(_ id: AppID) throws -> AppContext {
        directory.invalidate(id)
        guard let context = try directory.app(id: id) else { throw InternalError("app \(id) vanished") }
        return context
    }

    func sealed(_ settings: AppSettings, app: AppID) -> String {
        settings.json(secrets: .sealed({ plaintext, field in self.sealer.seal(plaintext, app: app, field: field) })).serializedString
    }

    private func newSigningKey(app: AppID, algorithm: SignatureAlgorithm, state: SigningKeyState, now: Int64) throws -> SigningKeyRecord {
        let key = try SigningKey.generate(algorithm)
        let kid = Base64URL.encode(SecureRandom.bytes(12))
        return SigningKeyRecord(
            kid: kid, algorithm: algorithm, sealedPrivateKey: sealer.seal(key.pkcs8PEM(), app: app, field: "signing_key/\(kid)"),
            publicJWK: key.publicJWK(kid: kid).json.serializedString, state: state, createdAt: now)
    }

    static func newSecretKey(now: Int64) -> (String, SecretKeyRecord) {
        let key = "sk_" + SecureRandom.token(byteCount: 32)
        return (key, SecretKeyRecord(id: SecureRandom.token(byteCount: 12), keyHash: hash(secretKey: key), hint: String(key.prefix(9)), createdAt: now))
    }

    static func hash(secretKey: String) -> String { Digest.hex(Digest.sha256(Array(secretKey.utf8))) }

    static func generateAppKey() -> String { "pk_" + Base32.encode(SecureRandom.bytes(20), lowercase: true) }

    /// App keys from files: 16–128 characters of letters, digits, `_` and `-`.
    public static func isValidAppKey(_ key: String) -> Bool {
        (16...128).contains(key.utf8.count)
            && key.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) || $0 == 95 || $0 == 45 }
    }
}

extension AppService {
    /// A provider id whose users' subjects would come from another issuer (its kind or issuer
    /// changed, or the id removed and defined again): the new issuer could name an existing user's
    /// subject and be signed in as them. So while any identity of an id exists, its kind and issuer
    /// stay, and it stays defined (out of `sign_in_methods`, it signs nobody in); a new id is the
    /// way to another issuer. Holds for the admin API and for `Tenants/` files alike.
    static func requireProvidersKeepTheirUsers(_ tx: any AppScopedStore, from current: AppSettings, to settings: AppSettings) throws {
        let reissued = settings.oidcProviders.enumerated().filter { _, provider in
            current.oidcProviders.first { $0.id == provider.id }.map { !$0.hasSameSubjects(as: provider) } ?? true
        }
        let removed = current.oidcProviders.filter { old in !settings.oidcProviders.contains { $0.id == old.id } }
        var problems = try reissued.filter { try tx.identities.hasIdentities(of: IdentityProvider(rawValue: $0.element.id)) }.map { index, provider in
            FieldError(
                "oidc_providers[\(index)]",
                "The provider \(provider.id) has users: its kind and issuer cannot change (their ids belong to its issuer). Define the new one under another id.")
        }
        problems += try removed.filter { try tx.identities.hasIdentities(of: IdentityProvider(rawValue: $0.id)) }.map { provider in
            FieldError("oidc_providers", "The provider \(provider.id) has users: it cannot be removed. Take it out of sign_in_methods to stop its sign-ins.")
        }
        if !problems.isEmpty { throw GatehouseError.validation(problems) }
    }
}
