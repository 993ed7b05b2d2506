import Foundation
import GatehouseSQL

/// How many transactions shared a commit (``SQLiteDatabase/groupCommitStatistics``).
public struct GroupCommitStatistics: Sendable, Equatable {
    /// `BEGIN IMMEDIATE` … `COMMIT` groups run (committed or not).
    public var groups: Int
    /// Transaction bodies taken into those groups.
    public var transactions: Int
    /// Transactions waiting for the next group now.
    public var queued: Int
}

/// One transaction body on its way through a ``GroupCommit``.
///
/// `@unchecked Sendable`: `state` and `failure` are read and written only under the group
/// commit's lock, and `work` is set to nil only under it; the semaphore is thread-safe. `work`
/// itself runs outside the lock, on the leader's thread, over state that is not `Sendable` (the
/// caller's body and the box its result goes into): that is race-free because its owner is
/// blocked in ``GroupCommit/run(_:timeout:)`` meanwhile, and the lock orders the leader's writes
/// (the result, then `state = .done`) before the owner reads them.
final class QueuedWrite: @unchecked Sendable {
    fileprivate enum State {
        /// Waiting in the queue; its owner may withdraw it when its deadline passes.
        case queued
        /// At the head of the queue with no group running: its owner runs the next group.
        case leading
        /// Taken into a group.
        case running
        /// Its group committed, or failed with `failure`.
        case done
    }

    /// Runs the body (in a savepoint) on the group's connection. Taken, and so released, before
    /// the owner is woken: the owner's closure must not outlive its call.
    fileprivate var work: ((SQLiteConnection) -> Void)?
    fileprivate var state = State.queued
    fileprivate var failure: (any Error)?
    /// Whether this body's own failure lost its group (then its own error says why). Set with
    /// `failure`; read by the owner once ``GroupCommit/run(_:timeout:)`` has returned or thrown.
    private(set) var endedGroup = false
    fileprivate let wake = DispatchSemaphore(value: 0)

    init(_ work: @escaping (SQLiteConnection) -> Void) { self.work = work }

    fileprivate func markEndedGroup(_ ended: Bool) { endedGroup = ended }
}

/// SQLite's single writer, shared by the threads that write (see ``SQLiteDatabase``): the thread
/// whose write finds no group running leads one; it takes the queued writes (its own first, then
/// up to ``largestGroup`` in all, in arrival order), runs them one after another on one pooled
/// connection inside one `BEGIN IMMEDIATE` … `COMMIT`, wakes their threads, and hands the lead to
/// the oldest write still queued, whose thread runs the next group.
///
/// `@unchecked Sendable`: `queue` and `leading` are read and written only while holding `lock`.
final class GroupCommit: @unchecked Sendable {
    /// The most bodies in one transaction: enough to share a commit among every HTTP thread,
    /// few enough that a group holds SQLite's write lock (which autocommit writers and other
    /// processes wait for in SQLite's busy handler) for milliseconds, not more.
    static let largestGroup = 32

    private let pool: ConnectionPool<SQLiteConnection>
    private let lock = NSLock()
    private var queue: [QueuedWrite] = []
    private var leading = false
    private var groups = 0
    private var bodies = 0

    init(pool: ConnectionPool<SQLiteConnection>) { self.pool = pool }

    /// Groups run and bodies taken into them since the start, and the writes queued now.
    var statistics: GroupCommitStatistics {
        lock.lock()
        defer { lock.unlock() }
        return GroupCommitStatistics(groups: groups, transactions: bodies, queued: queue.count)
    }

    /// Queues `write` and returns once its group has committed; throws the group's failure, or
    /// ``SQLError/Kind/busy`` when no group took the write within `timeout`. Once a group has
    /// taken it, it waits for that group however long it takes: the body borrows its caller's
    /// closure, which must not outlive this call.
    func run(_ write: QueuedWrite, timeout: TimeInterval) throws {
        let deadline = DispatchTime.now() + timeout
        var waitUntil = deadline
        lock.lock()
        queue.append(write)
        if !leading {
            leading = true
            write.state = .leading
        }
        lock.unlock()
        while true {
            lock.lock()
            let state = write.state
            let failure = write.failure
            lock.unlock()
            switch state {
            case .done:
                if let failure { throw failure }
                return
            case .leading:
                lead()
            case .queued, .running:
                guard write.wake.wait(timeout: waitUntil) == .timedOut else { continue }
                lock.lock()
                if write.state == .queued, let index = queue.firstIndex(where: { $0 === write }) {
                    queue.remove(at: index)
                    write.work = nil
                    write.state = .done
                    lock.unlock()
                    throw SQLError(kind: .busy, message: "timed out waiting for the SQLite write lock")
                }
                lock.unlock()
                // Taken into a group (or leading) meanwhile: it will finish, so wait for it.
                waitUntil = .distantFuture
            }
        }
    }

    /// Runs one group: the writes queued now, the leader's own first.
    private func lead() {
        lock.lock()
        let group = Array(queue.prefix(Self.largestGroup))
        queue.removeFirst(group.count)
        // A queued write always has its work (only a withdrawn one, no longer queued, loses it);
        // `works[i]` is `group[i]`'s, so a failing body's index names its write.
        var works = group.map { write in
            write.state = .running
            defer { write.work = nil }
            return write.work ?? { _ in }
        }
        groups += 1
        bodies += group.count
        lock.unlock()

        let (failure, culprit) = commit(works)
        // The bodies borrow their callers' closures: released here, before the wake-up below.
        works.removeAll()

        lock.lock()
        for (index, write) in group.enumerated() {
            write.state = .done
            write.failure = failure
            write.markEndedGroup(index == culprit)
        }
        let next = queue.first
        if let next { next.state = .leading } else { leading = false }
        lock.unlock()
        for write in group { write.wake.signal() }
        next?.wake.signal()
    }

    /// `BEGIN IMMEDIATE`, every body, `COMMIT`; the error that lost the whole group, if any, and
    /// the index of the body whose own failure lost it.
    private func commit(_ works: [(SQLiteConnection) -> Void]) -> (failure: (any Error)?, culprit: Int?) {
        var culprit: Int?
        do {
            try pool.withConnection { connection in
                try connection.executeScript("BEGIN IMMEDIATE")
                do {
                    for (index, work) in works.enumerated() {
                        work(connection)
                        // SQLite ends the whole transaction on some errors (SQLITE_FULL, I/O): then
                        // the bodies before this one were rolled back too. A body whose savepoint
                        // could not be rolled back (`poisoned`) left writes that must not commit.
                        guard connection.inTransaction, !connection.poisoned else {
                            culprit = index
                            throw SQLError(kind: .connection, message: "a transaction of the same group failed and the database rolled it back with this one; nothing of it was saved")
                        }
                    }
                    try connection.executeScript("COMMIT")
                } catch {
                    if connection.inTransaction {
                        do {
                            try connection.executeScript("ROLLBACK")
                        } catch {
                            connection.poisoned = true
                        }
                    }
                    throw error
                }
            }
            return (nil, nil)
        } catch {
            return (error, culprit)
        }
    }
}
