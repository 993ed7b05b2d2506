/// A statement whose every interpolation becomes a bind parameter, so a value can never be
/// read as SQL.
///
/// ```swift
/// let sql: SQL = "UPDATE users SET email = \(email) WHERE app_id = \(app) AND id = \(id)"
/// ```
///
/// - `\(value)` with any ``SQLBindable`` binds the value.
/// - `\(otherSQL)` splices another ``SQL`` fragment together with its binds.
/// - `\(list: values)` binds each value, separated by commas (for `IN (…)`); an empty list
///   renders `NULL`, so `x IN (NULL)` matches nothing.
/// - `\(unsafeSQL: "…")` splices raw text. Never pass user input to it.
public struct SQL: ExpressibleByStringInterpolation, Sendable, CustomStringConvertible {
    enum Fragment: Sendable, Hashable {
        case raw(String)
        case bind(SQLValue)
    }

    private(set) var fragments: [Fragment]

    /// A statement with no binds.
    public init(stringLiteral value: String) {
        fragments = [.raw(value)]
    }

    /// A statement built by interpolation; see the type's documentation.
    public init(stringInterpolation: StringInterpolation) {
        fragments = stringInterpolation.fragments
    }

    /// Raw SQL text with no binds. Never pass user input.
    public init(unsafeSQL text: String) {
        fragments = [.raw(text)]
    }

    /// Builds the interpolation of a ``SQL`` literal.
    public struct StringInterpolation: StringInterpolationProtocol {
        var fragments: [Fragment] = []

        /// Called by the compiler.
        public init(literalCapacity: Int, interpolationCount: Int) {
            fragments.reserveCapacity(interpolationCount * 2 + 1)
        }

        /// Literal text of the statement.
        public mutating func appendLiteral(_ literal: String) {
            if !literal.isEmpty { fragments.append(.raw(literal)) }
        }

        /// Binds `value` as a parameter.
        public mutating func appendInterpolation(_ value: some SQLBindable) {
            fragments.append(.bind(value.sqlValue))
        }

        /// Binds `value`, or `NULL` when it is `nil`.
        public mutating func appendInterpolation<Value: SQLBindable>(_ value: Value?) {
            fragments.append(.bind(value.sqlValue))
        }

        /// Splices another statement fragment, keeping its binds.
        public mutating func appendInterpolation(_ sql: SQL) {
            fragments.append(contentsOf: sql.fragments)
        }

        /// Binds every value, separated by `, `; `NULL` when `values` is empty.
        public mutating func appendInterpolation<Value: SQLBindable>(list values: some Sequence<Value>) {
            var first = true
            for value in values {
                if !first { fragments.append(.raw(", ")) }
                fragments.append(.bind(value.sqlValue))
                first = false
            }
            if first { fragments.append(.raw("NULL")) }
        }

        /// Splices raw SQL text (identifiers chosen by code, never user input).
        public mutating func appendInterpolation(unsafeSQL text: String) {
            fragments.append(.raw(text))
        }
    }

    /// The text with numbered placeholders (`?1` for SQLite, `$1` for PostgreSQL) and the
    /// values to bind, in placeholder order.
    public func render(_ dialect: SQLDialect) -> (text: String, binds: [SQLValue]) {
        let marker: Character = dialect == .sqlite ? "?" : "$"
        var text = ""
        var binds: [SQLValue] = []
        for fragment in fragments {
            switch fragment {
            case .raw(let raw):
                text += raw
            case .bind(let value):
                binds.append(value)
                text.append(marker)
                text += String(binds.count)
            }
        }
        return (text, binds)
    }

    /// `true` when the statement has no text at all.
    public var isEmpty: Bool {
        fragments.allSatisfy { if case .raw(let raw) = $0 { raw.isEmpty } else { false } }
    }

    /// The statement rendered for SQLite, without the bound values (safe for logs).
    public var description: String { render(.sqlite).text }

    /// Concatenates two fragments, keeping the binds of both.
    public static func + (lhs: SQL, rhs: SQL) -> SQL {
        var result = lhs
        result.fragments += rhs.fragments
        return result
    }

    /// Appends `rhs` to `lhs`, keeping the binds of both.
    public static func += (lhs: inout SQL, rhs: SQL) {
        lhs.fragments += rhs.fragments
    }
}

extension Sequence<SQL> {
    /// The fragments joined by a raw `separator` (such as `", "` or `" AND "`).
    public func joined(separator: String) -> SQL {
        var result = SQL(stringLiteral: "")
        var first = true
        for part in self {
            if !first { result += SQL(unsafeSQL: separator) }
            result += part
            first = false
        }
        return result
    }
}
