/// Removing blobs whose rows are gone, after the commit that removed them: an outbox item of kind
/// `blob_delete` per blob, queued in that commit's unit of work, so a node that dies after the
/// commit leaves the removal to any node. ``FilesService`` also removes the blob at once after its
/// own commits (the item then finds nothing to do); an account's erase (``FileEraser``) runs inside
/// a transaction it does not own, and leaves it to the outbox, which the deletion wakes.
///
/// A new blob is reserved the same way before it is written: a ``reservation(app:key:now:)``, due
/// ``orphanAfterMillis`` later, which the unit of work recording the blob's row withdraws. A node
/// that dies between the blob's write and that commit leaves no orphan: the reservation removes it.
public enum BlobDeletion {
    public static let kind = OutboxKind(rawValue: "blob_delete")
    /// How long a blob may wait for its row before its reservation removes it.
    public static let orphanAfterMillis: Int64 = 6 * 3600 * 1000

    /// Queued (committed) before `key`'s blob is written; withdrawn with the row's commit.
    public static func reservation(app: AppID, key: BlobKey, now: Int64) -> NewOutboxItem {
        var item = item(app: app, key: key)
        item.dueAt = now + orphanAfterMillis
        return item
    }

    /// The item that removes `key`'s blob.
    public static func item(app: AppID, key: BlobKey) -> NewOutboxItem {
        NewOutboxItem(
            appID: app, kind: kind, idempotencyKey: "blob_delete:" + key.rawValue,
            payload: JSON.object(["key": .string(key.rawValue)]).serializedString, sealed: false)
    }
}

/// Delivers `blob_delete` items: removes the blob (a missing one counts as removed).
public struct BlobDeletionHandler: OutboxHandler {
    public let kind = BlobDeletion.kind
    private let blobs: any BlobStore

    /// The blob store's host and port, for its breaker (nil: on this machine, nothing to pause).
    private let storeDestination: String?

    public init(blobs: any BlobStore, destination: String? = nil) {
        self.blobs = blobs
        self.storeDestination = destination
    }

    public func destination(of item: OutboxItem) -> String? { storeDestination }

    public func deliver(_ item: OutboxItem) -> OutboxDelivery {
        guard let payload = try? JSON.parse(Array(item.payload.utf8)), let raw = payload["key"]?.stringValue, let key = BlobKey(parsing: raw) else {
            return .dead(reason: "not a blob key")
        }
        do {
            try blobs.delete(key)
            return .delivered
        } catch {
            return .unreachable(reason: "blob store: \(error)")
        }
    }
}

/// The files' part of deleting an account (``AccountDataEraser``): in the erasing transaction,
/// every file row of the user goes and a `blob_delete` item is queued per blob.
public struct FileEraser: AccountDataEraser {
    public init() {}

    public func erase(_ tx: any AppScopedStore, user: UserID, now: Int64) throws {
        for key in try tx.files.deleteAll(of: user) {
            _ = try tx.outbox.enqueue(BlobDeletion.item(app: tx.appID, key: key), now: now)
        }
    }
}
