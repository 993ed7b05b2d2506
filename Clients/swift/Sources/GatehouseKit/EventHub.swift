import Foundation

/// Hands ``AuthEvent``s to every open stream of ``GatehouseClient/authEvents()``, and keeps the
/// signed-in user those events describe (``GatehouseClient/currentUser``). One lock covers both, so
/// a new stream's ``AuthEvent/initialSession(_:)`` and the events after it never disagree.
final class EventHub: @unchecked Sendable {  // `continuations` and `user` are only touched under `lock`
    private let lock = NSLock()
    private var continuations: [UInt64: AsyncStream<AuthEvent>.Continuation] = [:]
    private var nextID: UInt64 = 0
    private var user: User?
    private var observer: (@Sendable (AuthEvent) -> Void)?

    init(user: User?) { self.user = user }

    /// Called after each event is sent (the background refresh sets its next turn).
    func observe(_ observer: @escaping @Sendable (AuthEvent) -> Void) { lock.locked { self.observer = observer } }

    /// The user of the stored session, as last seen.
    var currentUser: User? { lock.locked { user } }

    /// A stream that starts with `.initialSession(currentUser)`.
    func stream() -> AsyncStream<AuthEvent> {
        AsyncStream(bufferingPolicy: .bufferingNewest(64)) { continuation in
            let id: UInt64 = lock.locked {
                nextID += 1
                continuations[nextID] = continuation
                continuation.yield(.initialSession(user))
                return nextID
            }
            continuation.onTermination = { [weak self] _ in
                guard let self else { return }
                self.lock.locked { _ = self.continuations.removeValue(forKey: id) }
            }
        }
    }

    /// Keeps `user` as the current one without telling anyone (a read: ``GatehouseClient/getUser()``).
    func setQuietly(_ user: User?) { lock.locked { self.user = user } }

    /// Reports `event`, after applying what it says about the user.
    func send(_ event: AuthEvent) {
        lock.locked {
            switch event {
            case .signedIn(let user), .userUpdated(let user): self.user = user
            case .signedOut: self.user = nil
            case .initialSession, .tokenRefreshed: break
            }
            // Yielded under the lock: a stream opened meanwhile sees its initial state, then this.
            for continuation in continuations.values { continuation.yield(event) }
        }
        lock.locked { observer }?(event)
    }
}

extension NSLock {
    /// `withLock`, spelled out: `NSLocking.withLock` is not in every SDK this package supports.
    func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock()
        defer { unlock() }
        return try body()
    }
}
