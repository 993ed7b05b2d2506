import GatehouseCore

/// The `files` table of one app (migration 0014). Every query binds `app_id`.
struct SQLFiles: FileStore {
    let database: any SQLDatabase
    let appID: AppID

    func insert(_ file: StoredFile) throws {
        try database.execute("""
            INSERT INTO files (app_id, id, user_id, name, content_type, size, sha256, visibility, purpose, blob_key, created_at)
            VALUES (\(appID), \(file.id.rawValue), \(file.userID), \(file.name), \(file.contentType), \(file.size), \(file.sha256),
                    \(file.visibility.rawValue), \(file.purpose.rawValue), \(file.blobKey.rawValue), \(file.createdAt))
            """)
    }

    func file(_ id: FileID, of user: UserID) throws -> StoredFile? {
        try database.query("SELECT * FROM files WHERE app_id = \(appID) AND id = \(id.rawValue) AND user_id = \(user)").first.map(Self.record)
    }

    func publicFile(_ id: FileID) throws -> StoredFile? {
        try database.query("""
            SELECT * FROM files WHERE app_id = \(appID) AND id = \(id.rawValue) AND visibility = \(FileVisibility.public.rawValue)
              AND EXISTS (
                SELECT 1 FROM users WHERE users.app_id = files.app_id AND users.id = files.user_id
                  AND users.deletion_due_at IS NULL AND users.deleted_at IS NULL)
            """).first.map(Self.record)
    }

    func files(of user: UserID, after: (createdAt: Int64, id: FileID)?, limit: Int) throws -> [StoredFile] {
        let page: SQL = after.map { "AND (created_at < \($0.createdAt) OR (created_at = \($0.createdAt) AND id < \($0.id.rawValue)))" } ?? ""
        return try database.query("""
            SELECT * FROM files WHERE app_id = \(appID) AND user_id = \(user) AND purpose = \(FilePurpose.file.rawValue) \(page)
            ORDER BY created_at DESC, id DESC LIMIT \(Int64(limit))
            """).map(Self.record)
    }

    func setVisibility(_ id: FileID, of user: UserID, _ visibility: FileVisibility) throws -> StoredFile? {
        try database.query("""
            UPDATE files SET visibility = \(visibility.rawValue) WHERE app_id = \(appID) AND id = \(id.rawValue) AND user_id = \(user) RETURNING *
            """).first.map(Self.record)
    }

    func usage(of user: UserID, excludingPhotos: Bool) throws -> (count: Int64, bytes: Int64) {
        let purpose: SQL = excludingPhotos ? "AND purpose <> \(FilePurpose.photo.rawValue)" : ""
        guard let row = try database.query("""
            SELECT COUNT(*) AS files, COALESCE(SUM(size), 0) AS bytes FROM files WHERE app_id = \(appID) AND user_id = \(user) \(purpose)
            """).first
        else { return (0, 0) }
        return (try row.int64("files"), try row.int64("bytes"))
    }

    func delete(_ id: FileID, of user: UserID) throws -> StoredFile? {
        try database.query("DELETE FROM files WHERE app_id = \(appID) AND id = \(id.rawValue) AND user_id = \(user) RETURNING *").first.map(Self.record)
    }

    func deletePhotos(of user: UserID, except: FileID?) throws -> [BlobKey] {
        let keep: SQL = except.map { "AND id <> \($0.rawValue)" } ?? ""
        return try database.query("""
            DELETE FROM files WHERE app_id = \(appID) AND user_id = \(user) AND purpose = \(FilePurpose.photo.rawValue) \(keep) RETURNING blob_key
            """).map(Self.key)
    }

    func deleteAll(of user: UserID) throws -> [BlobKey] {
        try database.query("DELETE FROM files WHERE app_id = \(appID) AND user_id = \(user) RETURNING blob_key").map(Self.key)
    }

    private static func key(_ row: SQLRow) throws -> BlobKey {
        let raw = try row.string("blob_key")
        guard let key = BlobKey(parsing: raw) else { throw BlobStoreError("a stored blob key is not one: \(raw)") }
        return key
    }

    private static func record(_ row: SQLRow) throws -> StoredFile {
        guard let visibility = FileVisibility(rawValue: try row.string("visibility")), let purpose = FilePurpose(rawValue: try row.string("purpose")) else {
            throw BlobStoreError("a stored file has an unknown visibility or purpose")
        }
        return StoredFile(
            id: FileID(unchecked: try row.string("id")), userID: UserID(unchecked: try row.string("user_id")), name: try row.string("name"),
            contentType: try row.string("content_type"), size: try row.int64("size"), sha256: try row.string("sha256"), visibility: visibility,
            purpose: purpose, createdAt: try row.int64("created_at"), blobKey: try key(row))
    }
}

extension SQLAppScopedStore {
    var files: any FileStore { SQLFiles(database: database, appID: appID) }
}
