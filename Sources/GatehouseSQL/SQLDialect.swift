/// The SQL flavour a database speaks. Statements are written once in the portable subset both
/// understand; the dialect only changes how bind parameters are numbered and which migration
/// override file is chosen.
public enum SQLDialect: String, Sendable {
    /// SQLite 3: bind parameters render as `?1`, `?2`, …
    case sqlite
    /// PostgreSQL: bind parameters render as `$1`, `$2`, …
    case postgres
}
