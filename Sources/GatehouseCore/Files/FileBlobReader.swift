import Foundation

/// A local file read as a ``BlobReader``, from `offset` for `length` bytes (default: to the end).
public final class FileBlobReader: BlobReader {
    public let size: Int64
    private var descriptor: Int32
    private var position: Int64
    private let end: Int64

    public init(path: String, offset: Int64 = 0, length: Int64? = nil) throws {
        let fd = Foundation.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw BlobStoreError("cannot open \(path): errno \(errno)") }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            Foundation.close(fd)
            throw BlobStoreError("cannot stat \(path): errno \(errno)")
        }
        let total = Int64(info.st_size)
        let start = min(max(0, offset), total)
        descriptor = fd
        position = start
        end = min(total, start + max(0, length ?? total))
        size = end - start
    }

    deinit { close() }

    public func read(upTo maxBytes: Int) throws -> [UInt8] {
        guard descriptor >= 0 else { throw BlobStoreError("read after close") }
        let wanted = Int(min(Int64(max(0, maxBytes)), end - position))
        guard wanted > 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: wanted)
        var filled = 0
        while filled < wanted {
            let count = bytes.withUnsafeMutableBytes { buffer in
                pread(descriptor, buffer.baseAddress! + filled, wanted - filled, off_t(position + Int64(filled)))
            }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw BlobStoreError("short read: errno \(errno)") }
            filled += count
        }
        position += Int64(filled)
        return bytes
    }

    public func close() {
        if descriptor >= 0 { Foundation.close(descriptor) }
        descriptor = -1
    }
}
