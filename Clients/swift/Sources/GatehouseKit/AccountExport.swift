import Foundation

/// What the server holds about the signed-in user (`GET /v1/me/export`, ``GatehouseClient/exportMyData()``):
/// to keep, or to take to another service. It never holds a secret: no password hash, TOTP
/// secret, recovery code, token, passkey public key or provider token, and no URL that grants
/// access to a file.
public struct AccountExport: Decodable, Sendable, Equatable {
    /// A file's metadata (its content is not in the export).
    public struct File: Decodable, Sendable, Equatable {
        public let id: String
        public let name: String
        public let contentType: String
        public let size: Int64
        /// `private` or `public`.
        public let visibility: String
        public let createdAt: Date

        enum CodingKeys: String, CodingKey {
            case id, name, size, visibility
            case contentType = "content_type"
            case createdAt = "created_at"
        }
    }

    /// One of the user's audit events.
    public struct Event: Decodable, Sendable, Equatable {
        public let id: String
        /// `user.signed_in`, `session.revoked`, … (docs/admin.md lists them).
        public let type: String
        public let sessionID: String?
        public let ip: String?
        public let userAgent: String?
        public let createdAt: Date
        /// What the event records, as the server wrote it.
        public let data: [String: MetadataValue]

        enum CodingKeys: String, CodingKey {
            case id, type, ip, data
            case sessionID = "session_id"
            case userAgent = "user_agent"
            case createdAt = "created_at"
        }
    }

    /// The user object, as ``GatehouseClient/getUser()`` answers it.
    public let profile: User
    public let identities: [Identity]
    /// The live sessions, as ``GatehouseClient/getSessions()`` lists them.
    public let sessions: [DeviceSession]
    /// Every file of the user, newest first.
    public let files: [File]
    /// The authenticator apps (`totp`) and passkeys (`passkey`).
    public let factors: [MFAFactor]
    /// The user's audit events, newest first, at most 1,000.
    public let events: [Event]
}
