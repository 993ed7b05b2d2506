#if canImport(Glibc)
import Glibc
#endif

/// Gives the free memory of glibc's heaps back to the system.
///
/// glibc returns a heap's free memory only from its top, so after a burst of requests on many
/// threads, each thread's heap (arena) keeps megabytes it has freed but cannot release: after a
/// Sign in with Apple load at 64 connections, about 11 of the 18 MiB a node had grown by.
/// `malloc_trim` releases the free pages inside the heaps too. It holds each heap's lock while it
/// walks that heap's free chunks, so it runs every 10 s, not more.
enum HeapTrim {
    private typealias Trim = @convention(c) (Int) -> Int32

    /// glibc's `malloc_trim` (its header is not in Swift's Glibc module); nil on another C library.
    private static let trim: Trim? = {
        #if canImport(Glibc)
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: Trim.self)
        #else
        return nil
        #endif
    }()

    static func run() {
        _ = trim?(0)
    }
}
