import Foundation

/// The background refresh: one task that sleeps until the access token is due (the refresh
/// margin before it expires), refreshes, and is set anew by every ``AuthEvent``. Paused while the
/// app is in the background, stopped by ``GatehouseClient/stopAutoRefresh()``, `close()` and the
/// client's deinit.
final class AutoRefresh: @unchecked Sendable {  // the state is only touched under `lock`
    typealias Sleep = @Sendable (TimeInterval) async throws -> Void

    private let lock = NSLock()
    private weak var manager: SessionManager?
    private let now: @Sendable () -> Date
    private let sleep: Sleep
    private var enabled = false
    private var paused = false
    private var task: Task<Void, Never>?
    private var generation: UInt64 = 0
    private var retryDelay: TimeInterval = 0
    private var observers: [any NSObjectProtocol] = []

    init(manager: SessionManager, now: @escaping @Sendable () -> Date, sleep: @escaping Sleep) {
        self.manager = manager
        self.now = now
        self.sleep = sleep
    }

    /// Pauses on `background` and resumes (refreshing at once when due) on `foreground`.
    func follow(background: Notification.Name, foreground: Notification.Name, center: NotificationCenter) {
        let paused = center.addObserver(forName: background, object: nil, queue: nil) { [weak self] _ in self?.pause() }
        let resumed = center.addObserver(forName: foreground, object: nil, queue: nil) { [weak self] _ in self?.resume() }
        lock.locked { observers += [paused, resumed] }
    }

    var isScheduled: Bool { lock.locked { task != nil } }

    func start() {
        lock.locked { enabled = true }
        reschedule()
    }

    func stop() {
        lock.locked {
            enabled = false
            cancelLocked()
        }
    }

    func pause() {
        lock.locked {
            paused = true
            cancelLocked()
        }
    }

    func resume() {
        lock.locked { paused = false }
        reschedule()
    }

    private func cancelLocked() {
        task?.cancel()
        task = nil
        generation += 1
    }

    /// Sets the task for the session as it is now (none when signed out, stopped or paused).
    func reschedule() {
        lock.locked {
            cancelLocked()
            guard enabled, !paused else { return }
            let mine = generation
            task = Task { [weak self] in await self?.run(mine) }
        }
    }

    private func run(_ mine: UInt64) async {
        guard let manager else { return }
        guard let due = await manager.refreshDue() else { return finished(mine) }
        let wait = max(due.timeIntervalSince(now()), lock.locked { retryDelay }, 0)
        do {
            try await sleep(wait)
        } catch {
            return  // cancelled: a newer task or a stop took over
        }
        guard !Task.isCancelled, lock.locked({ generation == mine }) else { return }
        do {
            // Its event (tokenRefreshed, or signedOut when the server ended the session) sets the next task.
            try await manager.refreshIfDue()
            lock.locked { retryDelay = 0 }
            if lock.locked({ generation == mine }) { reschedule() }  // nothing was due: look again
        } catch {
            if await manager.refreshDue() == nil { return finished(mine) }  // the session ended
            // Offline or the server busy: again later, doubling up to a minute.
            lock.locked { retryDelay = min(max(retryDelay * 2, 1), 60) }
            if lock.locked({ generation == mine }) { reschedule() }
        }
    }

    private func finished(_ mine: UInt64) {
        lock.locked { if generation == mine { task = nil } }
    }

    deinit {
        task?.cancel()
        for observer in observers { NotificationCenter.default.removeObserver(observer) }
    }
}
