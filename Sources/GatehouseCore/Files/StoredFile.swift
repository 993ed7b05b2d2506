/// A file's identifier (`fil_…`).
public struct FileID: PrefixedID {
    public static let prefix = "fil_"
    public let rawValue: String
    public init(unchecked rawValue: String) { self.rawValue = rawValue }
}

/// Who may read a file's content: its user only, or anyone with its URL.
public enum FileVisibility: String, Sendable, CaseIterable {
    case `private`, `public`
}

/// What a file is for. A `photo` is the public file `POST /v1/me/photo` (or `PATCH /v1/me`
/// `photo_file_id`, from a file) made: it belongs to the profile, not to the user's files
/// (`GET /v1/files` does not list it), and it is deleted when another photo replaces it or the
/// photo is removed. A `file` chosen as the photo stays a file, as it was.
public enum FilePurpose: String, Sendable {
    case file, photo
}

/// A file as stored: its row. The bytes live in a ``BlobStore`` under ``blobKey``.
public struct StoredFile: Sendable, Equatable {
    public var id: FileID
    public var userID: UserID
    /// Sanitised (``FileName/sanitise(_:)``).
    public var name: String
    /// Sniffed from the bytes (``ContentSniffer``), never taken from the client.
    public var contentType: String
    public var size: Int64
    /// Lowercase hex SHA-256 of the content.
    public var sha256: String
    public var visibility: FileVisibility
    public var purpose: FilePurpose
    public var createdAt: Int64
    public var blobKey: BlobKey

    public init(
        id: FileID, userID: UserID, name: String, contentType: String, size: Int64, sha256: String, visibility: FileVisibility,
        purpose: FilePurpose, createdAt: Int64, blobKey: BlobKey
    ) {
        self.id = id
        self.userID = userID
        self.name = name
        self.contentType = contentType
        self.size = size
        self.sha256 = sha256
        self.visibility = visibility
        self.purpose = purpose
        self.createdAt = createdAt
        self.blobKey = blobKey
    }

    /// The blob key of a new file of `app`: `<app_id>/<file_id>`. A file's content never changes,
    /// so a key is never written twice.
    public static func blobKey(app: AppID, file: FileID) -> BlobKey {
        BlobKey(unchecked: app.rawValue + "/" + file.rawValue)
    }
}

/// The files of one app: a unit of work's `tx.files`. Every query binds the app.
public protocol FileStore: Sendable {
    /// Inserts a file row. The caller holds the user's row (``AppScopedStore/lockUser(_:)``), so
    /// a deletion cannot erase the account between the check and the insert.
    func insert(_ file: StoredFile) throws
    /// The user's file (any purpose), or nil: another user's or another app's file is no file.
    func file(_ id: FileID, of user: UserID) throws -> StoredFile?
    /// A public file of any user of the app (public content needs no sign-in).
    func publicFile(_ id: FileID) throws -> StoredFile?
    /// The user's files of purpose `file`, newest first (ties by id), after `after` (the previous
    /// page's last file), at most `limit`.
    func files(of user: UserID, after: (createdAt: Int64, id: FileID)?, limit: Int) throws -> [StoredFile]
    /// Sets the visibility of the user's file; the file, or nil when it is not theirs.
    func setVisibility(_ id: FileID, of user: UserID, _ visibility: FileVisibility) throws -> StoredFile?
    /// How many files the user holds and their bytes in all, photo-purpose files left out when
    /// `excludingPhotos` (a new photo replaces them).
    func usage(of user: UserID, excludingPhotos: Bool) throws -> (count: Int64, bytes: Int64)
    /// Deletes the user's file; the row deleted (its blob is the caller's to remove after the
    /// commit), or nil when it was not theirs.
    func delete(_ id: FileID, of user: UserID) throws -> StoredFile?
    /// Deletes the user's photo-purpose files other than `except`; their blob keys.
    func deletePhotos(of user: UserID, except: FileID?) throws -> [BlobKey]
    /// Deletes every file of the user (account deletion); their blob keys.
    func deleteAll(of user: UserID) throws -> [BlobKey]
}
