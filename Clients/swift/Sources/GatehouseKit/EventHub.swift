import Foundation

/// Hands ``AuthEvent``s to every open stream of ``GatehouseClient/authEvents()``.
final class EventHub: @unchecked Sendable {  // `continuations` is only touched under `lock`
    private let lock = NSLock()
    private var continuations: [UInt64: AsyncStream<AuthEvent>.Continuation] = [:]
    private var nextID: UInt64 = 0

    func stream() -> AsyncStream<AuthEvent> {
        AsyncStream(bufferingPolicy: .bufferingNewest(64)) { continuation in
            let id: UInt64 = lock.locked {
                nextID += 1
                continuations[nextID] = continuation
                return nextID
            }
            continuation.onTermination = { [weak self] _ in
                guard let self else { return }
                self.lock.locked { _ = self.continuations.removeValue(forKey: id) }
            }
        }
    }

    func send(_ event: AuthEvent) {
        let all = lock.locked { Array(continuations.values) }
        for continuation in all { continuation.yield(event) }
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
