import CArgon2
import Foundation
import Synchronization

/// argon2id's working memory (19 MiB a hash by default), mapped by Gatehouse instead of taken
/// from malloc, so that what it keeps is known and what it gives back is given back.
///
/// From malloc, a freed block went back to glibc's heap, which kept it for the next hash for
/// good (its mmap threshold grows to the largest block freed): up to three 19 MiB blocks stayed
/// resident for ever after the first sign-ins. Mapping each block anew instead (a fixed
/// `MALLOC_MMAP_THRESHOLD_`) cost about a quarter of sign-in throughput, in page faults and
/// zero-filling. Here a freed block (already wiped by libargon2) is kept for the next hash of the
/// same size, so a busy server maps nothing; ``releaseIdle(after:)`` unmaps what no hash has used
/// for a while, so an idle one holds none.
public enum Argon2idMemory {
    private struct Block: Sendable {
        /// The mapping's address (a bit pattern: a pointer is not `Sendable`).
        let address: UInt
        let size: Int
        let freedAt: ContinuousClock.Instant
    }

    /// Kept blocks, newest last; and the bytes lent to hashes now.
    private static let state = Mutex<(kept: [Block], lent: Int)>(([], 0))
    /// Blocks larger than this (a stored hash with a higher memory cost) are unmapped at once.
    private static let largestKept = 256 << 20

    /// libargon2's allocator callback.
    static let allocate: allocate_fptr = { memory, size in
        guard let memory else { return ARGON2_MEMORY_ALLOCATION_ERROR.rawValue }
        let reused = state.withLock { state -> UInt in
            guard let index = state.kept.lastIndex(where: { $0.size == size }) else { return 0 }
            state.lent += size
            return state.kept.remove(at: index).address
        }
        if let address = UnsafeMutablePointer<UInt8>(bitPattern: reused) {
            memory.pointee = address
            return ARGON2_OK.rawValue
        }
        let mapped = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        guard let mapped, mapped != MAP_FAILED else { return ARGON2_MEMORY_ALLOCATION_ERROR.rawValue }
        state.withLock { $0.lent += size }
        memory.pointee = mapped.assumingMemoryBound(to: UInt8.self)
        return ARGON2_OK.rawValue
    }

    /// libargon2's deallocator callback: libargon2 has wiped the block before it calls this.
    static let free: deallocate_fptr = { memory, size in
        guard let memory else { return }
        let keep = size <= largestKept
        state.withLock { state in
            state.lent -= size
            if keep { state.kept.append(Block(address: UInt(bitPattern: memory), size: size, freedAt: .now)) }
        }
        if !keep { munmap(memory, size) }
    }

    /// Unmaps the kept blocks no hash has taken for `idle`; returns the bytes given back.
    @discardableResult
    public static func releaseIdle(after idle: Duration) -> Int {
        let cutoff = ContinuousClock.now - idle
        let released = state.withLock { state -> [Block] in
            let old = state.kept.filter { $0.freedAt <= cutoff }
            state.kept.removeAll { $0.freedAt <= cutoff }
            return old
        }
        for block in released { munmap(UnsafeMutableRawPointer(bitPattern: block.address), block.size) }
        return released.reduce(0) { $0 + $1.size }
    }

    /// Kept blocks of exactly `size` bytes (for tests).
    static func keptBlockCount(size: Int) -> Int {
        state.withLock { state in state.kept.count { $0.size == size } }
    }

    /// Bytes mapped now: kept for the next hashes, and lent to hashes running.
    public static var mappedBytes: (kept: Int, lent: Int) {
        state.withLock { state in (state.kept.reduce(0) { $0 + $1.size }, state.lent) }
    }
}
