/// One value travelling to or from the database: the portable subset of column types.
///
/// Booleans travel as `integer(0)` / `integer(1)`; times as `integer` epoch milliseconds.
public enum SQLValue: Sendable, Hashable {
    /// SQL `NULL`.
    case null
    /// A 64-bit signed integer (`BIGINT`, `INTEGER`, and booleans as 0/1).
    case integer(Int64)
    /// UTF-8 text.
    case text(String)
    /// Raw bytes (`BLOB` on SQLite, `BYTEA` on PostgreSQL).
    case blob([UInt8])
}

/// A Swift value that can be interpolated into ``SQL`` as a bind parameter.
public protocol SQLBindable {
    /// The value sent to the database.
    var sqlValue: SQLValue { get }
}

extension SQLValue: SQLBindable {
    /// The value itself.
    public var sqlValue: SQLValue { self }
}

extension String: SQLBindable {
    /// `.text(self)`.
    public var sqlValue: SQLValue { .text(self) }
}

extension Substring: SQLBindable {
    /// `.text(String(self))`.
    public var sqlValue: SQLValue { .text(String(self)) }
}

extension Int: SQLBindable {
    /// `.integer(Int64(self))`.
    public var sqlValue: SQLValue { .integer(Int64(self)) }
}

extension Int64: SQLBindable {
    /// `.integer(self)`.
    public var sqlValue: SQLValue { .integer(self) }
}

extension Bool: SQLBindable {
    /// `.integer(1)` for `true`, `.integer(0)` for `false`.
    public var sqlValue: SQLValue { .integer(self ? 1 : 0) }
}

extension Array: SQLBindable where Element == UInt8 {
    /// `.blob(self)`.
    public var sqlValue: SQLValue { .blob(self) }
}

extension Optional: SQLBindable where Wrapped: SQLBindable {
    /// The wrapped value's ``SQLValue``, or `.null`.
    public var sqlValue: SQLValue {
        switch self {
        case .none: .null
        case .some(let wrapped): wrapped.sqlValue
        }
    }
}
