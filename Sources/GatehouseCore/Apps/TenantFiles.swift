import Foundation
import GatehouseCrypto

/// Operators' `Tenants/*.json` files: each creates its app, or replaces its settings when the
/// file changed since it was last applied.
extension AppService {
    public enum ApplyOutcome: String, Sendable {
        case created, updated, unchanged
    }

    /// Applies one `Tenants/*.json` document: creates the app with its fixed `app_key`, or replaces
    /// its settings when the file changed since it was last applied. Idempotent.
    public func applyTenant(_ json: JSON, directory folder: String, environment: [String: String], retried: Bool = false) throws -> (AppContext, ApplyOutcome) {
        // A bad app_key is reported with the file's other problems, not instead of them.
        let appKey = json["app_key"]?.stringValue.flatMap { Self.isValidAppKey($0) ? $0 : nil }
        var problems = appKey == nil ? [FieldError("app_key", "Required: 16 to 128 letters, digits, '_' or '-'.")] : []
        var decoded: AppSettings?
        do {
            decoded = try AppSettings.decode(json, source: .tenantFile(directory: folder, environment: environment), caps: caps, extraKeys: ["app_key"], allowPrivateOutbound: allowPrivateOutbound)
        } catch {
            if error.fieldErrors.isEmpty { throw error }
            problems += error.fieldErrors
        }
        if let decoded, let problem = caps.problem(with: decoded, before: nil) { problems.append(problem) }
        guard let appKey, let settings = decoded, problems.isEmpty else { throw GatehouseError.validation(problems) }
        // The checksum covers the resolved settings, so a changed key file or variable counts as a
        // change. They hold secrets in clear: keyed, so a dump cannot test guesses against it.
        let resolved = settings.json(secrets: .plain).serialized()
        let checksum = Digest.hex(Digest.hmacSHA256(key: checksumKey, data: resolved))
        if let existing = try store.apps.find(appKey: appKey) {
            let unchanged: Bool
            if let stored = existing.sourceChecksum {
                unchanged = constantTimeEquals(Array(stored.utf8), Array(checksum.utf8))
            } else if let legacy = existing.legacySourceChecksum {
                // Applied last by a version before keyed checksums (migration 0006): compared once
                // the old way, so that admin edits to an app whose file did not change survive.
                unchanged = constantTimeEquals(Array(legacy.utf8), Array(Digest.hex(Digest.sha256(resolved)).utf8))
                if unchanged { try store.app(existing.id).settings.keepSourceChecksum(checksum) }
            } else {
                unchanged = false
            }
            if unchanged, let context = try self.directory.app(id: existing.id) { return (context, .unchanged) }
            guard let context = try self.directory.app(id: existing.id) else { throw InternalError("app vanished") }
            if settings.signingAlgorithm != context.settings.signingAlgorithm {
                throw GatehouseError.validation("signing_algorithm", "Cannot change after the app was created.")
            }
            let now = clock.nowMillis()
            let json = sealed(settings.keepingReplacedWebhookSecrets(of: context.settings, now: now), app: existing.id)
            try units.run(store.app(existing.id)) { tx in
                try Self.requireProvidersKeepTheirUsers(tx, from: context.settings, to: settings)
                _ = try tx.settings.updateSettings(json: json, allowedOrigins: settings.allowedOrigins, sourceChecksum: checksum, expectedVersion: nil, now: now)
                try tx.auditLog.record(Event(type: .appSettingsChanged, userID: nil, sessionID: nil, ip: nil, userAgent: nil, data: ["source": "tenants"], createdAt: now))
            }
            return (try reloaded(existing.id), .updated)
        }
        do {
            return (try insert(settings: settings, appKey: appKey, source: "tenants", sourceChecksum: checksum).app, .created)
        } catch let error as GatehouseError where error.code == .appKeyTaken && !retried {
            // Another node applying the same file at the same start won the insert: update instead.
            return try applyTenant(json, directory: folder, environment: environment, retried: true)
        }
    }

    /// Applies every `*.json` file of `folder` in name order; returns a line per file, each also
    /// passed to `applied` as soon as its file is done (so that a later file's failure does not
    /// hide what the earlier ones changed).
    @discardableResult
    public func applyTenants(folder: String, environment: [String: String], applied: (String) -> Void = { _ in }) throws -> [String] {
        let names = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".json") }.sorted()
        var lines: [String] = []
        for name in names {
            let path = (folder as NSString).appendingPathComponent(name)
            guard let data = FileManager.default.contents(atPath: path) else { throw TenantFileError(file: name, problems: ["cannot read the file"]) }
            do {
                let json = try JSON.parse(Array(data))
                let (app, outcome) = try applyTenant(json, directory: folder, environment: environment)
                lines.append("\(name): \(outcome.rawValue) \(app.id)")
                applied(lines[lines.count - 1])
            } catch let error as GatehouseError {
                throw TenantFileError(file: name, problems: error.fieldErrors.isEmpty ? [error.detail ?? error.code.rawValue] : error.fieldErrors.map { "\($0.field): \($0.message)" })
            } catch is JSON.ParseError {
                throw TenantFileError(file: name, problems: ["not valid JSON"])
            }
        }
        // Every file has had its one comparison with an unkeyed checksum of an earlier version:
        // those left (apps no file names any more) go, so no dump holds them.
        try store.apps.forgetLegacySourceChecksums()
        return lines
    }
}

/// A `Tenants/` file that cannot be applied, with every problem found.
public struct TenantFileError: Error, CustomStringConvertible {
    public let file: String
    public let problems: [String]
    public var description: String { "\(file):\n" + problems.map { "  - \($0)" }.joined(separator: "\n") }
}
