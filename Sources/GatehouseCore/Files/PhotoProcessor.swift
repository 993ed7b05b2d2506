import Dispatch
import Foundation
import GatehouseImaging
import Synchronization

/// Photos decoded and encoded anew (``PhotoCodec``, ADR 0025) on threads of their own, as
/// ``PasswordHasher`` hashes: `threads` dedicated threads do every decode, so a burst of photo
/// uploads queues here instead of taking the CPU (and memory: one photo's bytes and pixels per
/// thread) from the HTTP workers. A caller blocks its thread while it waits (upload routes run on
/// the server's offload threads), so the queue is bounded (`maxQueued`); beyond it an upload is
/// refused at once with 503 `server/busy` and `Retry-After`.
public final class PhotoProcessor: Sendable {
    /// What a photo became: the bytes to store and their type.
    public struct Photo: Sendable {
        public var bytes: [UInt8]
        public var contentType: String
    }

    /// One photo to decode. `@unchecked Sendable`: `result` is written by the worker before it
    /// signals `done`, and read by the caller only after waiting on `done`.
    private final class Job: @unchecked Sendable {
        /// Reads the photo's bytes, on the photo thread; nil: a stop.
        let load: (@Sendable () throws -> [UInt8])?
        var result: Result<Photo, any Error>?
        let done = DispatchSemaphore(value: 0)
        init(load: (@Sendable () throws -> [UInt8])?) { self.load = load }
    }

    private let jobs = Mutex<(queued: [Job], closed: Bool)>(([], false))
    private let pending = DispatchSemaphore(value: 0)
    private let ended = DispatchSemaphore(value: 0)
    private let admitted = Atomic(0)
    private let maxAdmitted: Int
    private let threadCount: Int
    private let maxPixels: Int

    /// A processor shared by the servers and services of one process that are given none (tests).
    public static let shared = PhotoProcessor(threads: 1)

    public init(threads: Int, maxQueued: Int? = nil, maxPixels: Int = PhotoCodec.maxPixels) {
        let count = max(1, threads)
        threadCount = count
        maxAdmitted = count + max(1, maxQueued ?? count)
        self.maxPixels = maxPixels
        for index in 0..<count {
            let thread = Thread { [self] in
                while true {
                    pending.wait()
                    guard let job = jobs.withLock({ $0.queued.isEmpty ? nil : $0.queued.removeFirst() }) else { continue }
                    guard let load = job.load else { break }  // a stop
                    job.result = Result { try decode(load()) }
                    job.done.signal()
                }
                ended.signal()
            }
            thread.name = "gatehouse-photo-\(index)"
            thread.start()
        }
    }

    /// The photo spooled at `path`, decoded and encoded anew. An image that is not a readable
    /// photo, or of more than 40 megapixels, is 415 `files/unsupported-type`.
    public func process(path: String) throws -> Photo {
        try process {
            let reader = try FileBlobReader(path: path)
            defer { reader.close() }
            return try reader.readAll()
        }
    }

    /// The photo whose bytes `load` reads (on the photo thread, so that only the photos being
    /// decoded are in memory), decoded and encoded anew; refused as ``process(path:)`` is.
    public func process(reading load: @escaping @Sendable () throws -> [UInt8]) throws -> Photo {
        guard admitted.add(1, ordering: .acquiring).newValue <= maxAdmitted else {
            admitted.subtract(1, ordering: .releasing)
            throw GatehouseError(.busy, "Too many photos at once; retry shortly.", retryAfter: 1)
        }
        defer { admitted.subtract(1, ordering: .releasing) }
        let job = Job(load: load)
        guard jobs.withLock({ state in
            if state.closed { return false }
            state.queued.append(job)
            return true
        }) else { throw GatehouseError(.busy, "The server is stopping.", retryAfter: 1) }
        pending.signal()
        job.done.wait()
        return try job.result!.get()
    }

    /// Photos being decoded or waiting for a photo thread now.
    public var inFlight: Int { admitted.load(ordering: .relaxed) }

    /// Ends the threads once the photos queued before it are done, and waits for them.
    public func shutdown() {
        let stops = jobs.withLock { state -> Int in
            if state.closed { return 0 }
            state.closed = true
            state.queued += (0..<threadCount).map { _ in Job(load: nil) }
            return threadCount
        }
        for _ in 0..<stops { pending.signal() }
        for _ in 0..<stops { ended.wait() }
    }

    private func decode(_ bytes: [UInt8]) throws -> Photo {
        do {
            let photo = try PhotoCodec.normalise(bytes, maxPixels: maxPixels)
            return Photo(bytes: photo.bytes, contentType: photo.contentType)
        } catch .tooManyPixels {
            throw GatehouseError(.unsupportedFileType, "A photo may have at most \(maxPixels / 1_000_000) megapixels.")
        } catch .unreadable {
            throw GatehouseError(.unsupportedFileType, "The photo could not be read as an image.")
        } catch .failed(let reason) {
            throw BlobStoreError("photo processing failed: \(reason)")
        }
    }
}
