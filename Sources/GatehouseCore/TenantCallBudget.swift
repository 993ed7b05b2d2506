import Synchronization

/// Calls to servers tenants chose (an app's own `oidc` issuer, its SMTP server's test message)
/// running at once on one node, whatever their apps. They run on the threads that also call Apple,
/// Google and the fixed provider kinds, and a tenant's server may hang until the call's time limit:
/// bounding them together leaves those threads to everyone else however many tenants' servers hang.
/// Each user also bounds its own calls per app.
public final class TenantCallBudget: Sendable {
    public let limit: Int
    private let running = Mutex(0)

    public init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Takes one call's place if fewer than ``limit`` run; false otherwise (refuse the call at once).
    public func acquire() -> Bool {
        running.withLock { count in
            guard count < limit else { return false }
            count += 1
            return true
        }
    }

    /// Gives back a place ``acquire()`` took.
    public func release() {
        running.withLock { $0 = max(0, $0 - 1) }
    }
}
