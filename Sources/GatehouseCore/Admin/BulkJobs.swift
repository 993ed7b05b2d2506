import Synchronization

/// The node's bulk jobs — imports and exports of users — which hold a network offload thread for
/// as long as they read or write a whole user table: one of each kind per app at a time, and at
/// most ``limit`` of any kind across every app, so that tenants moving users in or out leave the
/// other offload threads to everyone's provider sign-ins and uploads.
public final class BulkJobs: Sendable {
    public enum Kind: String, Sendable {
        case userImport = "import"
        case userExport = "export"
    }

    /// Bulk jobs of every app at once on this node.
    public let limit: Int
    private let state = Mutex<(running: Set<Key>, count: Int)>(([], 0))

    private struct Key: Hashable {
        let kind: Kind
        let app: AppID
    }

    /// `offloadThreads`: the network offload pool the jobs run on (at least 4); a quarter of it,
    /// and at least two, may be bulk jobs.
    public init(offloadThreads: Int) {
        limit = max(2, offloadThreads / 4)
    }

    /// A job's slot, given back by ``end()`` (or when the slot goes).
    public final class Slot: Sendable {
        private let release: Mutex<(@Sendable () -> Void)?>

        fileprivate init(_ release: @escaping @Sendable () -> Void) { self.release = Mutex(release) }

        /// Gives the slot back; later calls do nothing.
        public func end() {
            let release = self.release.withLock { $0.take() }
            release?()
        }

        deinit { end() }
    }

    /// Throws the 429 ``start(_:app:)`` would throw now, taking nothing: to refuse a request before
    /// its body is read. (Only ``start(_:app:)`` decides: the slot may be gone by then.)
    public func check(_ kind: Kind, app: AppID) throws(GatehouseError) {
        if let refusal = state.withLock({ Self.refusal(kind, $0.running.contains(Key(kind: kind, app: app)), $0.count >= limit) }) {
            throw GatehouseError(.tooManyRequests, refusal, retryAfter: 10)
        }
    }

    private static func refusal(_ kind: Kind, _ appRunsOne: Bool, _ full: Bool) -> String? {
        if appRunsOne { return "Another \(kind.rawValue) of this app's users is under way; retry once it has ended." }
        if full { return "The server is busy with other apps' imports and exports; retry shortly." }
        return nil
    }

    /// Takes a slot for `kind` in `app`: 429 `auth/too-many-requests` while the app runs one of
    /// that kind here, or while ``limit`` jobs of any app run.
    public func start(_ kind: Kind, app: AppID) throws(GatehouseError) -> Slot {
        let key = Key(kind: kind, app: app)
        let refusal: String? = state.withLock { state in
            if let refusal = Self.refusal(kind, state.running.contains(key), state.count >= limit) { return refusal }
            state.running.insert(key)
            state.count += 1
            return nil
        }
        if let refusal { throw GatehouseError(.tooManyRequests, refusal, retryAfter: 10) }
        return Slot { [self] in
            state.withLock { state in
                if state.running.remove(key) != nil { state.count -= 1 }
            }
        }
    }
}
