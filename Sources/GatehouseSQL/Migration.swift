/// One forward-only schema change, loaded from `NNNN_name.sql` (or its dialect override).
public struct Migration: Sendable, Hashable {
    /// The `NNNN` prefix: migrations apply in increasing version order, starting at 1, with no gaps.
    public let version: Int
    /// The file name between `NNNN_` and `.sql` (without a dialect suffix).
    public let name: String
    /// The statements, run with ``SQLConnection/executeScript(_:)`` inside one transaction.
    /// They must not contain `BEGIN`/`COMMIT` themselves.
    public let sql: String
    /// A digest of ``sql`` (the composition root uses hex SHA-256), recorded when applied and
    /// compared on every start so an edited migration is refused.
    public let checksum: String

    /// A migration.
    public init(version: Int, name: String, sql: String, checksum: String) {
        self.version = version
        self.name = name
        self.sql = sql
        self.checksum = checksum
    }
}
