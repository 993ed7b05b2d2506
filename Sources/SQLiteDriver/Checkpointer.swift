import CSQLite
import Foundation
import GatehouseSQL
import Synchronization

/// How the WAL was copied back into the database file so far (``SQLiteDatabase/checkpointStatistics``).
public struct CheckpointStatistics: Sendable, Equatable {
    /// Passes the checkpoint thread ran, beside the writers.
    public var background: Int
    /// Short passes a committing writer ran after a background pass, so that the WAL could start over.
    public var afterBackground: Int
    /// Times the WAL started over from its beginning (seen by a commit as fewer frames than the last).
    public var restarts: Int
    /// Passes a committing writer ran itself because the WAL had grown past four times the
    /// threshold (the checkpoint thread could not keep it down, or readers kept it from restarting).
    public var inline: Int
}

/// Copies the WAL back into the database file off the write path (ADR 0021).
///
/// SQLite's own automatic checkpoint runs in the connection that commits, after its `COMMIT`: with
/// group commit that is the leader, which holds the in-process write lead meanwhile, so every
/// writer waited for the checkpoint's two `fdatasync`s (25 ms and more every second or two under
/// the refresh benchmark, with the CPUs idle). Instead, every connection's WAL hook asks this
/// thread for a PASSIVE checkpoint once the WAL holds ``pages`` frames; the thread copies the
/// frames on a connection of its own while the writers go on appending. The WAL can only start
/// over from its beginning when every frame in it has been copied as a write transaction begins,
/// which concurrent writers never allow; so, after each background pass, the next commit copies
/// the few frames appended since, in its own WAL hook, and the write after it restarts the WAL.
/// The thread takes no request until then: only one checkpoint runs at a time, and a background
/// pass under way would make that short one fail. A WAL that still grows to four times ``pages``
/// is checkpointed by the committing writer itself, as SQLite would, so it stays bounded whatever
/// happens to the thread.
///
/// `@unchecked Sendable`: `requested`, `stopping`, `started` and the counters are read and
/// written only under `condition`; `restartWanted` is written only under it too (and read
/// without it as a fast path); `lastFrames` is atomic; the thread's connection is its own.
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
    private let lastFrames = Atomic<Int>(0)
    private var counts = CheckpointStatistics(background: 0, afterBackground: 0, restarts: 0, inline: 0)

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

    /// Installs the WAL hook on the connection `handle` (whose ``SQLiteConnection`` keeps this
    /// object alive); it replaces SQLite's automatic checkpoint there.
    func observe(_ handle: OpaquePointer) {
        sqlite3_wal_hook(handle, checkpointerWALHook, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Called from the WAL hook after every commit, with the frames now in the WAL.
    fileprivate func committed(frames: Int, on handle: OpaquePointer, name: UnsafePointer<CChar>?) {
        if frames < lastFrames.exchange(frames, ordering: .relaxed) { count { $0.restarts += 1 } }
        // After a background pass: copy what was appended since, so that the next write starts the
        // WAL over. (With group commit this runs in the leader's `COMMIT`, before the next group.)
        if restartWanted.load(ordering: .acquiring) {
            condition.lock()
            let wanted = restartWanted.exchange(false, ordering: .acquiringAndReleasing)
            condition.unlock()
            if wanted, passiveCheckpoint(handle, name) {
                count { $0.afterBackground += 1 }
            }
            return
        }
        guard frames >= pages else { return }
        request()
        if frames >= pages * 4, passiveCheckpoint(handle, name) {
            count { $0.inline += 1 }
        }
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
        // Not while a commit's short pass is due (see the type's documentation).
        guard !stopping, !restartWanted.load(ordering: .relaxed) else { return }
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
                    // What the commits during this pass asked for, the next commit's pass does.
                    condition.lock()
                    restartWanted.store(true, ordering: .releasing)
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
        Unmanaged<Checkpointer>.fromOpaque(context).takeUnretainedValue().committed(frames: Int(frames), on: handle, name: name)
    }
    return SQLITE_OK
}

/// A PASSIVE checkpoint of the database `name` (nil: every attached one) on `handle`: copies the
/// WAL frames no reader still needs into the database file, without waiting for any lock. `false`
/// when another checkpoint was running or it failed.
func passiveCheckpoint(_ handle: OpaquePointer, _ name: UnsafePointer<CChar>? = nil) -> Bool {
    sqlite3_wal_checkpoint_v2(handle, name, SQLITE_CHECKPOINT_PASSIVE, nil, nil) == SQLITE_OK
}
