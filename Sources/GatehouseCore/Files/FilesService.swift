import GatehouseCrypto

/// An upload as the HTTP layer hands it over: spooled to a local file while it streamed in, with
/// its size and SHA-256 computed on the way. The name is the client's, unsanitised.
public struct IncomingFile: Sendable {
    public var path: String
    public var size: Int64
    public var sha256: [UInt8]
    public var name: String?

    public init(path: String, size: Int64, sha256: [UInt8], name: String?) {
        self.path = path
        self.size = size
        self.sha256 = sha256
        self.name = name
    }
}

/// The photo part of a profile change (``FilesService/photoChange(app:user:session:fileID:origin:)``),
/// which `AccountService.updateProfile` applies in its unit of work.
public struct PhotoChange: Sendable {
    /// In the unit of work, the user's row locked: the new photo URL, and the blobs given up.
    let apply: @Sendable (_ tx: any AppScopedStore, _ user: UserID, _ now: Int64) throws -> (photoURL: String?, removed: [BlobKey])
    /// After the commit: removes the blobs given up.
    let committed: @Sendable (_ removed: [BlobKey]) -> Void
    /// When the change is not committed (refused, or its unit of work failed): removes the new
    /// photo's blob, written before the unit of work, unless its row committed after all.
    let abandoned: @Sendable () -> Void
}

/// Users' files and profile photos (API.md, "Files"; `POST`/`DELETE /v1/me/photo`, `PATCH /v1/me`
/// `photo_file_id`). Content types come from the bytes (``ContentSniffer``); contents live in a
/// ``BlobStore``, written before the row commits and removed when the commit fails; a removed
/// row's blob goes after its commit (``BlobDeletion``). Another user's or app's file is 404,
/// never 403. With the app's `require_verified_email`, every call but ``photoChange(app:user:session:fileID:origin:)`` and
/// ``publicContent`` is 403 `auth/email-not-verified` until the user's email is verified.
public final class FilesService: Sendable {
    private let store: any Store
    private let blobs: any BlobStore
    private let clock: any Clock
    private let publicURL: String
    /// Runs the service's units of work and applies what follows their commit (the outbox woken for the blobs they queue).
    private let units: UnitOfWork
    private let log: any LogSink
    private let photos: PhotoProcessor
    private let limiter: RateLimiter

    /// Characters of the SHA-256 (hex) in a public URL: a new content is a new file and a new URL,
    /// and a URL guessed from a file id alone finds nothing.
    public static let urlVersionLength = 16

    public init(
        store: any Store, blobs: any BlobStore, clock: any Clock, publicURL: String, units: UnitOfWork,
        log: any LogSink = DiscardingLog(), photos: PhotoProcessor = .shared
    ) {
        self.store = store
        self.blobs = blobs
        self.clock = clock
        self.publicURL = publicURL
        self.units = units
        self.log = log
        self.photos = photos
        self.limiter = RateLimiter(clock: clock)
    }

    /// A place in a user's file list.
    public typealias Position = KeysetPosition<FileID>

    /// The stable public URL of a public file (photos included):
    /// `<GATEHOUSE_PUBLIC_URL>/v1/apps/<app_id>/files/<file_id>/<first 16 hex digits of its SHA-256>`;
    /// nil for a private file.
    public func url(app: AppID, _ file: StoredFile) -> String? {
        guard file.visibility == .public else { return nil }
        return "\(publicURL)/v1/apps/\(app.rawValue)/files/\(file.id.rawValue)/\(file.sha256.prefix(Self.urlVersionLength))"
    }

    // MARK: - Files

    /// `POST /v1/files`: stores the file with its sniffed type. Over the app's
    /// `rate_limits.uploads_per_hour_per_user` → 429; empty → 400 `request/validation-failed`
    /// (field `file`); over the app's `files.max_bytes` → 413; `public` and not one of
    /// `files.public_types` → 415 `files/unsupported-type`; over `files.max_files_per_user` or
    /// `files.max_bytes_per_user` → 403 `files/quota-exceeded`.
    public func upload(app: AppContext, user: UserID, session: SessionID?, file incoming: IncomingFile, visibility: FileVisibility, origin: RequestOrigin) throws -> StoredFile {
        try requireVerifiedEmail(app: app, user: user)
        let contentType = try check(app: app, incoming, field: "file")
        if visibility == .public, !app.settings.files.publicTypes.contains(contentType) {
            throw GatehouseError(
                .unsupportedFileType, "A public file must be one of: \(app.settings.files.publicTypes.joined(separator: ", ")) (judged by its content).")
        }
        // Checked again in the unit of work; here it spares writing a blob that cannot be kept.
        try Self.requireQuota(store.app(app.id), app: app, user: user, adding: incoming.size, replacingPhoto: false)
        let file = try newFile(app: app, user: user, incoming, contentType: contentType, visibility: visibility, purpose: .file)
        return try storing(file, of: app, write: { try blobs.put(file.blobKey, contentsOf: incoming.path) }) { tx, now in
            guard try tx.users.lockUser(user) != nil else { throw Self.accountGone }
            try Self.requireQuota(tx, app: app, user: user, adding: file.size, replacingPhoto: false)
            try tx.files.insert(file)
            try tx.auditLog.record(uploadedEvent(file, session: session, origin: origin, now: now))
            return (file, [])
        }
    }

    /// `GET /v1/files`: a page of the user's files (photos uploaded as photos are the profile's,
    /// not listed), newest first, and where the next page starts.
    public func list(app: AppContext, user: UserID, after: Position?, limit: Int) throws -> (files: [StoredFile], next: Position?) {
        try requireVerifiedEmail(app: app, user: user)
        let limit = min(max(limit, 1), 100)
        let found = try store.app(app.id).files.files(of: user, after: after.map { ($0.createdAt, $0.id) }, limit: limit + 1)
        return Position.page(found, limit: limit) { Position(createdAt: $0.createdAt, id: $0.id) }
    }

    /// `GET /v1/files/{id}`: the user's own file; any other id is 404.
    public func file(app: AppContext, user: UserID, id rawID: String) throws -> StoredFile {
        try requireVerifiedEmail(app: app, user: user)
        guard let id = FileID(parsing: rawID), let file = try store.app(app.id).files.file(id, of: user) else { throw Self.notFound }
        return file
    }

    /// `GET /v1/files/{id}/content`: the user's own file and a reader of its bytes (or of `range`);
    /// the caller closes the reader.
    public func content(app: AppContext, user: UserID, id rawID: String, range: Range<Int64>? = nil) throws -> (StoredFile, any BlobReader) {
        let file = try file(app: app, user: user, id: rawID)
        return (file, try open(file, range: range))
    }

    /// Public content (`GET /v1/apps/{app_id}/files/{id}/{version}`, no app key, no sign-in): a
    /// public file of the app whose SHA-256 starts with `version`; anything else is 404.
    public func publicContent(app: AppID, id rawID: String, version: String, range: Range<Int64>? = nil) throws -> (StoredFile, any BlobReader) {
        let file = try publicFile(app: app, id: rawID, version: version)
        return (file, try open(file, range: range))
    }

    /// The public file behind a public URL (no app key, no sign-in); anything else is 404.
    public func publicFile(app: AppID, id rawID: String, version: String) throws -> StoredFile {
        guard let id = FileID(parsing: rawID), let file = try store.app(app).files.publicFile(id),
            version.count == Self.urlVersionLength, file.sha256.hasPrefix(version)
        else { throw Self.notFound }
        return file
    }

    /// `DELETE /v1/files/{id}`: the row, and the user's photo when the file was it, in one unit of
    /// work; the blob after the commit.
    public func delete(app: AppContext, user: UserID, session: SessionID?, id rawID: String, origin: RequestOrigin) throws {
        try requireVerifiedEmail(app: app, user: user)
        guard let id = FileID(parsing: rawID) else { throw Self.notFound }
        let now = clock.nowMillis()
        let key = try units.run(store.app(app.id)) { tx -> BlobKey in
            guard let account = try tx.users.lockUser(user) else { throw Self.accountGone }
            guard let file = try tx.files.delete(id, of: user) else { throw Self.notFound }
            if let photo = account.photoURL, Self.photo(photo, isFile: id) {
                _ = try tx.users.updateProfile(user, firstName: account.firstName, lastName: account.lastName, photoURL: nil, now: now)
                try tx.auditLog.record(Event(
                    type: .userUpdated, userID: user, sessionID: session, ip: origin.ip, userAgent: origin.userAgent, data: ["fields": ["photo_url"]],
                    createdAt: now))
            }
            _ = try tx.outbox.enqueue(BlobDeletion.item(app: app.id, key: file.blobKey), now: now)
            try tx.auditLog.record(Event(
                type: .fileDeleted, userID: user, sessionID: session, ip: origin.ip, userAgent: origin.userAgent, data: ["id": .string(id.rawValue)],
                createdAt: now))
            return file.blobKey
        }
        removeBlobs([key])
    }

    // MARK: - The profile photo

    /// `POST /v1/me/photo`: the upload must be one of the app's `files.photo_types` by its bytes
    /// (else 415 `files/unsupported-type`). It is decoded and encoded anew (``PhotoProcessor``:
    /// at most 40 megapixels, else 415; no metadata; the longest side at most 1024 px; a GIF
    /// becomes a PNG) and what that gave becomes a public photo-purpose file, the user's
    /// `photo_url` its URL, and the previous uploaded photo is deleted, all in one unit of work.
    /// Counted and capped as ``upload(app:user:session:file:visibility:origin:)`` is (the photo
    /// it replaces is not counted against the quota).
    public func uploadPhoto(app: AppContext, user: UserID, session: SessionID?, file incoming: IncomingFile, origin: RequestOrigin) throws -> (User, [Identity]) {
        try requireVerifiedEmail(app: app, user: user)
        let contentType = try check(app: app, incoming, field: "photo")
        guard app.settings.files.photoTypes.contains(contentType) else { throw Self.unsupportedPhoto(app) }
        // Checked again in the unit of work with the photo's final size; here it spares decoding.
        try Self.requireQuota(store.app(app.id), app: app, user: user, adding: 0, replacingPhoto: true)
        let photo = try photos.process(path: incoming.path)
        let processed = IncomingFile(path: incoming.path, size: Int64(photo.bytes.count), sha256: Digest.sha256(photo.bytes), name: incoming.name)
        let file = try newFile(app: app, user: user, processed, contentType: photo.contentType, visibility: .public, purpose: .photo)
        return try storing(file, of: app, write: { try blobs.put(file.blobKey, from: BytesBlobReader(photo.bytes)) }) { tx, now in
            guard let account = try tx.users.lockUser(user) else { throw Self.accountGone }
            try Self.requireQuota(tx, app: app, user: user, adding: file.size, replacingPhoto: true)
            try tx.files.insert(file)
            try tx.auditLog.record(uploadedEvent(file, session: session, origin: origin, now: now))
            let removed = try Self.givingUpPhotos(tx, of: user, except: file.id, now: now)
            return try setPhotoURL(tx, account, url(app: tx.appID, file), removed: removed, session: session, origin: origin, now: now)
        }
    }

    /// `PATCH /v1/me` `photo_file_id`, applied by `AccountService.updateProfile` in its unit of
    /// work: one of the user's own files (else 404) whose sniffed type is one of the app's
    /// `files.photo_types` (else 415 `files/unsupported-type`) is read, decoded and encoded anew
    /// as an upload to `/v1/me/photo` is (``PhotoProcessor``, before the unit of work: 415 when it
    /// cannot be decoded or is over 40 megapixels; counted and capped as such an upload), and
    /// what that gave becomes a new public photo-purpose file, the user's `photo_url` its URL; the
    /// chosen file itself stays as it was (a private file stays private). null removes the photo.
    /// Either way an uploaded photo given up is deleted. Not gated by `require_verified_email`:
    /// choosing needs a file, which needed the verified email.
    public func photoChange(app: AppContext, user: UserID, session: SessionID?, fileID rawID: String?, origin: RequestOrigin) throws -> PhotoChange {
        let committed: @Sendable ([BlobKey]) -> Void = { [self] in removeBlobs($0) }
        guard let rawID else {
            return PhotoChange(
                apply: { tx, user, now in (nil, try Self.givingUpPhotos(tx, of: user, except: nil, now: now)) }, committed: committed, abandoned: {})
        }
        guard let id = FileID(parsing: rawID), let chosen = try store.app(app.id).files.file(id, of: user) else { throw Self.notFound }
        guard app.settings.files.photoTypes.contains(chosen.contentType) else { throw Self.unsupportedPhoto(app) }
        try countUpload(app: app, user: user)
        // Checked again in the unit of work with the photo's final size; here it spares decoding.
        try Self.requireQuota(store.app(app.id), app: app, user: user, adding: 0, replacingPhoto: true)
        let photo = try photos.process(reading: { [self] in
            // Deleted since it was looked up (its row, then its blob): as if it had never been.
            guard let reader = try blobs.open(chosen.blobKey, range: nil) else { throw Self.notFound }
            defer { reader.close() }
            return try reader.readAll()
        })
        let processed = IncomingFile(path: "", size: Int64(photo.bytes.count), sha256: Digest.sha256(photo.bytes), name: chosen.name)
        let file = try newFile(app: app, user: user, processed, contentType: photo.contentType, visibility: .public, purpose: .photo)
        let reservation = try reserve(file, of: app)
        do { try blobs.put(file.blobKey, from: BytesBlobReader(photo.bytes)) } catch {
            discardUncommitted(file, of: app, reservation)
            throw error
        }
        return PhotoChange(
            apply: { [self] tx, user, now in
                guard try tx.outbox.withdraw(idempotencyKey: reservation.idempotencyKey) else { throw BlobStoreError("the upload outlived its reservation") }
                try Self.requireQuota(tx, app: app, user: user, adding: file.size, replacingPhoto: true)
                try tx.files.insert(file)
                try tx.auditLog.record(uploadedEvent(file, session: session, origin: origin, now: now))
                return (url(app: tx.appID, file), try Self.givingUpPhotos(tx, of: user, except: file.id, now: now))
            }, committed: committed, abandoned: { [self] in discardUncommitted(file, of: app, reservation) })
    }

    /// `DELETE /v1/me/photo`: no photo; an uploaded photo is deleted (a file chosen as the photo stays).
    public func removePhoto(app: AppContext, user: UserID, session: SessionID?, origin: RequestOrigin) throws -> (User, [Identity]) {
        try requireVerifiedEmail(app: app, user: user)
        let now = clock.nowMillis()
        let (result, removed) = try units.run(store.app(app.id)) { tx -> ((User, [Identity]), [BlobKey]) in
            guard let account = try tx.users.lockUser(user) else { throw Self.accountGone }
            return try setPhotoURL(tx, account, nil, removed: try Self.givingUpPhotos(tx, of: user, except: nil, now: now), session: session, origin: origin, now: now)
        }
        removeBlobs(removed)
        return result
    }

    // MARK: -

    static let notFound = GatehouseError(.notFound, "No such file of yours.")
    static let accountGone = AccountService.accountGone

    /// Counts an upload against the app's `rate_limits.uploads_per_hour_per_user` before its body
    /// is read (in the database, so every node shares it); 429 with `Retry-After` past it. Every
    /// upload started counts, whatever becomes of it (too large, cut off, malformed, refused),
    /// so nobody streams bodies into the spool past the cap.
    public func countUpload(app: AppContext, user: UserID) throws {
        try limiter.hit(
            store.app(app.id), bucket: "uploads", subject: user.rawValue, limit: app.settings.rateLimits.uploadsPerHourPerUser, windowSeconds: 3600)
    }

    /// 403 `files/quota-exceeded` when one more file of `size` bytes would take the user past the
    /// app's `files.max_files_per_user` or `files.max_bytes_per_user`. Run in the unit of work
    /// that inserts the file, the user's row locked, so concurrent uploads of one user (on any
    /// node) are counted one after the other (and before the upload is stored or decoded, as an
    /// early refusal). `replacingPhoto`: the uploaded photo the new one replaces is not counted.
    private static func requireQuota(_ tx: any AppScopedStore, app: AppContext, user: UserID, adding size: Int64, replacingPhoto: Bool) throws {
        let usage = try tx.files.usage(of: user, excludingPhotos: replacingPhoto)
        let caps = app.settings.files
        guard usage.count < caps.maxFilesPerUser else {
            throw GatehouseError(.quotaExceeded, "You may keep at most \(caps.maxFilesPerUser) files; delete some first.")
        }
        guard usage.bytes + size <= caps.maxBytesPerUser else {
            throw GatehouseError(.quotaExceeded, "Your files may take at most \(caps.maxBytesPerUser) bytes in all; delete some first.")
        }
    }

    static func unsupportedPhoto(_ app: AppContext) -> GatehouseError {
        GatehouseError(.unsupportedFileType, "A photo must be one of: \(app.settings.files.photoTypes.joined(separator: ", ")) (judged by its content).")
    }

    /// Whether a stored photo URL is that of the file `id` (whatever public URL it was built on).
    static func photo(_ url: String, isFile id: FileID) -> Bool {
        url.contains("/files/\(id.rawValue)/")
    }

    /// 403 `auth/email-not-verified` when the app requires a verified email and the user's is not:
    /// what Files and `/v1/me/photo` answer (checked again by each operation).
    public func requireVerifiedEmail(app: AppContext, user: UserID) throws {
        guard app.settings.requireVerifiedEmail else { return }
        guard let account = try store.app(app.id).users.user(user) else { throw Self.accountGone }
        guard account.emailVerified else {
            throw GatehouseError(.emailNotVerified, "Verify your email address (POST /v1/auth/email/verification/send) before using files.")
        }
    }

    /// Empty and oversize uploads refused; the sniffed type.
    private func check(app: AppContext, _ incoming: IncomingFile, field: String) throws -> String {
        guard incoming.size > 0 else { throw GatehouseError.validation(field, "The file is empty.") }
        guard incoming.size <= app.settings.files.maxBytes else {
            throw GatehouseError(.payloadTooLarge, "Files of this app are at most \(app.settings.files.maxBytes) bytes.")
        }
        guard incoming.sha256.count == 32 else { throw BlobStoreError("an upload without its SHA-256") }
        return try ContentSniffer.sniff(path: incoming.path)
    }

    private func newFile(
        app: AppContext, user: UserID, _ incoming: IncomingFile, contentType: String, visibility: FileVisibility, purpose: FilePurpose
    ) throws -> StoredFile {
        let id = FileID.generate()
        return StoredFile(
            id: id, userID: user, name: FileName.sanitise(incoming.name ?? (purpose == .photo ? "photo" : nil)), contentType: contentType,
            size: incoming.size, sha256: Digest.hex(incoming.sha256), visibility: visibility, purpose: purpose, createdAt: clock.nowMillis(),
            blobKey: StoredFile.blobKey(app: app.id, file: id))
    }

    /// Reserves the blob (``BlobDeletion``), writes it (`write`), then runs the unit of work that
    /// records it and withdraws the reservation; the blob is removed when the unit fails. After
    /// the commit, removes the blobs the unit gave up.
    private func storing<T>(
        _ file: StoredFile, of app: AppContext, write: () throws -> Void, _ body: (any AppScopedStore, Int64) throws -> (T, [BlobKey])
    ) throws -> T {
        let reservation = try reserve(file, of: app)
        try write()
        let now = clock.nowMillis()
        let result: T
        let removed: [BlobKey]
        do {
            (result, removed) = try units.run(store.app(app.id)) { tx in
                // Gone only if this upload took longer than `orphanAfterMillis`: the blob may be too.
                guard try tx.outbox.withdraw(idempotencyKey: reservation.idempotencyKey) else { throw BlobStoreError("the upload outlived its reservation") }
                return try body(tx, now)
            }
        } catch {
            discardUncommitted(file, of: app, reservation)
            throw error
        }
        removeBlobs(removed)
        return result
    }

    /// Reserves the blob of a new file (``BlobDeletion``): removed later unless the file's row
    /// commits and withdraws the reservation.
    private func reserve(_ file: StoredFile, of app: AppContext) throws -> NewOutboxItem {
        let reservation = BlobDeletion.reservation(app: app.id, key: file.blobKey, now: clock.nowMillis())
        guard try store.app(app.id).outbox.enqueue(reservation, now: clock.nowMillis()) else { throw BlobStoreError("the blob \(file.blobKey) is reserved already") }
        return reservation
    }

    /// After a unit of work that was to record `file` failed: removes its blob and reservation
    /// unless the row is there after all.
    private func discardUncommitted(_ file: StoredFile, of app: AppContext, _ reservation: NewOutboxItem) {
        // A COMMIT whose answer was lost may have committed: the row decides. When it cannot be
        // read, or the blob cannot be removed, the reservation stays and removes the blob later
        // (it was withdrawn with the row if the row committed).
        let row: Result<StoredFile?, any Error> = Result { try store.app(app.id).files.file(file.id, of: file.userID) }
        guard case .success(nil) = row else { return }
        do {
            try blobs.delete(file.blobKey)
            _ = try? store.app(app.id).outbox.withdraw(idempotencyKey: reservation.idempotencyKey)
        } catch {
            log.warning("the blob of an upload that did not commit is left to its reservation", ["key": .string(file.blobKey.rawValue), "error": .string("\(error)")])
        }
    }

    /// Deletes the user's uploaded photos but `except`, their blobs queued for removal; their keys.
    private static func givingUpPhotos(_ tx: any AppScopedStore, of user: UserID, except: FileID?, now: Int64) throws -> [BlobKey] {
        let removed = try tx.files.deletePhotos(of: user, except: except)
        for key in removed { _ = try tx.outbox.enqueue(BlobDeletion.item(app: tx.appID, key: key), now: now) }
        return removed
    }

    /// Sets the locked user's photo URL (`user.updated` when it changes); the user and `removed`.
    private func setPhotoURL(
        _ tx: any AppScopedStore, _ account: User, _ photoURL: String?, removed: [BlobKey], session: SessionID?, origin: RequestOrigin, now: Int64
    ) throws -> ((User, [Identity]), [BlobKey]) {
        guard account.photoURL != photoURL else { return ((account, try tx.identities.all(of: account.id)), removed) }
        guard let updated = try tx.users.updateProfile(account.id, firstName: account.firstName, lastName: account.lastName, photoURL: photoURL, now: now) else {
            throw Self.accountGone
        }
        try tx.auditLog.record(Event(
            type: .userUpdated, userID: account.id, sessionID: session, ip: origin.ip, userAgent: origin.userAgent, data: ["fields": ["photo_url"]],
            createdAt: now))
        return ((updated, try tx.identities.all(of: account.id)), removed)
    }

    private func uploadedEvent(_ file: StoredFile, session: SessionID?, origin: RequestOrigin, now: Int64) -> Event {
        Event(
            type: .fileUploaded, userID: file.userID, sessionID: session, ip: origin.ip, userAgent: origin.userAgent,
            data: [
                "id": .string(file.id.rawValue), "size": .int(file.size), "content_type": .string(file.contentType),
                "visibility": .string(file.visibility.rawValue), "purpose": .string(file.purpose.rawValue),
            ], createdAt: now)
    }

    /// A reader of a file already found (``file(app:user:id:)``, ``publicFile(app:id:version:)``)
    /// or of `range` of it; the caller closes it.
    public func open(_ file: StoredFile, range: Range<Int64>?) throws -> any BlobReader {
        guard let reader = try blobs.open(file.blobKey, range: range) else { throw BlobStoreError("the blob of \(file.id) is missing") }
        return reader
    }

    /// Removes blobs whose rows are gone (committed); a failure is left to their outbox items (the
    /// unit of work that queued them has woken the outbox).
    private func removeBlobs(_ keys: [BlobKey]) {
        guard !keys.isEmpty else { return }
        for key in keys {
            do { try blobs.delete(key) } catch {
                log.warning("a blob could not be removed now; the outbox will retry", ["key": .string(key.rawValue), "error": .string("\(error)")])
            }
        }
    }
}

/// Bytes in memory read as a blob source (a re-encoded photo, at most a few MiB).
final class BytesBlobReader: BlobReader {
    private var bytes: ArraySlice<UInt8>
    let size: Int64

    init(_ bytes: [UInt8]) {
        self.bytes = bytes[...]
        size = Int64(bytes.count)
    }

    func read(upTo maxBytes: Int) throws -> [UInt8] {
        let piece = bytes.prefix(maxBytes)
        bytes = bytes.dropFirst(piece.count)
        return Array(piece)
    }

    func close() { bytes = [] }
}
