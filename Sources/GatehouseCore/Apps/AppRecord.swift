/// An app as stored. Settings are kept as JSON with every secret sealed under the master key.
public struct AppRecord: Sendable, Equatable {
    public var id: AppID
    /// The public key clients send in `X-App-Key`.
    public var appKey: String
    public var settingsJSON: String
    /// Bumped by every change to the app, its settings or its signing keys; per-node caches compare it.
    public var version: Int64
    /// `api` or `tenants` (created from a file under `Tenants/`).
    public var source: String
    /// For `tenants` apps: checksum of the file content last applied, so re-applying an unchanged file does nothing.
    public var sourceChecksum: String?
    /// The unkeyed checksum an earlier version stored (migration 0006), until the next apply of a
    /// Tenants folder replaces it.
    public var legacySourceChecksum: String?
    public var createdAt: Int64
    public var updatedAt: Int64
    /// When the platform operator switched the app off (ms), or nil while it is enabled: then no
    /// request of the app is served and its outbox items wait. Not a setting: no settings change
    /// or `Tenants/` file touches it.
    public var disabledAt: Int64?

    public init(
        id: AppID, appKey: String, settingsJSON: String, version: Int64 = 1, source: String, sourceChecksum: String? = nil,
        legacySourceChecksum: String? = nil, createdAt: Int64, updatedAt: Int64, disabledAt: Int64? = nil
    ) {
        self.disabledAt = disabledAt
        self.legacySourceChecksum = legacySourceChecksum
        self.id = id
        self.appKey = appKey
        self.settingsJSON = settingsJSON
        self.version = version
        self.source = source
        self.sourceChecksum = sourceChecksum
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}
