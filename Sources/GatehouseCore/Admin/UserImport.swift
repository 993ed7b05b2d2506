import Synchronization

/// What an import did: `imported` and `skipped` users, and why lines failed.
public struct ImportReport: Sendable, Equatable {
    /// One line that was not imported for a fault of its own.
    public struct LineError: Sendable, Equatable {
        /// 1-based, as an editor numbers the file's lines (blank lines count).
        public var line: Int
        /// An error code of the API's catalogue: `request/malformed` (not a JSON object, or a
        /// line too long) or `request/validation-failed` (a field against its rule).
        public var code: ErrorCode
        public var message: String
    }

    public var imported = 0
    /// Lines whose email or identity exists in the app, or came earlier in the same file.
    public var skipped = 0
    /// Lines in error, all of them (``errors`` lists at most ``maxListedErrors``).
    public var failed = 0
    /// The first ``maxListedErrors`` failed lines, in order.
    public var errors: [LineError] = []

    /// The most line errors listed: a file of a million broken lines answers with a short report.
    public static let maxListedErrors = 1000

    public init() {}

    /// The longest message kept: a message names the line's fields, and an unknown field's name is
    /// the client's (a line may hold a thousand of them, each as long as the line).
    public static let maxMessageCharacters = 500

    mutating func fail(_ line: Int, _ code: ErrorCode, _ message: String) {
        failed += 1
        guard errors.count < Self.maxListedErrors else { return }
        let shown = message.count > Self.maxMessageCharacters ? String(message.prefix(Self.maxMessageCharacters - 1)) + "…" : message
        errors.append(LineError(line: line, code: code, message: shown))
    }

    /// `{imported, skipped, failed, errors: [{line, code, message}]}`, as the API answers.
    public var json: JSON {
        [
            "imported": .int(Int64(imported)), "skipped": .int(Int64(skipped)), "failed": .int(Int64(failed)),
            "errors": .array(errors.map { ["line": .int(Int64($0.line)), "code": .string($0.code.rawValue), "message": .string($0.message)] }),
        ]
    }
}

/// Imports users from an NDJSON file (ADR 0031): the admin API's `POST /v1/admin/users/import`
/// (a spooled body) and the command line's `gatehouse users import` read the same way, line by
/// line, a batch of ``batchSize`` lines a unit of work, so memory holds one batch, never the file.
///
/// A line is checked with ``ImportLine/decode(_:firebase:now:)``; an email or an identity that
/// exists in the app, or that an earlier line of the file took, is skipped (never overwritten).
/// Password hashes are stored as imported (``ImportedPasswordHash/storedForm(sealer:app:)``) and
/// verified at the first sign-in, so an import hashes nothing. Imported users record no
/// `user.signed_up` (no `user.created` webhook each): one audit event, `users.imported`, tells the
/// counts. One import runs at a time per app on a node: another is refused (429).
public final class UserImport: Sendable {
    private let store: any Store
    private let units: UnitOfWork
    private let sealer: SecretSealer
    private let clock: any Clock
    /// The node's imports and exports (one import per app, a bound across apps).
    private let jobs: BulkJobs

    /// Lines a unit of work writes.
    public static let batchSize = 500
    /// Lines one API request may hold (the command line has no limit).
    public static let maxRequestLines = 10_000
    /// Bytes one API request may hold.
    public static let maxRequestBytes = 16 * 1024 * 1024

    /// Where an import came from, for its audit event.
    public enum Source: String, Sendable {
        case api, cli
    }

    public init(store: any Store, units: UnitOfWork, sealer: SecretSealer, jobs: BulkJobs, clock: any Clock) {
        self.store = store
        self.jobs = jobs
        self.units = units
        self.sealer = sealer
        self.clock = clock
    }

    /// Throws the 429 ``run(app:path:maxLines:source:progress:)`` would throw now: checked before
    /// the request's body is spooled, so that a busy app or node is not sent 16 MiB first.
    public func refuseIfBusy(app: AppID) throws(GatehouseError) { try jobs.check(.userImport, app: app) }

    /// Imports the NDJSON file at `path` into `app`. `maxLines`: more non-blank lines than this is
    /// refused (413) before any is imported. `progress` is called after each batch with the report
    /// so far. Throws 429 `auth/too-many-requests` while another import of the app runs here, or
    /// while the node runs as many imports and exports as it takes (``BulkJobs``).
    public func run(
        app: AppContext, path: String, maxLines: Int? = nil, source: Source, progress: ((ImportReport) -> Void)? = nil
    ) throws -> ImportReport {
        let slot = try jobs.start(.userImport, app: app.id)
        defer { slot.end() }
        if let maxLines {
            let count = try Self.countLines(path, upTo: maxLines + 1)
            if count > maxLines {
                throw GatehouseError(
                    .payloadTooLarge,
                    "At most \(maxLines) lines a request; this body has more. Split the file, or run gatehouse users import on the server.")
            }
        }
        let lines = try Self.open(path)
        let data = store.app(app.id)
        var report = ImportReport()
        var batch: [(number: Int, line: ImportLine)] = []
        let firebase = app.settings.firebase.hashConfig
        let providers = ImportLine.providers(of: app.settings)
        while let line = try Self.next(lines) {
            switch line {
            case .tooLong(let number):
                report.fail(number, .malformedRequest, "The line is longer than \(NDJSONLines.maxLineBytes / 1024) KiB.")
            case .text(let number, let bytes):
                if NDJSONLines.isBlank(bytes) { continue }
                guard let json = try? JSON.parse(bytes), case .object = json else {
                    report.fail(number, .malformedRequest, "Not a JSON object.")
                    continue
                }
                do {
                    batch.append((number, try ImportLine.decode(json, firebase: firebase, providers: providers, now: clock.nowMillis())))
                } catch {
                    report.fail(number, error.code, Self.message(error))
                }
            }
            if batch.count >= Self.batchSize {
                try write(batch, app: app, data, into: &report)
                batch.removeAll(keepingCapacity: true)
                progress?(report)
            }
        }
        if !batch.isEmpty {
            try write(batch, app: app, data, into: &report)
            progress?(report)
        }
        try units.record(
            Event(
                type: .usersImported, userID: nil, sessionID: nil, ip: nil, userAgent: nil,
                data: ["imported": .int(Int64(report.imported)), "skipped": .int(Int64(report.skipped)), "failed": .int(Int64(report.failed)),
                       "source": .string(source.rawValue)],
                createdAt: clock.nowMillis()),
            in: data)
        return report
    }

    /// Writes one batch in one unit of work: what exists is skipped, the rest inserted. An
    /// identity taken between the check and the insert (a sign-in at that moment) makes the unit
    /// roll back; it is then checked and written again.
    private func write(_ batch: [(number: Int, line: ImportLine)], app: AppContext, _ data: any AppScopedStore, into report: inout ImportReport) throws {
        var attempts = 0
        while true {
            attempts += 1
            do {
                let skipped = try units.run(data) { tx -> Int in
                    let (accounts, skipped) = try accounts(batch, app: app, tx)
                    try tx.users.insertImported(accounts)
                    return skipped
                }
                report.skipped += skipped
                report.imported += batch.count - skipped
                return
            } catch UserConflict.identityTaken {
                guard attempts < 3 else {
                    throw GatehouseError(.unavailable, "Sign-ins kept taking the identities of this import's lines; retry the import.", retryAfter: 5)
                }
            }
        }
    }

    /// The accounts of a batch that take nothing existing, and how many lines were skipped.
    private func accounts(_ batch: [(number: Int, line: ImportLine)], app: AppContext, _ tx: any AppScopedStore) throws -> ([ImportedAccount], Int) {
        let emails = try tx.users.existingEmails(Array(Set(batch.compactMap(\.line.email))))
        var taken: [IdentityProvider: Set<String>] = [:]
        for provider in Set(batch.flatMap { $0.line.identities.map(\.provider) }) {
            let subjects = batch.flatMap { $0.line.identities.filter { $0.provider == provider }.map(\.subject) }
            taken[provider] = try tx.users.existingSubjects(Array(Set(subjects)), of: provider)
        }
        // A password identity's subject is its email: one left by an erased account still holds it.
        taken[.password] = try tx.users.existingSubjects(Array(Set(batch.compactMap { $0.line.passwordHash == nil ? nil : $0.line.email })), of: .password)
        var seenEmails = emails
        var accounts: [ImportedAccount] = []
        var skipped = 0
        let now = clock.nowMillis()
        for (_, line) in batch {
            let identities = line.identities.map { Identity(provider: $0.provider, subject: $0.subject, email: $0.email ?? line.email, createdAt: now) }
                + (line.passwordHash == nil ? [] : line.email.map { [Identity(provider: .password, subject: $0, email: $0, createdAt: now)] } ?? [])
            let exists = line.email.map { seenEmails.contains($0) } ?? false
                || identities.contains { taken[$0.provider, default: []].contains($0.subject) }
            guard !exists else {
                skipped += 1
                continue
            }
            if let email = line.email { seenEmails.insert(email) }
            for identity in identities { taken[identity.provider, default: []].insert(identity.subject) }
            let createdAt = line.createdAt ?? now
            let user = User(
                id: .generate(), email: line.email, emailVerified: line.emailVerified, firstName: line.firstName, lastName: line.lastName,
                createdAt: createdAt, updatedAt: now, lastSignInAt: nil, locale: line.locale, displayName: line.displayName, appMetadata: line.appMetadata,
                userMetadata: line.userMetadata)
            accounts.append(ImportedAccount(user: user, passwordHash: line.passwordHash?.storedForm(sealer: sealer, app: app.id), identities: identities))
        }
        return (accounts, skipped)
    }

    /// `field: message; field: message`, or the error's detail.
    static func message(_ error: GatehouseError) -> String {
        guard !error.fieldErrors.isEmpty else { return error.detail ?? error.code.title }
        return error.fieldErrors.map { "\($0.field): \($0.message)" }.joined(separator: "; ")
    }

    /// The non-blank lines of the file, counted up to `limit`.
    static func countLines(_ path: String, upTo limit: Int) throws -> Int {
        let lines = try open(path)
        var count = 0
        while count < limit, let line = try next(lines) {
            if case .text(_, let bytes) = line, NDJSONLines.isBlank(bytes) { continue }
            count += 1
        }
        return count
    }

    private static func open(_ path: String) throws -> NDJSONLines {
        do { return try NDJSONLines(path: path) } catch { throw GatehouseError(.unavailable, "The import file cannot be read.") }
    }

    private static func next(_ lines: NDJSONLines) throws -> NDJSONLines.Line? {
        do { return try lines.next() } catch { throw GatehouseError(.unavailable, "The import file cannot be read.") }
    }
}
