/// One result row, decoded by column name.
///
/// Every accessor throws ``SQLError`` of kind ``SQLError/Kind/decoding`` naming the column when
/// it is missing or holds a value of another type.
public struct SQLRow: Sendable {
    /// Column names, in result order (shared by all rows of one result).
    public let columns: [String]
    /// Values, in the same order as ``columns``.
    public let values: [SQLValue]

    /// A row; drivers build these. `columns` and `values` must have the same length.
    public init(columns: [String], values: [SQLValue]) {
        precondition(columns.count == values.count, "a row needs one value per column")
        self.columns = columns
        self.values = values
    }

    /// The raw value of `column`, or `nil` when the result has no such column.
    public subscript(column: String) -> SQLValue? {
        columns.firstIndex(of: column).map { values[$0] }
    }

    /// The raw value of `column`; throws when the result has no such column.
    public func value(_ column: String) throws(SQLError) -> SQLValue {
        guard let value = self[column] else {
            throw .decoding(column: column, expected: "a column", found: nil)
        }
        return value
    }

    /// Non-NULL text.
    public func string(_ column: String) throws(SQLError) -> String {
        let value = try value(column)
        guard case .text(let text) = value else { throw .decoding(column: column, expected: "text", found: value) }
        return text
    }

    /// Text or NULL.
    public func optionalString(_ column: String) throws(SQLError) -> String? {
        if case .null = try value(column) { return nil }
        return try string(column)
    }

    /// A non-NULL integer. Decimal text is accepted too, because PostgreSQL returns
    /// `numeric` (e.g. `SUM(bigint)`) and untyped parameters as text.
    public func int64(_ column: String) throws(SQLError) -> Int64 {
        let value = try value(column)
        switch value {
        case .integer(let integer): return integer
        case .text(let text):
            if let integer = Int64(text) { return integer }
        default: break
        }
        throw .decoding(column: column, expected: "an integer", found: value)
    }

    /// An integer or NULL.
    public func optionalInt64(_ column: String) throws(SQLError) -> Int64? {
        if case .null = try value(column) { return nil }
        return try int64(column)
    }

    /// A non-NULL integer that fits `Int`.
    public func int(_ column: String) throws(SQLError) -> Int {
        let integer = try int64(column)
        guard let result = Int(exactly: integer) else {
            throw .decoding(column: column, expected: "an Int", found: .integer(integer))
        }
        return result
    }

    /// A boolean stored as integer 0/1 (SQLite) or `boolean` (PostgreSQL, decoded to 0/1).
    public func bool(_ column: String) throws(SQLError) -> Bool {
        let value = try value(column)
        switch value {
        case .integer(0): return false
        case .integer(1): return true
        default: throw .decoding(column: column, expected: "a boolean (0 or 1)", found: value)
        }
    }

    /// Non-NULL bytes.
    public func bytes(_ column: String) throws(SQLError) -> [UInt8] {
        let value = try value(column)
        guard case .blob(let bytes) = value else { throw .decoding(column: column, expected: "bytes", found: value) }
        return bytes
    }

    /// Bytes or NULL.
    public func optionalBytes(_ column: String) throws(SQLError) -> [UInt8]? {
        if case .null = try value(column) { return nil }
        return try bytes(column)
    }
}
