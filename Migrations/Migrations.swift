import Foundation

/// The SQL migrations shipped with this build, read from the package's resources.
public enum BundledMigrations {
    /// The folder holding `NNNN_name.sql` files (and `NNNN_name.sqlite.sql` / `.postgres.sql` overrides).
    public static var directory: URL {
        Bundle.module.resourceURL!.appendingPathComponent("sql")
    }
}
