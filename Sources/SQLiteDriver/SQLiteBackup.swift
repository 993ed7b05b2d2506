import CSQLite
import Foundation
import GatehouseSQL

/// A consistent copy of a live SQLite database, made with SQLite's online backup API while the
/// server keeps answering and writing.
///
/// The copy is taken in one `sqlite3_backup_step(-1)`: one read transaction on the source, so it
/// is the database as of one commit. In WAL mode a reader blocks no writer, so the server goes on
/// committing meanwhile (into the WAL; checkpoints wait for the copy to end). Copying in several
/// smaller steps would restart from the first page at every commit another connection makes,
/// which under load may never finish.
public enum SQLiteBackup {
    public struct Copy: Sendable {
        /// The backup file.
        public let path: String
        /// Its size.
        public let bytes: Int64
        /// Database pages copied.
        public let pages: Int
    }

    /// Copies the database at `source` into a new file at `destination` (mode 0600), which must
    /// not exist. The copy is written beside it first, checked with `PRAGMA integrity_check`,
    /// switched to a rollback journal (so it is one self-contained file), flushed to disk and
    /// only then given its name: a failed or interrupted backup leaves no file at `destination`.
    public static func copy(from source: String, to destination: String, busyTimeoutMilliseconds: Int32 = 10_000) throws(SQLError) -> Copy {
        guard FileManager.default.fileExists(atPath: source) else {
            throw SQLError(kind: .connection, message: "no SQLite database at \(source)")
        }
        guard !FileManager.default.fileExists(atPath: destination) else {
            throw SQLError(kind: .other, message: "\(destination) already exists; a backup never replaces a file")
        }
        let partial = destination + ".partial-\(getpid())"
        try? FileManager.default.removeItem(atPath: partial)
        // The copy holds every account: only its owner may read it, from its first byte.
        guard FileManager.default.createFile(atPath: partial, contents: nil, attributes: [.posixPermissions: 0o600]) else {
            throw SQLError(kind: .connection, message: "cannot create \(partial)")
        }
        // Removed however this ends: once the copy has its name (a hard link), this is the old name.
        defer { try? FileManager.default.removeItem(atPath: partial) }

        // Read-write without CREATE: a WAL database opened read-only fails when its -shm is
        // missing; nothing here writes to the source.
        let from = try open(source, flags: SQLITE_OPEN_READWRITE)
        defer { sqlite3_close_v2(from) }
        sqlite3_busy_timeout(from, busyTimeoutMilliseconds)
        let to = try open(partial, flags: SQLITE_OPEN_READWRITE)
        var toClosed = false
        defer { if !toClosed { sqlite3_close_v2(to) } }

        guard let backup = sqlite3_backup_init(to, "main", from, "main") else {
            throw SQLError(kind: .other, message: "cannot start the backup: \(String(cString: sqlite3_errmsg(to)))")
        }
        let deadline = Date().addingTimeInterval(Double(busyTimeoutMilliseconds) / 1000)
        var step: Int32
        repeat {
            step = sqlite3_backup_step(backup, -1)
            // The source is locked for a moment (a WAL recovery, a checkpoint in rollback mode): try again.
            if step == SQLITE_BUSY || step == SQLITE_LOCKED, Date() < deadline { usleep(20_000) } else { break }
        } while true
        let pages = Int(sqlite3_backup_pagecount(backup))
        let finished = sqlite3_backup_finish(backup)
        guard step == SQLITE_DONE, finished == SQLITE_OK else {
            throw SQLError(kind: step == SQLITE_BUSY || step == SQLITE_LOCKED ? .busy : .other,
                message: "the backup failed: \(String(cString: sqlite3_errstr(step == SQLITE_DONE ? finished : step)))")
        }

        let mode = try scalar(to, "PRAGMA journal_mode = DELETE")
        guard mode?.lowercased() == "delete" else { throw SQLError(kind: .other, message: "cannot switch the copy to a rollback journal") }
        let check = try scalar(to, "PRAGMA integrity_check")
        guard check == "ok" else { throw SQLError(kind: .other, message: "the copy fails its integrity check: \(check ?? "no answer")") }
        sqlite3_close_v2(to)
        toClosed = true

        try sync(partial)
        // link(2) refuses an existing name, so a file created at `destination` meanwhile is kept.
        guard link(partial, destination) == 0 else {
            throw SQLError(kind: .other, message: "cannot name the copy \(destination): \(String(cString: strerror(errno)))")
        }
        try? sync((destination as NSString).deletingLastPathComponent.isEmpty ? "." : (destination as NSString).deletingLastPathComponent)
        let size = (try? FileManager.default.attributesOfItem(atPath: destination)[.size] as? NSNumber)?.int64Value ?? 0
        return Copy(path: destination, bytes: size, pages: pages)
    }

    private static func open(_ path: String, flags: Int32) throws(SQLError) -> OpaquePointer {
        var handle: OpaquePointer?
        let code = sqlite3_open_v2(path, &handle, flags | SQLITE_OPEN_NOMUTEX, nil)
        guard code == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(code))
            sqlite3_close_v2(handle)
            throw SQLError(kind: .connection, message: "cannot open \(path): \(message)")
        }
        return handle
    }

    /// The first column of the first row `sql` returns.
    private static func scalar(_ handle: OpaquePointer, _ sql: String) throws(SQLError) -> String? {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw SQLError(kind: .other, message: String(cString: sqlite3_errmsg(handle)))
        }
        defer { sqlite3_finalize(statement) }
        let code = sqlite3_step(statement)
        guard code == SQLITE_ROW || code == SQLITE_DONE else { throw SQLError(kind: .other, message: String(cString: sqlite3_errmsg(handle))) }
        guard code == SQLITE_ROW, let text = sqlite3_column_text(statement, 0) else { return nil }
        return String(cString: text)
    }

    /// fsync(2) of a file or folder.
    private static func sync(_ path: String) throws(SQLError) {
        let fd = Foundation.open(path, O_RDONLY)
        guard fd >= 0 else { throw SQLError(kind: .other, message: "cannot open \(path) to flush it") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw SQLError(kind: .other, message: "cannot flush \(path): \(String(cString: strerror(errno)))") }
    }
}
