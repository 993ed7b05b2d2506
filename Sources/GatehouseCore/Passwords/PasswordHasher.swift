import Dispatch
import Foundation
import GatehouseCrypto
import Synchronization

/// argon2id on its own few threads: `permits` dedicated threads (about one per core) compute every
/// hash, so a flood of sign-ins queues here instead of starving refreshes and `/me` of CPU, and at
/// most `permits` of argon2's 19 MiB work areas exist at once. They are kept for the next hashes
/// and given back once none has run for ``memoryIdleRelease`` (``Argon2idMemory``, ADR 0020).
/// A caller blocks its thread while it waits (the
/// HTTP server runs password routes on offload threads for that, ADR 0004), so the queue is
/// bounded (`maxQueued`); beyond it calls are refused at once with 503 `server/busy` and
/// `Retry-After`.
public final class PasswordHasher: Sendable {
    public let parameters: Argon2id.Parameters
    private let queue = JobQueue()
    private let admitted = Atomic(0)
    private let maxAdmitted: Int
    /// Verified against when the email is unknown, so that both answers take the same time.
    private let dummyHash: String
    /// Opens the Firebase signer keys sealed in imported hashes; nil: such hashes match nothing.
    private let sealer: SecretSealer?
    private let threadCount: Int
    /// Signalled by each hash thread as it ends (``shutdown()``).
    private let ended = DispatchSemaphore(value: 0)
    private let stopped = Atomic(false)

    /// Jobs waiting for a hash thread.
    private final class JobQueue: Sendable {
        /// The jobs, and whether the queue is closed (``close(stops:)``).
        let jobs = Mutex<(queued: [Job], closed: Bool)>(([], false))
        let pending = DispatchSemaphore(value: 0)

        /// False, queuing nothing, once the queue is closed.
        func push(_ job: Job) -> Bool {
            guard jobs.withLock({ state in
                if state.closed { return false }
                state.queued.append(job)
                return true
            }) else { return false }
            pending.signal()
            return true
        }

        /// Queues `count` stop jobs after everything queued so far, and takes no more: checked and
        /// done under one lock, so no job can land behind the stops and wait forever.
        func close(stops count: Int) {
            jobs.withLock { state in
                state.closed = true
                state.queued += Array(repeating: Job.stop, count: count)
            }
            for _ in 0..<count { pending.signal() }
        }

        /// The next job; while none comes, `whenIdle` every `interval`.
        func next(idleEvery interval: DispatchTimeInterval, whenIdle: () -> Void) -> Job {
            while true {
                guard pending.wait(timeout: .now() + interval) == .success else {
                    whenIdle()
                    continue
                }
                if let job = jobs.withLock({ $0.queued.isEmpty ? nil : $0.queued.removeFirst() }) { return job }
            }
        }
    }

    /// One hash to compute. `@unchecked Sendable`: `result` is written by the worker before it
    /// signals `done`, and read by the caller only after waiting on `done`.
    private final class Job: @unchecked Sendable {
        /// Ends the thread that takes it.
        static let stop = Job { .success("") }
        let work: @Sendable () -> Result<String, any Error>
        var result: Result<String, any Error>?
        let done = DispatchSemaphore(value: 0)
        init(_ work: @escaping @Sendable () -> Result<String, any Error>) { self.work = work }
    }

    /// How long argon2id's work areas are kept after the last hash that used them.
    public static let memoryIdleRelease = Duration.seconds(10)

    /// `maxQueued`: callers that may wait for a hash thread (each blocks its thread while it
    /// waits); by default as many as there are hash threads.
    public init(parameters: Argon2id.Parameters, permits: Int, maxQueued: Int? = nil, sealer: SecretSealer? = nil) throws {
        self.parameters = parameters
        self.sealer = sealer
        let threads = max(1, permits)
        maxAdmitted = threads + max(1, maxQueued ?? threads)
        dummyHash = try Argon2id.hash(password: Array("gatehouse-dummy-password".utf8), parameters: parameters)
        threadCount = threads
        for index in 0..<threads {
            let thread = Thread { [queue, ended] in
                while true {
                    let job = queue.next(idleEvery: .seconds(5)) { Argon2idMemory.releaseIdle(after: Self.memoryIdleRelease) }
                    if job === Job.stop { break }
                    job.result = job.work()
                    job.done.signal()
                }
                ended.signal()
            }
            thread.name = "gatehouse-hash-\(index)"
            thread.start()
        }
    }

    /// Ends the hash threads once the hashes queued before it are done, and waits for them. Calls
    /// after it wait for nothing: they are refused 503 `server/busy`.
    public func shutdown() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        queue.close(stops: threadCount)
        for _ in 0..<threadCount { ended.wait() }
    }

    public func hash(_ password: String) throws -> String {
        let parameters = self.parameters
        return try run { Result { try Argon2id.hash(password: Array(password.utf8), parameters: parameters) } }
    }

    /// Checks a password against a stored hash, or against the dummy hash when there is none. A
    /// hash imported from another system (``ImportedPasswordHash/storedForm``) is checked with its
    /// own algorithm, on the same threads; one this server cannot read matches no password.
    /// `app`: whose row the hash is (a Firebase hash's signer key is sealed for it).
    public func verify(_ password: String, encoded: String?, app: AppID) throws -> Bool {
        let target = encoded ?? dummyHash
        if ImportedPasswordHash.isStoredForm(target) {
            guard let sealer, let imported = ImportedPasswordHash(storedForm: target, sealer: sealer, app: app) else { return false }
            return try run { .success(imported.verify(password) ? "1" : "0") } == "1"
        }
        let matches = try run { .success(Argon2id.verify(password: Array(password.utf8), encoded: target) ? "1" : "0") }
        return encoded != nil && matches == "1"
    }

    /// Hashes waiting for a hash thread now (those being computed aside), for the metrics.
    public var queueDepth: Int { queue.jobs.withLock { $0.queued.count } }

    /// True for a hash with other parameters than ``parameters`` and for every imported hash.
    public func needsRehash(_ encoded: String) -> Bool { Argon2id.needsRehash(encoded: encoded, parameters: parameters) }

    private func run(_ work: @escaping @Sendable () -> Result<String, any Error>) throws -> String {
        guard admitted.add(1, ordering: .acquiring).newValue <= maxAdmitted else {
            admitted.subtract(1, ordering: .releasing)
            throw GatehouseError(.busy, "Too many sign-ins at once; retry shortly.", retryAfter: 1)
        }
        defer { admitted.subtract(1, ordering: .releasing) }
        let job = Job(work)
        guard queue.push(job) else { throw GatehouseError(.busy, "The server is stopping.", retryAfter: 1) }
        job.done.wait()
        return try job.result!.get()
    }
}
