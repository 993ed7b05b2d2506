import CSQLite
import Foundation
import GatehouseSQL
import Synchronization

/// How the WAL was copied back into the database file so far (``SQLiteDatabase/checkpointStatistics``).
public struct CheckpointStatistics: Sendable, Equatable {
    /// Passes the checkpoint thread ran, beside the writers.
    public var background: Int
    /// Short passes a group's leader ran before its `BEGIN`, so that the WAL could start over.
    public var beforeGroup: Int
    /// Passes a committing writer ran itself because the WAL had grown past four times the
    /// threshold (the checkpoint thread could not keep it down, or readers kept it from restarting).
    public var inline: Int
}

/// Copies the WAL back into the database file off the write path (ADR 0021).
///
/// SQLite's own automatic checkpoint runs in the connection that commits, after its `COMMIT`: with
/// group commit that is the leader, which holds the in-process write lock meanwhile, so every
/// writer waited for the checkpoint's two `fdatasync`s (25 ms and more every second or two under
/// the refresh benchmark, with the CPUs idle). Instead, every connection's WAL hook asks this
/// thread for a PASSIVE checkpoint once the WAL holds ``pages`` frames; the thread copies the
/// frames on a connection of its own while the writers go on appending. The WAL can only start
/// over from its beginning when every frame in it has been copied as a write transaction begins,
/// which concurrent writers never allow; so, after each background pass, the next group's leader
/// copies the few frames appended since, before its `BEGIN IMMEDIATE`, and that group restarts
/// the WAL. A WAL that still grows to four times ``pages`` is checkpointed by the committing
/// writer itself, as SQLite would, so it stays bounded whatever happens to the thread.
///
/// `@unchecked Sendable`: `requested`, `stopping`, `started` and the counters are read and
/// written only under `condition`; `restartWanted` is atomic; the thread's connection is its own.
final class Checkpointer: @unchecked Sendable {
    /// WAL frames (pages) after which a commit asks for a checkpoint.
    let pages: Int
    private let open: @Sendable () throws(SQLError) -> SQLiteConnection
    private let condition = NSCondition()
    private var requested = false
    private var stopping = false
    private var started = false
    private let finished = DispatchSemaphore(value: 0)
    private let restartWanted = Atomic<Bool>(false)
    private var counts = CheckpointStatistics(background: 0, beforeGroup: 0, inline: 0)

    /// `open` opens the thread's own connection (without a WAL hook), when it first runs.
    init(pages: Int, open: @escaping @Sendable () throws(SQLError) -> SQLiteConnection) {
        precondition(pages > 0, "a checkpoint threshold needs at least one page")
        self.pages = pages
        self.open = open
    }

    var statistics: CheckpointStatistics {
        condition.lock()
        defer { condition.unlock() }
        return counts
    }

    /// Installs the WAL hook on `connection` (which keeps this object alive); it replaces
    /// SQLite's automatic checkpoint there.
    func observe(_ handle: OpaquePointer) {
        sqlite3_wal_hook(handle, checkpointerWALHook, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Called from the WAL hook after every commit, with the frames now in the WAL.
    fileprivate func committed(frames: Int, on handle: OpaquePointer) {
        guard frames >= pages else { return }
        // Not while a leader's pass is due: a background pass running then would make it fail
        // (one checkpoint at a time), and the WAL would never start over.
        if !restartWanted.load(ordering: .acquiring) { request() }
        if frames >= pages * 4, sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil) == SQLITE_OK {
            count { $0.inline += 1 }
        }
    }

    /// Run by a group's leader before its `BEGIN IMMEDIATE`, with no other write of this process
    /// under way: after a background pass, copies what was appended since, so that the group's
    /// first write starts the WAL over.
    func beforeGroup(_ connection: SQLiteConnection) {
        guard restartWanted.load(ordering: .relaxed), restartWanted.exchange(false, ordering: .acquiringAndReleasing) else { return }
        if connection.checkpoint() { count { $0.beforeGroup += 1 } }
    }

    /// Stops the thread, if it runs, and waits for it (a pass under way finishes). Later calls
    /// return at once.
    func stop() {
        condition.lock()
        let wait = started && !stopping
        stopping = true
        condition.broadcast()
        condition.unlock()
        if wait { finished.wait() }
    }

    private func request() {
        condition.lock()
        defer { condition.unlock() }
        guard !stopping else { return }
        requested = true
        if !started {
            started = true
            let thread = Thread { [self] in run() }
            thread.name = "sqlite-checkpoint"
            thread.start()
        }
        condition.signal()
    }

    private func run() {
        var connection: SQLiteConnection?
        while true {
            condition.lock()
            while !requested && !stopping { condition.wait() }
            let stop = stopping
            requested = false
            condition.unlock()
            if stop { break }
            do {
                let current = try connection ?? open()
                connection = current
                if current.checkpoint() {
                    restartWanted.store(true, ordering: .releasing)
                    // What the commits during this pass asked for, the leader's pass does now.
                    condition.lock()
                    requested = false
                    counts.background += 1
                    condition.unlock()
                }
            } catch {
                // The file could not be opened: the next commit past the threshold asks again, and
                // the committing writers' own checkpoints bound the WAL meanwhile.
                connection?.close()
                connection = nil
            }
        }
        connection?.close()
        finished.signal()
    }

    private func count(_ update: (inout CheckpointStatistics) -> Void) {
        condition.lock()
        update(&counts)
        condition.unlock()
    }
}

/// `sqlite3_wal_hook`'s callback: runs in the committing connection, after its commit.
private func checkpointerWALHook(_ context: UnsafeMutableRawPointer?, _ handle: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ frames: Int32) -> Int32 {
    if let context, let handle {
        Unmanaged<Checkpointer>.fromOpaque(context).takeUnretainedValue().committed(frames: Int(frames), on: handle)
    }
    return SQLITE_OK
}
