/// The SQL flavour a database speaks. Statements are written once in the portable subset both
/// understand; the dialect only changes how bind parameters are numbered, which migration
/// override file is chosen, and the few expressions below.
public enum SQLDialect: String, Sendable {
    /// SQLite 3: bind parameters render as `?1`, `?2`, …
    case sqlite
    /// PostgreSQL: bind parameters render as `$1`, `$2`, …
    case postgres

    /// The database server's clock, in whole milliseconds since 1970, as an SQL expression: for
    /// values every node must compare against one clock, whatever its own says.
    public var nowMillis: SQL {
        switch self {
        case .sqlite: SQL(unsafeSQL: "CAST((julianday('now') - 2440587.5) * 86400000 AS BIGINT)")
        case .postgres: SQL(unsafeSQL: "CAST(extract(epoch FROM clock_timestamp()) * 1000 AS BIGINT)")
        }
    }
}
