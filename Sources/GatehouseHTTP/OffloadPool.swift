import Foundation

/// Threads of their own for requests whose handler waits long (password hashing), so that the
/// libmicrohttpd worker that read the request goes on serving its other connections while the
/// connection is suspended.
///
/// `threadCount` requests run at once; up to `queueLimit` more wait, in order, holding no
/// thread. Past that, `submit` refuses and the caller answers at once (503).
final class OffloadPool: @unchecked Sendable {
    // @unchecked: `queue`, `head`, `running` and `stopping` are only touched while holding
    // `condition`; jobs are Sendable.

    /// A request to answer: `run` on a pool thread, or `refuse` when the pool stops first.
    struct Job: Sendable {
        let run: @Sendable () -> Void
        let refuse: @Sendable () -> Void
    }

    private let queueLimit: Int
    private let condition = NSCondition()
    private var queue: [Job] = []
    private var head = 0
    private var running = 0
    private var stopping = false

    init(threadCount: Int, queueLimit: Int) {
        self.queueLimit = max(0, queueLimit)
        for index in 0..<max(1, threadCount) {
            let thread = Thread { [self] in work() }
            thread.name = "offload-\(index)"
            thread.start()
        }
    }

    /// Queues `job` unless the queue is full or the pool is stopping. `accepted` runs first,
    /// under the pool's lock, so that it happens before the job can start (it suspends the
    /// connection the job will resume).
    func submit(_ job: Job, accepted: () -> Void) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard !stopping, queue.count - head < queueLimit + idleThreads else { return false }
        accepted()
        queue.append(job)
        condition.signal()
        return true
    }

    /// Stops taking jobs, refuses the queued ones, and returns once the running ones are done.
    /// The threads then exit.
    func drain() {
        condition.lock()
        stopping = true
        let queued = queue[head...]
        queue = []
        head = 0
        condition.broadcast()
        condition.unlock()
        for job in queued { job.refuse() }
        condition.lock()
        while running > 0 { condition.wait() }
        condition.unlock()
    }

    private var threadCount = 0

    /// Threads waiting for a job (under the lock).
    private var idleThreads: Int { threadCount - running }

    private func work() {
        condition.lock()
        threadCount += 1
        while true {
            while head == queue.count, !stopping { condition.wait() }
            if head == queue.count {
                threadCount -= 1
                condition.unlock()
                return
            }
            let job = queue[head]
            head += 1
            if head == queue.count {
                queue.removeAll(keepingCapacity: true)
                head = 0
            }
            running += 1
            condition.unlock()
            job.run()
            condition.lock()
            running -= 1
            if stopping { condition.broadcast() }
        }
    }
}
