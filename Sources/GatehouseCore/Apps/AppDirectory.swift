/// Resolves app keys and ids to `AppContext`s, cached per node. A cached entry is trusted for
/// `revalidateAfterMillis`; after that one cheap version query decides whether it is rebuilt.
/// Changes made through this node invalidate at once; other nodes see them within that interval.
///
/// The node's cache thread runs that query for the apps in use a fifth of the interval early
/// (``revalidateAhead(now:)``), so requests do not wait for it. A request runs it only when the
/// thread has not, and only one at a time: while it is under way (a database slow to answer), the
/// other requests go on with the entry for at most one more interval.
public final class AppDirectory: Sendable {
    private let store: any Store
    private let sealer: SecretSealer
    private let clock: any Clock
    private let revalidateAfterMillis: Int64
    /// The platform's ceilings, which stored settings above them are lowered to when read.
    private let caps: AppSettings.PlatformCaps
    private let state = ReadWriteLock(State())

    private struct State {
        var byID: [AppID: AppContext] = [:]
        /// The same contexts by app key: a request finds its app in one lookup.
        var byKey: [String: AppContext] = [:]
        /// App keys recently found unknown, so that a flood of bad keys does not become a flood of queries.
        var unknownKeys: [String: Int64] = [:]
    }

    public init(
        store: any Store, sealer: SecretSealer, clock: any Clock, caps: AppSettings.PlatformCaps,
        revalidateAfterMillis: Int64 = 5000
    ) {
        self.caps = caps
        self.store = store
        self.sealer = sealer
        self.clock = clock
        self.revalidateAfterMillis = revalidateAfterMillis
    }

    /// The enabled app using this public key, or nil (also for a disabled app: its key is refused
    /// like an unknown one, by this node once it has seen the change, see the type's comment).
    public func app(key: String) throws -> AppContext? {
        guard let context = try anyApp(key: key), !context.isDisabled else { return nil }
        return context
    }

    private func anyApp(key: String) throws -> AppContext? {
        let now = clock.nowMillis()
        let cached: AppContext?? = state.read { s in
            if let context = s.byKey[key] { return context }
            if let at = s.unknownKeys[key], now - at < revalidateAfterMillis { return .some(nil) }
            return nil
        }
        switch cached {
        case .some(.some(let context)): return try revalidated(context, now: now)
        case .some(.none): return nil
        case .none:
            guard let record = try store.apps.find(appKey: key) else {
                state.write { s in
                    if s.unknownKeys.count > 10_000 { s.unknownKeys.removeAll() }
                    s.unknownKeys[key] = now
                }
                return nil
            }
            return try remember(record, now: now)
        }
    }

    /// The app with this id, or nil; a disabled one too (``AppContext/isDisabled``): the outbox,
    /// the purge and the operator still reach it, a request of its own must check.
    public func app(id: AppID) throws -> AppContext? {
        let now = clock.nowMillis()
        if let context = state.read({ $0.byID[id] }) { return try revalidated(context, now: now) }
        guard let record = try store.apps.find(id: id) else { return nil }
        return try remember(record, now: now)
    }

    /// The app with this id as this node has it cached, however old, without asking the database
    /// (nil when it is not cached): for checks on a path that must not wait for a connection.
    public func cached(id: AppID) -> AppContext? { state.read { $0.byID[id] } }

    /// The app with this id as stored now: a cached entry is checked against the database's
    /// version at once, instead of after `revalidateAfterMillis`, and rebuilt only if it changed.
    public func current(id: AppID) throws -> AppContext? {
        let now = clock.nowMillis()
        if let context = state.read({ $0.byID[id] }) { return try revalidated(context, now: now, force: true) }
        guard let record = try store.apps.find(id: id) else { return nil }
        return try remember(record, now: now)
    }

    /// Forgets an app so that the next request reads it afresh.
    public func invalidate(_ id: AppID) {
        state.write { s in
            if let context = s.byID.removeValue(forKey: id) { s.byKey.removeValue(forKey: context.record.appKey) }
            s.unknownKeys.removeAll()
        }
    }

    /// The cache thread's turn: every app a request used since its last check, and due for one
    /// within a fifth of the interval, is checked now. A failure is left to the requests, which
    /// check for themselves once the interval has passed (and answer 503 if they cannot).
    public func revalidateAhead(now: Int64) {
        let ahead = revalidateAfterMillis - revalidateAfterMillis / 5
        let due = state.read { s in
            s.byID.values.filter { $0.usedSinceCheck.load(ordering: .relaxed) && now - $0.checkedAt >= ahead }
        }
        for context in due { _ = try? revalidated(context, now: now, force: true) }
    }

    private func revalidated(_ context: AppContext, now: Int64, force: Bool = false) throws -> AppContext? {
        let age = now - context.checkedAt
        let keysValid = now < context.keysExpireAt ?? .max
        if !force, age < revalidateAfterMillis, keysValid {
            // Loaded first: once set, the flag is only read, and the context's cache line stays shared.
            if !context.usedSinceCheck.load(ordering: .relaxed) { context.usedSinceCheck.store(true, ordering: .relaxed) }
            return context
        }
        // One query at a time per entry: a stampede of them on a database slow to answer stalled
        // every request of the app. An expired key allows no grace.
        let asking = context.revalidating.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged
        if !asking, !force, age < 2 * revalidateAfterMillis, keysValid { return context }
        defer { if asking { context.revalidating.store(false, ordering: .releasing) } }
        // Requests from now on count as use since this check.
        context.usedSinceCheck.store(false, ordering: .relaxed)
        guard let version = try store.apps.version(of: context.id) else {
            invalidate(context.id)
            return nil
        }
        // Unchanged, and no retired key has expired since it was built (expiry moves no version).
        if version == context.record.version, keysValid {
            context.confirmed(at: now)
            return context
        }
        guard let record = try store.apps.find(id: context.id) else { return nil }
        return try remember(record, now: now)
    }

    private func remember(_ record: AppRecord, now: Int64) throws -> AppContext {
        let settings: AppSettings
        do {
            settings = try AppSettings.decode(
                try JSON.parse(Array(record.settingsJSON.utf8)),
                source: .storage(unseal: { sealed, field in try self.sealer.open(sealed, app: record.id, field: field) }), caps: caps)
        } catch {
            // Stored settings were valid when written: failing now is the server's fault, not the client's.
            throw InternalError("stored settings of app \(record.id) cannot be read: \(error)")
        }
        let keys = try store.app(record.id).settings.signingKeys(now: now)
        let context = try AppContext(record: record, settings: settings, keys: keys, sealer: sealer, checkedAt: now)
        state.write { s in
            // A slower reader of an older version must not replace a newer entry.
            if let newer = s.byID[record.id], newer.record.version > record.version { return }
            if let old = s.byID[record.id], old.record.appKey != record.appKey { s.byKey.removeValue(forKey: old.record.appKey) }
            s.byID[record.id] = context
            s.byKey[record.appKey] = context
            s.unknownKeys.removeValue(forKey: record.appKey)
        }
        return context
    }
}
