/// The configuration of one app as stored: its settings, whether it is switched off, its
/// signing keys and its admin secret keys. Every query binds the app's id; in a unit of work
/// (``AppScopedStore/transaction(_:)``) it joins the unit's transaction.
public protocol AppSettingsStore: Sendable {
    /// Replaces the settings and bumps the version, if the version is still `expectedVersion`
    /// (nil: whatever it is). Returns the updated record, or nil when another change came first.
    func updateSettings(json: String, allowedOrigins: [String], sourceChecksum: String?, expectedVersion: Int64?, now: Int64) throws -> AppRecord?
    /// Switches the app off (`disabledAt`) or on again (nil) and bumps the version, so that every
    /// node's cache sees it; the record, or nil when the app does not exist or is in that state
    /// already (two switches at once: one changes it).
    func setDisabled(at disabledAt: Int64?, now: Int64) throws -> AppRecord?
    /// Stores the checksum of the `Tenants/` file the settings came from (and drops the legacy
    /// one), changing nothing else: the settings are already the file's.
    func keepSourceChecksum(_ checksum: String) throws
    /// Keys not yet expired, any state.
    func signingKeys(now: Int64) throws -> [SigningKeyRecord]
    /// In one transaction (see ``SigningKeyRotation``): `next` becomes `current`, `current` becomes
    /// `retired` until `retiredExpiresAt` (or is deleted with every retired key when
    /// `revokePrevious`), retired keys beyond the newest `maxRetired` and expired keys are deleted,
    /// `newNext` is added as `next`, and the app's version is bumped. Throws
    /// ``SigningKeyRotation/TooSoon`` when the newest key is younger than the minimum interval.
    func rotateSigningKeys(_ rotation: SigningKeyRotation, now: Int64) throws -> SigningKeyRotation.Outcome
    /// Adds a secret key; every other unexpired key is set to expire at `othersExpireAt` (or earlier if already sooner).
    func addSecretKey(_ key: SecretKeyRecord, othersExpireAt: Int64) throws
}
