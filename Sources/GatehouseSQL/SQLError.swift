/// An error from the storage layer, classified so callers can react without parsing text.
public struct SQLError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, as far as a caller needs to know.
    public enum Kind: Sendable, Hashable {
        /// A unique or primary-key constraint rejected the row.
        case uniqueViolation
        /// A foreign-key constraint rejected the row.
        case foreignKeyViolation
        /// A `CHECK` (or `NOT NULL`) constraint rejected the row.
        case checkViolation
        /// The database could not be reached, the connection broke, or the server it reached
        /// cannot take writes (a standby: `25006`, read-only transaction). A statement or `COMMIT`
        /// whose answer was lost this way may or may not have taken effect.
        case connection
        /// The commit took effect on the server it reached, but was not confirmed durable as the
        /// server is configured to confirm it: its wait for a synchronous standby was cancelled
        /// (`pg_cancel_backend`, a cancel request; PostgreSQL then keeps the commit locally and
        /// only warns). Whoever asked must not be told it succeeded; a failover now would lose it.
        case commitUnconfirmed
        /// Lock contention, serialization failure or an exhausted pool: retrying may succeed.
        case busy
        /// A row could not be decoded into the requested Swift type.
        case decoding
        /// Migrations could not be loaded or applied.
        case migration
        /// A bound value the database cannot hold: text containing U+0000 (PostgreSQL text
        /// cannot store it, and libpq would cut the value short at it). Refused before it is
        /// sent, on every driver, so a key with a NUL never matches the key before the NUL.
        case invalidValue
        /// Anything else (syntax errors, …).
        case other
    }

    /// The classification.
    public let kind: Kind
    /// A human-readable explanation for logs only — never send it in an HTTP response.
    public let message: String
    /// The constraint or index the database named, when it said (PostgreSQL's constraint
    /// name; SQLite's `table.column` list from "UNIQUE constraint failed: t.col").
    public let constraint: String?
    /// PostgreSQL's SQLSTATE (`23505`, …) when the server sent one.
    public let state: String?

    /// Creates an error.
    public init(kind: Kind, message: String, constraint: String? = nil, state: String? = nil) {
        self.kind = kind
        self.message = message
        self.constraint = constraint
        self.state = state
    }

    /// A ``Kind/decoding`` error naming the column.
    public static func decoding(column: String, expected: String, found: SQLValue?) -> SQLError {
        let what: String
        switch found {
        case nil: what = "no such column"
        case .null?: what = "NULL"
        case .integer?: what = "an integer"
        case .text?: what = "text"
        case .blob?: what = "a blob"
        }
        return SQLError(kind: .decoding, message: "column \"\(column)\": expected \(expected), found \(what)")
    }

    /// An ``Kind/invalidValue`` error for text parameter `index` (1-based) containing U+0000.
    public static func nulInText(parameter index: Int) -> SQLError {
        SQLError(kind: .invalidValue, message: "text parameter \(index) contains U+0000, which a text column cannot hold")
    }

    /// `SQLError(kind): message [constraint]`.
    public var description: String {
        var text = "SQLError(\(kind)): \(message)"
        if let constraint { text += " [constraint: \(constraint)]" }
        return text
    }
}
