import CSQLite
import Foundation
import GatehouseSQL

/// One SQLite connection with its own prepared-statement cache.
///
/// Not thread-safe (opened with `SQLITE_OPEN_NOMUTEX`); ``SQLiteDatabase``'s pool lends it to
/// one thread at a time.
final class SQLiteConnection: PooledConnection, SQLConnection {
    /// `SQLITE_TRANSIENT`: SQLite copies bound buffers before the call returns.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
    private static let statementCacheLimit = 256
    /// Each connection's page cache, in KiB (SQLite's default is 2,000). The pool holds up to one
    /// connection per HTTP thread, so the default let a busy node keep 32 MiB of caches that
    /// mostly duplicate one another and the operating system's page cache; 512 KiB (128 pages)
    /// still holds the B-tree pages every statement walks.
    static let cacheKiB = 512

    let dialect = SQLDialect.sqlite
    private let handle: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]
    /// Set when a `ROLLBACK` failed: the connection's state is unknown, so it is not reused.
    var poisoned = false
    /// Asked for checkpoints by this connection's WAL hook; kept alive while the hook may run.
    private let checkpointer: Checkpointer?

    /// Opens `path`; with a `checkpointer`, commits past its threshold ask it for a checkpoint
    /// instead of running SQLite's automatic one (ADR 0021).
    init(path: String, busyTimeoutMilliseconds: Int32, checkpointer: Checkpointer? = nil) throws(SQLError) {
        self.checkpointer = checkpointer
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let code = sqlite3_open_v2(path, &handle, flags, nil)
        guard code == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(code))
            sqlite3_close_v2(handle)
            throw SQLError(kind: .connection, message: "cannot open SQLite database at \(path): \(message)")
        }
        self.handle = handle
        sqlite3_extended_result_codes(handle, 1)
        sqlite3_busy_timeout(handle, busyTimeoutMilliseconds)
        do {
            try executeScript("""
                PRAGMA foreign_keys = ON; PRAGMA synchronous = FULL;
                PRAGMA wal_autocheckpoint = \(SQLiteDatabase.checkpointPages); PRAGMA cache_size = -\(Self.cacheKiB);
                """)
        } catch {
            close()
            throw error
        }
        checkpointer?.observe(handle)
    }

    var isReusable: Bool { !poisoned && sqlite3_get_autocommit(handle) != 0 }

    var inTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    func close() {
        for statement in statements.values { sqlite3_finalize(statement) }
        statements.removeAll()
        sqlite3_close_v2(handle)
    }

    func query(_ sql: SQL) throws(SQLError) -> [SQLRow] {
        var rows: [SQLRow] = []
        try run(sql) { statement, columns in rows.append(SQLRow(columns: columns, values: Self.values(of: statement, count: columns.count))) }
        return rows
    }

    @discardableResult
    func execute(_ sql: SQL) throws(SQLError) -> Int {
        try run(sql) { _, _ in }
        return Int(sqlite3_changes64(handle))
    }

    func executeScript(_ script: String) throws(SQLError) {
        var errorMessage: UnsafeMutablePointer<CChar>?
        let code = sqlite3_exec(handle, script, nil, nil, &errorMessage)
        if code != SQLITE_OK {
            let message = errorMessage.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(code))
            sqlite3_free(errorMessage)
            throw Self.error(code: code, message: message)
        }
    }

    /// A PASSIVE checkpoint (``passiveCheckpoint(_:_:)``) on this connection.
    func checkpoint() -> Bool { passiveCheckpoint(handle) }

    // MARK: - Statements

    private func run(_ sql: SQL, row: (OpaquePointer, [String]) -> Void) throws(SQLError) {
        let (text, binds) = sql.render(.sqlite)
        let statement = try prepared(text)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        try bind(binds, to: statement)
        var columns: [String]?
        while true {
            let code = sqlite3_step(statement)
            switch code {
            case SQLITE_ROW:
                if columns == nil { columns = Self.columnNames(of: statement) }
                row(statement, columns!)
            case SQLITE_DONE:
                return
            default:
                throw Self.error(code: code, message: String(cString: sqlite3_errmsg(handle)))
            }
        }
    }

    private func prepared(_ text: String) throws(SQLError) -> OpaquePointer {
        if let statement = statements[text] { return statement }
        var statement: OpaquePointer?
        var tailIsEmpty = true
        let code = text.withCString { start in
            var tail: UnsafePointer<CChar>?
            let code = sqlite3_prepare_v3(handle, start, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, &tail)
            if let tail {
                tailIsEmpty = String(cString: tail).allSatisfy { $0.isWhitespace || $0 == ";" }
            }
            return code
        }
        guard code == SQLITE_OK, let statement else {
            throw Self.error(code: code, message: String(cString: sqlite3_errmsg(handle)))
        }
        guard tailIsEmpty else {
            sqlite3_finalize(statement)
            throw SQLError(kind: .other, message: "query/execute run one statement; use executeScript for several")
        }
        if statements.count >= Self.statementCacheLimit {
            for cached in statements.values { sqlite3_finalize(cached) }
            statements.removeAll()
        }
        statements[text] = statement
        return statement
    }

    private func bind(_ values: [SQLValue], to statement: OpaquePointer) throws(SQLError) {
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let code: Int32
            switch value {
            case .null:
                code = sqlite3_bind_null(statement, index)
            case .integer(let integer):
                code = sqlite3_bind_int64(statement, index, integer)
            case .text(let text):
                // Bound with its length, SQLite would keep a NUL; refused anyway so that both
                // drivers keep one contract (PostgreSQL text cannot hold U+0000).
                guard !text.utf8.contains(0) else { throw .nulInText(parameter: Int(index)) }
                let length = Int32(text.utf8.count)
                code = text.withCString { sqlite3_bind_text(statement, index, $0, length, Self.transient) }
            case .blob(let bytes):
                if bytes.isEmpty {
                    // A nil pointer would bind NULL, so an empty blob needs zeroblob(0).
                    code = sqlite3_bind_zeroblob(statement, index, 0)
                } else {
                    code = bytes.withUnsafeBytes {
                        sqlite3_bind_blob(statement, index, $0.baseAddress, Int32($0.count), Self.transient)
                    }
                }
            }
            guard code == SQLITE_OK else {
                throw Self.error(code: code, message: String(cString: sqlite3_errmsg(handle)))
            }
        }
    }

    private static func columnNames(of statement: OpaquePointer) -> [String] {
        (0..<sqlite3_column_count(statement)).map { String(cString: sqlite3_column_name(statement, $0)) }
    }

    private static func values(of statement: OpaquePointer, count: Int) -> [SQLValue] {
        (0..<Int32(count)).map { column in
            switch sqlite3_column_type(statement, column) {
            case SQLITE_NULL:
                return .null
            case SQLITE_INTEGER:
                return .integer(sqlite3_column_int64(statement, column))
            case SQLITE_BLOB:
                let length = Int(sqlite3_column_bytes(statement, column))
                guard length > 0, let start = sqlite3_column_blob(statement, column) else { return .blob([]) }
                return .blob(Array(UnsafeRawBufferPointer(start: start, count: length)))
            default:  // TEXT, and FLOAT rendered as text (the portable subset has no floats)
                guard let start = sqlite3_column_text(statement, column) else { return .text("") }
                let length = Int(sqlite3_column_bytes(statement, column))
                return .text(String(decoding: UnsafeBufferPointer(start: start, count: length), as: UTF8.self))
            }
        }
    }

    // MARK: - Errors

    // Extended result codes are function-like macros that do not import into Swift.
    private static let constraintCheck = SQLITE_CONSTRAINT | (1 << 8)
    private static let constraintForeignKey = SQLITE_CONSTRAINT | (3 << 8)
    private static let constraintNotNull = SQLITE_CONSTRAINT | (5 << 8)
    private static let constraintPrimaryKey = SQLITE_CONSTRAINT | (6 << 8)
    private static let constraintUnique = SQLITE_CONSTRAINT | (8 << 8)

    static func error(code: Int32, message: String) -> SQLError {
        switch code {
        case constraintUnique, constraintPrimaryKey:
            SQLError(kind: .uniqueViolation, message: message, constraint: constraintName(in: message))
        case constraintForeignKey:
            SQLError(kind: .foreignKeyViolation, message: message, constraint: constraintName(in: message))
        case constraintCheck, constraintNotNull:
            SQLError(kind: .checkViolation, message: message, constraint: constraintName(in: message))
        default:
            switch code & 0xFF {
            case SQLITE_BUSY, SQLITE_LOCKED: SQLError(kind: .busy, message: message)
            case SQLITE_CANTOPEN, SQLITE_NOTADB, SQLITE_IOERR, SQLITE_CORRUPT, SQLITE_FULL:
                SQLError(kind: .connection, message: message)
            default: SQLError(kind: .other, message: message)
            }
        }
    }

    /// "UNIQUE constraint failed: users.app_id, users.email" → "users.app_id, users.email".
    static func constraintName(in message: String) -> String? {
        guard let range = message.range(of: "constraint failed: ") else { return nil }
        let name = message[range.upperBound...].trimmingCharacters(in: .whitespaces)
        return name.isEmpty ? nil : name
    }
}
