import GatehouseCore
import GatehouseSQL
import SQLiteDriver

/// `gatehouse backup`: a consistent copy of the embedded database while the server runs.
extension Gatehouse {
    /// Why a backup was not made.
    public struct BackupRefused: Error, CustomStringConvertible {
        public let description: String
    }

    /// How to back up PostgreSQL instead (docs/operations.md, "Backups, restores and upgrades").
    public static let postgresBackupAdvice = """
        gatehouse backup copies the embedded SQLite database only. Back up PostgreSQL with its own tools, e.g.:
          pg_dump --format=custom --file=gatehouse-$(date +%F).dump "$GATEHOUSE_DATABASE_URL"
        and restore into an empty database with:
          pg_restore --no-owner --dbname="$GATEHOUSE_DATABASE_URL" gatehouse-YYYY-MM-DD.dump
        (or use continuous archiving for point-in-time recovery). Keep the master key apart from the dumps.
        """

    /// Copies the SQLite database of `configuration` into a new file at `destination` with
    /// SQLite's online backup API: consistent (one commit's state) while a server on it keeps
    /// writing. Neither migrates nor changes the source. PostgreSQL is refused with advice.
    public static func backup(_ configuration: Configuration, to destination: String) throws -> (path: String, bytes: Int64) {
        guard case .sqlite(let path) = configuration.database else { throw BackupRefused(description: postgresBackupAdvice) }
        do {
            let copy = try SQLiteBackup.copy(from: path, to: destination)
            return (copy.path, copy.bytes)
        } catch {
            throw BackupRefused(description: error.message)
        }
    }
}
