import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The tokens of a signed-in user, as a ``SessionStore`` keeps them.
public struct StoredSession: Codable, Sendable, Equatable {
    public var accessToken: String
    /// `nil` when the app answers the refresh token in a cookie only (`refresh_cookie: "only"`, meant
    /// for browsers): such a session cannot be refreshed by this client.
    public var refreshToken: String?
    /// When the access token expires, by this device's clock (the answer's `expires_in` added to
    /// the time it arrived, so a wrong device clock does not matter).
    public var accessTokenExpiresAt: Date
    /// The access token's lifetime when issued, in seconds.
    public var accessTokenLifetime: TimeInterval
    public var user: User

    public init(accessToken: String, refreshToken: String?, accessTokenExpiresAt: Date, accessTokenLifetime: TimeInterval, user: User) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.accessTokenExpiresAt = accessTokenExpiresAt
        self.accessTokenLifetime = accessTokenLifetime
        self.user = user
    }
}

extension StoredSession: CustomStringConvertible, CustomDebugStringConvertible {
    /// Without the tokens, so that logging a session leaks nothing.
    public var description: String {
        "StoredSession(user: \(user.id), accessTokenExpiresAt: \(accessTokenExpiresAt), refreshable: \(refreshToken != nil))"
    }
    public var debugDescription: String { description }
}

/// Where a ``GatehouseClient`` keeps its session between launches. Calls come one at a time from
/// the client's session actor; an implementation shared by several processes (an app and its
/// extension) should write atomically.
public protocol SessionStore: Sendable {
    /// The saved session, or `nil`.
    func load() throws -> StoredSession?
    /// Replaces the saved session.
    func save(_ session: StoredSession) throws
    /// Forgets the session.
    func clear() throws
}

/// A session kept in memory only: signed out at every launch. For tests and for apps that
/// want no persistence.
public final class MemorySessionStore: SessionStore, @unchecked Sendable {  // `session` is only touched under `lock`
    private let lock = NSLock()
    private var session: StoredSession?

    public init(_ session: StoredSession? = nil) { self.session = session }

    public func load() throws -> StoredSession? { lock.locked { session } }
    public func save(_ session: StoredSession) throws { lock.locked { self.session = session } }
    public func clear() throws { lock.locked { session = nil } }
}

/// A session kept in one JSON file, readable and writable by its owner only (mode 0600, set when
/// the file is created, so the tokens are never readable by others even for a moment). Writes go
/// to a temporary file in the same folder and are renamed over the old one, so a reader sees the
/// old session or the new one, never half of one. For Linux and other platforms without a Keychain.
public final class FileSessionStore: SessionStore, Sendable {
    /// What went wrong with the file.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    public let url: URL

    /// The session lives at `url`; its folder is created (mode 0700) when missing.
    public init(url: URL) { self.url = url }

    public func load() throws -> StoredSession? {
        guard let data = FileManager.default.contents(atPath: url.path) else { return nil }
        return try JSONDecoder().decode(StoredSession.self, from: data)
    }

    public func save(_ session: StoredSession) throws {
        let data = try JSONEncoder().encode(session)
        let folder = url.deletingLastPathComponent()
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let temporary = folder.appendingPathComponent(".\(url.lastPathComponent).\(SecureRandom.token(byteCount: 6)).tmp").path
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard fd >= 0 else { throw Failure(description: "cannot create \(temporary): errno \(errno)") }
        var written = 0
        let ok = data.withUnsafeBytes { raw -> Bool in
            while written < raw.count {
                let n = write(fd, raw.baseAddress! + written, raw.count - written)
                if n < 0 { if errno == EINTR { continue }; return false }
                written += n
            }
            return fsync(fd) == 0
        }
        close(fd)
        guard ok, rename(temporary, url.path) == 0 else {
            unlink(temporary)
            throw Failure(description: "cannot write \(url.path): errno \(errno)")
        }
    }

    public func clear() throws {
        guard unlink(url.path) == 0 || errno == ENOENT else { throw Failure(description: "cannot remove \(url.path): errno \(errno)") }
    }
}
