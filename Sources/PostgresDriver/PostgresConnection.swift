import CPostgres
import Foundation
import GatehouseSQL
import Synchronization

/// One libpq connection.
///
/// Not thread-safe; ``PostgresDatabase``'s pool lends it to one thread at a time.
final class PostgresConnection: PooledConnection, SQLConnection {
    private static let byteaOID: Oid = 17
    private static let boolOID: Oid = 16
    private static let integerOIDs: Set<Oid> = [20, 21, 23, 26]  // int8, int2, int4, oid

    let dialect = SQLDialect.postgres
    private let handle: OpaquePointer
    private let secret: Secret
    /// What the server warned of during the statement under way (libpq's notice receiver writes it).
    private let notices: Notices
    /// Set when an error showed this connection is of no more use (it broke, or it reached a
    /// server that cannot take writes): the pool closes it instead of lending it again, and the
    /// next connection libpq opens follows the URL's hosts afresh.
    private var discarded = false
    /// How long a statement that commits may go unanswered (the statement timeout and 2 s more;
    /// nil without a statement timeout): see ``commits(_:)``.
    private let commitDeadlineMillis: Int?
    /// Statements this connection has prepared, by text and parameter types: the server parses
    /// and plans each once per connection instead of on every execution. Bounded, since a
    /// statement's text may vary (optional clauses); past the bound statements run unprepared.
    private var prepared: [PreparedKey: String] = [:]
    static let maxPrepared = 256
    /// False behind a transaction pooler: a named statement prepared in one transaction may be
    /// gone in the next, which another server connection runs (ADR 0034). Every statement is then
    /// unnamed (parse, bind and execute in one round trip, as `PQexecParams` sends them).
    private let preparesStatements: Bool
    /// What opens a transaction: `BEGIN`, and behind a transaction pooler the statement timeout
    /// for that transaction too (`SET LOCAL`, in the same round trip), since a session setting
    /// would stay with whichever server connection ran it.
    let begin: String

    private struct PreparedKey: Hashable {
        let text: String
        let types: [Oid]

        /// Named after its content (FNV-1a, 64 bits, of the text and the types), so one name means
        /// one statement in every process: a pooler that hands this session a statement another
        /// client prepared under the same name hands over the same SQL.
        var name: String {
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in text.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
            for type in types { hash = (hash ^ UInt64(type)) &* 0x100_0000_01b3 }
            let hex = String(hash, radix: 16)
            return "gh_" + String(repeating: "0", count: 16 - hex.count) + hex
        }
    }

    /// Connects with `url` (a `postgres://` URL or `key=value` string); `application_name`
    /// defaults to `gatehouse` and `client_encoding` is UTF-8. A connection attempt gives up after
    /// `connectTimeoutSeconds`; TCP keepalives and `tcp_user_timeout` notice a server that vanished
    /// (no RST: a partition, a dead host) within about 15 s instead of the kernel's 2 hours; every
    /// statement is cancelled by the server after `statementTimeoutMillis` (0: never).
    ///
    /// `transactionPooling`: the connection goes to a pooler that lends a server connection for one
    /// transaction (PgBouncer's `pool_mode = transaction`), so it keeps no session state: no named
    /// prepared statements, and the statement timeout is set in each transaction (`begin`)
    /// instead of once for the session; statements outside a transaction run under the server's
    /// own setting (the role's, docs/operations.md).
    init(url: String, secret: Secret, connectTimeoutSeconds: Int = 5, statementTimeoutMillis: Int = 0, transactionPooling: Bool = false) throws(SQLError) {
        self.secret = secret
        let notices = Notices()
        self.notices = notices
        commitDeadlineMillis = statementTimeoutMillis > 0 ? statementTimeoutMillis + 2_000 : nil
        preparesStatements = !transactionPooling
        begin = transactionPooling && statementTimeoutMillis > 0 ? "BEGIN; SET LOCAL statement_timeout = \(statementTimeoutMillis)" : "BEGIN"
        // Later entries win; the URL comes last so its own settings, if any, are kept.
        let keywords = [
            "application_name", "client_encoding", "connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval",
            "keepalives_count", "tcp_user_timeout", "dbname",
        ]
        let values = ["gatehouse", "UTF8", String(max(1, connectTimeoutSeconds)), "1", "10", "3", "3", "15000", url]
        let connection = withCStringArray(keywords) { keywords in
            withCStringArray(values) { values in PQconnectdbParams(keywords, values, 1) }
        }
        guard let connection else {
            throw SQLError(kind: .connection, message: "cannot connect to PostgreSQL: out of memory")
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = secret.scrub(String(cString: PQerrorMessage(connection)))
            PQfinish(connection)
            throw SQLError(kind: .connection, message: "cannot connect to PostgreSQL: \(message.trimmed)")
        }
        // libpq prints NOTICEs ("drop cascades to …") to stderr by default; a server's log is not
        // the place. The receiver only notes the warning that says a commit was not confirmed.
        // `notices` lives as long as this connection, which finishes the handle before it goes.
        PQsetNoticeReceiver(connection, receiveNotice, Unmanaged.passUnretained(notices).toOpaque())
        handle = connection
        if statementTimeoutMillis > 0, !transactionPooling {
            // A session setting, not a startup option: poolers such as PgBouncer refuse `options`.
            let result = PQexec(connection, "SET statement_timeout = \(statementTimeoutMillis)")
            defer { PQclear(result) }
            guard PQresultStatus(result) == PGRES_COMMAND_OK else {
                let message = secret.scrub(String(cString: PQerrorMessage(connection)))
                PQfinish(connection)
                throw SQLError(kind: .connection, message: "cannot set the statement timeout: \(message.trimmed)")
            }
        }
    }

    /// Idle, in good standing, and nothing unasked-for waiting on the socket: a server that
    /// shut down or restarted sends its FATAL and closes, which leaves the socket readable. Such
    /// a connection is dropped before it is lent, so the first request after a restart does not
    /// fail on it.
    var isReusable: Bool {
        guard !discarded, PQstatus(handle) == CONNECTION_OK, PQtransactionStatus(handle) == PQTRANS_IDLE else { return false }
        var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) == 0
    }

    /// `true` inside `BEGIN` … `COMMIT`, including a transaction aborted by an error.
    var transactionStatus: PGTransactionStatusType { PQtransactionStatus(handle) }

    func close() {
        PQfinish(handle)
    }

    func query(_ sql: SQL) throws(SQLError) -> [SQLRow] {
        let result = try run(sql)
        defer { PQclear(result) }
        return Self.rows(of: result)
    }

    @discardableResult
    func execute(_ sql: SQL) throws(SQLError) -> Int {
        let result = try run(sql)
        defer { PQclear(result) }
        return Int(String(cString: PQcmdTuples(result))) ?? 0
    }

    func executeScript(_ script: String) throws(SQLError) {
        try checkNotGivenUp()
        notices.unconfirmedCommit = false
        let result = commits(script) ? try bounded { PQsendQuery(handle, script) } : PQexec(handle, script)
        defer { PQclear(result) }
        try check(result)
        if let unconfirmed = unconfirmedCommit() { throw unconfirmed }
    }

    // MARK: - Statements

    private func run(_ sql: SQL) throws(SQLError) -> OpaquePointer {
        try checkNotGivenUp()
        notices.unconfirmedCommit = false
        let result = try runStatement(sql)
        if let unconfirmed = unconfirmedCommit() {
            PQclear(result)
            throw unconfirmed
        }
        return result
    }

    /// Nothing more is sent on a connection given up: one whose commit went unanswered still has
    /// that statement in flight, and libpq would wait for its result (unbounded) before sending the
    /// next (the `ROLLBACK` a failed transaction sends, say).
    private func checkNotGivenUp() throws(SQLError) {
        guard discarded else { return }
        throw SQLError(kind: .connection, message: "the connection was given up after an earlier failure")
    }

    /// A statement that ended outside a transaction block committed (a `COMMIT`, or a statement
    /// run on its own). If the server warned meanwhile that it stopped waiting for a synchronous
    /// standby (``Notices/unconfirmedCommit``), the commit is on this server only: not a success.
    private func unconfirmedCommit() -> SQLError? {
        guard notices.unconfirmedCommit, PQtransactionStatus(handle) == PQTRANS_IDLE else { return nil }
        return SQLError(
            kind: .commitUnconfirmed,
            message: "the commit was not confirmed by a synchronous standby (its wait was cancelled); it holds on the primary only")
    }

    private func runStatement(_ sql: SQL) throws(SQLError) -> OpaquePointer {
        let (text, binds) = sql.render(.postgres)
        var values: [UnsafeMutablePointer<CChar>?] = []
        var lengths: [Int32] = []
        var formats: [Int32] = []
        var types: [Oid] = []
        values.reserveCapacity(binds.count)
        defer { for value in values { value?.deallocate() } }
        for (index, bind) in binds.enumerated() {
            switch bind {
            case .null:
                values.append(nil); lengths.append(0); formats.append(0); types.append(0)
            case .integer(let integer):
                // Untyped (OID 0) so the server infers bigint, integer or boolean from context.
                values.append(Self.cString(String(integer))); lengths.append(0); formats.append(0); types.append(0)
            case .text(let string):
                // Text-format parameters go to libpq as C strings (it ignores their lengths), so a
                // NUL would end the value early: `pk_real\0junk` would match `pk_real`. PostgreSQL
                // text cannot hold U+0000 at all, so the value is refused here, not shortened.
                guard !string.utf8.contains(0) else { throw .nulInText(parameter: index + 1) }
                values.append(Self.cString(string)); lengths.append(Int32(clamping: string.utf8.count)); formats.append(0); types.append(0)
            case .blob(let bytes):
                // Binary bytea; a non-nil pointer even for zero bytes (nil would mean NULL).
                let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: max(bytes.count, 1))
                bytes.withUnsafeBytes { raw in
                    UnsafeMutableRawPointer(buffer).copyMemory(from: raw.baseAddress ?? UnsafeRawPointer(buffer), byteCount: raw.count)
                }
                values.append(buffer); lengths.append(Int32(bytes.count)); formats.append(1); types.append(Self.byteaOID)
            }
        }
        let key = PreparedKey(text: text, types: types)
        let committing = commits(nil)
        func execute(prepared name: String?) throws(SQLError) -> OpaquePointer? {
            try values.withUnsafeBufferPointer { (valuePointers) throws(SQLError) in
                try valuePointers.withMemoryRebound(to: UnsafePointer<CChar>?.self) { (valuePointers) throws(SQLError) in
                    switch (name, committing) {
                    case (let name?, false): PQexecPrepared(handle, name, Int32(binds.count), valuePointers.baseAddress, lengths, formats, 0)
                    case (nil, false): PQexecParams(handle, text, Int32(binds.count), types, valuePointers.baseAddress, lengths, formats, 0)
                    case (let name?, true):
                        try bounded { PQsendQueryPrepared(handle, name, Int32(binds.count), valuePointers.baseAddress, lengths, formats, 0) }
                    case (nil, true):
                        try bounded { PQsendQueryParams(handle, text, Int32(binds.count), types, valuePointers.baseAddress, lengths, formats, 0) }
                    }
                }
            }
        }
        let name = try preparedName(for: key)
        guard let result = try execute(prepared: name) else { throw noResultError() }
        do {
            try check(result)
        } catch {
            PQclear(result)
            // A prepared statement that no longer fits (a migration changed a `SELECT *` table:
            // "cached plan must not change result type") or is gone (the session was reset): forget
            // it, and outside a transaction run the statement once more, unprepared.
            guard let name, error.state == "0A000" || error.state == "26000" else { throw error }
            prepared[key] = nil
            PQclear(PQexec(handle, "DEALLOCATE \(name)"))
            guard PQtransactionStatus(handle) == PQTRANS_IDLE, let retry = try execute(prepared: nil) else { throw error }
            do {
                try check(retry)
            } catch {
                PQclear(retry)
                throw error
            }
            return retry
        }
        return result
    }

    // MARK: - Commits

    /// Whether the statement about to be sent (`script`, or a statement when nil) commits: a
    /// `COMMIT`, or anything sent outside a transaction block. PostgreSQL's statement timeout
    /// stops before a commit begins, so it bounds neither the commit's flush nor its wait for a
    /// synchronous standby, which lasts as long as the standby is away: these are bounded here.
    private func commits(_ script: String?) -> Bool {
        guard commitDeadlineMillis != nil, script != begin else { return false }
        return script == "COMMIT" || PQtransactionStatus(handle) == PQTRANS_IDLE
    }

    /// Sends a statement with `send` (a `PQsendQuery…`) and collects its result as `PQexec` does,
    /// waiting at most ``commitDeadlineMillis``. Past it the connection is given up (the pool
    /// closes it; the server's session, its commit already written, is sent a cancel, which ends
    /// its wait for the standby and makes the commit visible) and the statement
    /// fails as ``SQLError/Kind/connection``: it may or may not have taken effect, and no one is
    /// told it did.
    private func bounded(_ send: () -> Int32) throws(SQLError) -> OpaquePointer? {
        guard let limit = commitDeadlineMillis, send() == 1 else { return nil }
        let deadline = ContinuousClock.now + .milliseconds(limit)
        var kept: OpaquePointer?
        while true {
            while PQisBusy(handle) == 1 {
                let left = deadline - ContinuousClock.now
                let millis = Int32(clamping: max(0, left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000))
                var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
                let ready = millis > 0 ? poll(&descriptor, 1, millis) : 0
                if ready == 0 {
                    PQclear(kept)
                    discarded = true
                    // The server's session would go on waiting for the standby, holding its locks
                    // and a connection slot, while the pool opens another in its place: every
                    // given-up commit would leave one until max_connections is reached. A cancel
                    // ends the wait (the commit stays, as it was: local, not confirmed).
                    PostgresCanceller.shared.cancel(handle)
                    throw SQLError(
                        kind: .connection,
                        message: "no answer to a commit within \(limit) ms (the statement timeout and 2 s): waiting for a synchronous standby, or the server is gone; the connection is dropped")
                }
                if ready < 0, errno == EINTR { continue }
                // Read what came; on a broken socket PQgetResult below reports the error.
                if PQconsumeInput(handle) == 0 { break }
            }
            guard let next = PQgetResult(handle) else { break }
            // As PQexec: the first error is kept; otherwise the last result.
            if let previous = kept, PQresultStatus(previous) == PGRES_FATAL_ERROR {
                PQclear(next)
            } else {
                PQclear(kept)
                kept = next
            }
        }
        return kept
    }

    /// The name of the prepared statement for `key`, preparing it first if needed; `nil` once the
    /// connection holds ``maxPrepared`` statements, and always behind a transaction pooler.
    private func preparedName(for key: PreparedKey) throws(SQLError) -> String? {
        if let name = prepared[key] { return name }
        guard preparesStatements, prepared.count < Self.maxPrepared else { return nil }
        let name = key.name
        var result = PQprepare(handle, name, key.text, Int32(key.types.count), key.types)
        if let existing = result, PQresultStatus(existing) == PGRES_FATAL_ERROR, error(from: existing).state == "42P05" {
            // Already prepared in this session (by a pooler's other client, or before a failed
            // DEALLOCATE): it may hold an outdated plan, so prepare it afresh.
            PQclear(existing)
            PQclear(PQexec(handle, "DEALLOCATE \(name)"))
            result = PQprepare(handle, name, key.text, Int32(key.types.count), key.types)
        }
        defer { PQclear(result) }
        try check(result)
        prepared[key] = name
        return name
    }

    private static func cString(_ string: String) -> UnsafeMutablePointer<CChar> {
        let utf8 = Array(string.utf8)
        let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: utf8.count + 1)
        utf8.withUnsafeBytes { raw in
            if let base = raw.baseAddress { UnsafeMutableRawPointer(buffer).copyMemory(from: base, byteCount: raw.count) }
        }
        buffer[utf8.count] = 0
        return buffer
    }

    private static func rows(of result: OpaquePointer) -> [SQLRow] {
        let columnCount = PQnfields(result)
        let rowCount = PQntuples(result)
        guard rowCount > 0 else { return [] }
        let columns = (0..<columnCount).map { String(cString: PQfname(result, $0)) }
        let types = (0..<columnCount).map { PQftype(result, $0) }
        var rows: [SQLRow] = []
        rows.reserveCapacity(Int(rowCount))
        for row in 0..<rowCount {
            var values: [SQLValue] = []
            values.reserveCapacity(Int(columnCount))
            for column in 0..<columnCount {
                values.append(value(result, row, column, type: types[Int(column)]))
            }
            rows.append(SQLRow(columns: columns, values: values))
        }
        return rows
    }

    private static func value(_ result: OpaquePointer, _ row: Int32, _ column: Int32, type: Oid) -> SQLValue {
        if PQgetisnull(result, row, column) != 0 { return .null }
        let start = PQgetvalue(result, row, column)!
        let length = Int(PQgetlength(result, row, column))
        if type == byteaOID {
            var count = 0
            guard let decoded = start.withMemoryRebound(to: UInt8.self, capacity: length, { PQunescapeBytea($0, &count) })
            else { return .blob([]) }
            defer { PQfreemem(decoded) }
            return .blob(Array(UnsafeBufferPointer(start: decoded, count: count)))
        }
        let text = start.withMemoryRebound(to: UInt8.self, capacity: length) {
            String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
        }
        if type == boolOID { return .integer(text == "t" ? 1 : 0) }
        if integerOIDs.contains(type), let integer = Int64(text) { return .integer(integer) }
        return .text(text)
    }

    // MARK: - Errors

    private func check(_ result: OpaquePointer?) throws(SQLError) {
        guard let result else { throw noResultError() }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            return
        default:
            throw error(from: result)  // the caller still owns (and clears) `result`
        }
    }

    /// libpq returns no result when the connection is gone or memory ran out.
    private func noResultError() -> SQLError {
        discarded = true
        return SQLError(kind: .connection, message: secret.scrub(String(cString: PQerrorMessage(handle))).trimmed)
    }

    private func error(from result: OpaquePointer) -> SQLError {
        func field(_ code: Character) -> String? {
            PQresultErrorField(result, Int32(code.asciiValue!)).map { String(cString: $0) }
        }
        let state = field("C") ?? ""
        let primary = field("M") ?? String(cString: PQresultErrorMessage(result)).trimmed
        let message = secret.scrub(state.isEmpty ? primary : "\(state): \(primary)")
        let constraint = field("n")
        let kind: SQLError.Kind
        switch state {
        case "23505": kind = .uniqueViolation
        case "23503": kind = .foreignKeyViolation
        case "23514", "23502": kind = .checkViolation
        // 57014: cancelled, by the statement timeout among others.
        case "40001", "40P01", "55P03", "57014": kind = .busy
        // 57P01–57P05: the server is shutting down, crashed, not yet accepting, or ended this session.
        case _ where state.hasPrefix("57P"): kind = .connection
        case _ where state.hasPrefix("08"): kind = .connection
        // A write refused as read-only: this connection reached a standby (a URL without
        // `target_session_attrs=read-write`, or an old primary that came back as a standby).
        // Unavailable, and the connection is not lent again: a new one looks for the primary.
        case "25006": kind = .connection
        default: kind = PQstatus(handle) == CONNECTION_OK ? .other : .connection
        }
        if kind == .connection { discarded = true }
        return SQLError(kind: kind, message: message, constraint: constraint, state: state)
    }
}

extension String {
    fileprivate var trimmed: String { trimmingCharacters(in: .whitespacesAndNewlines) }
}

/// Calls `body` with a C `char *[]` view of `strings`, valid only during the call.
private func withCStringArray<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    let copies = strings.map { strdup($0) } + [nil]
    defer { for copy in copies { free(copy) } }
    return copies.withUnsafeBufferPointer { buffer in
        buffer.withMemoryRebound(to: UnsafePointer<CChar>?.self) { body($0.baseAddress!) }
    }
}

/// What the server warned of during one statement. A class, so libpq's receiver can reach it
/// through a pointer; touched only by the thread that holds the connection (libpq calls the
/// receiver on that thread, inside `PQexec`…).
private final class Notices {
    /// A `WARNING` with the generic SQLSTATE `01000` arrived: in a statement that commits, that
    /// is PostgreSQL's "canceling wait for synchronous replication" (the transaction "has already
    /// committed locally, but might not have been replicated to the standby"). The text is
    /// translated with the server's `lc_messages`, so the severity and SQLSTATE are what is read.
    var unconfirmedCommit = false
}

/// Notes the warning that says a commit was not confirmed; drops every other notice (a
/// `@convention(c)` function: libpq calls it on the connection's thread).
private let receiveNotice: PQnoticeReceiver = { context, result in
    guard let context, let result,
        let severity = PQresultErrorField(result, Int32(UInt8(ascii: "V"))), let state = PQresultErrorField(result, Int32(UInt8(ascii: "C")))
    else { return }
    if String(cString: severity) == "WARNING", String(cString: state) == "01000" {
        Unmanaged<Notices>.fromOpaque(context).takeUnretainedValue().unconfirmedCommit = true
    }
}

/// Sends cancel requests for given-up statements, one at a time on a thread of its own: a cancel
/// opens a connection to the server without a time limit (libpq 15's `PQcancel`), which must not
/// hold a request's thread when the server is unreachable. At most ``maxPending`` wait; past that a
/// cancel is skipped (the server's session then waits for its standby as it would have).
final class PostgresCanceller: Sendable {
    static let shared = PostgresCanceller()
    static let maxPending = 64

    private struct Request: @unchecked Sendable {  // a PGcancel is independent of its connection
        let cancel: OpaquePointer
    }
    private let queue = DispatchQueue(label: "gatehouse-postgres-cancel")
    private let pending = Mutex(0)

    /// Queues a cancel of what `connection` runs now. Call before the connection is closed.
    func cancel(_ connection: OpaquePointer) {
        let queued = pending.withLock { count in
            guard count < Self.maxPending else { return false }
            count += 1
            return true
        }
        guard queued else { return }
        guard let cancel = PQgetCancel(connection) else {
            pending.withLock { $0 -= 1 }
            return
        }
        let request = Request(cancel: cancel)
        queue.async { [self] in
            var error = [CChar](repeating: 0, count: 256)
            _ = PQcancel(request.cancel, &error, Int32(error.count))
            PQfreeCancel(request.cancel)
            pending.withLock { $0 -= 1 }
        }
    }
}
