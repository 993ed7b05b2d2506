#if canImport(Glibc)
import Glibc
#endif

/// State that many threads read at once and few write: the caches on the request path (apps,
/// verified tokens, accounts, ended sessions).
///
/// Readers share the lock, so the hottest app, token or user does not serialise every worker on
/// one lock. (Swift's `Mutex` is a priority-inheriting futex on Linux: under contention each
/// waiter goes to sleep in the kernel; on `GET /v1/me` that was a third of the server's CPU.)
/// Writers are preferred, so that a steady stream of readers cannot keep a writer out forever.
public final class ReadWriteLock<State: Sendable>: @unchecked Sendable {
    @usableFromInline let lock: UnsafeMutablePointer<pthread_rwlock_t>
    @usableFromInline var state: State

    public init(_ state: State) {
        self.state = state
        lock = .allocate(capacity: 1)
        var attributes = pthread_rwlockattr_t()
        pthread_rwlockattr_init(&attributes)
        pthread_rwlockattr_setkind_np(&attributes, Int32(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP))
        let status = pthread_rwlock_init(lock, &attributes)
        pthread_rwlockattr_destroy(&attributes)
        precondition(status == 0, "pthread_rwlock_init failed: \(status)")
    }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    /// Runs `body` with shared access: other readers may run at the same time.
    @inlinable
    public func read<T>(_ body: (State) throws -> T) rethrows -> T {
        pthread_rwlock_rdlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body(state)
    }

    /// Runs `body` with exclusive access.
    @inlinable
    public func write<T>(_ body: (inout State) throws -> T) rethrows -> T {
        pthread_rwlock_wrlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body(&state)
    }
}
