import GatehouseCrypto

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A response body written to a file in the server's spool folder (``HTTPRequest/spoolDirectory``)
/// before it is sent, then read from there a piece at a time as the client takes it.
///
/// For a body made of many database reads (an export): the handler, on an offload thread, writes
/// it page by page, so its memory holds one page; the connection's thread, which serves many
/// connections, only reads a file (``stream()``), never waits on a database. The file is mode
/// 0600 in the server's private folder; it is removed when the body has been sent, when the client
/// goes away, when the spool is discarded, or with the folder when the server stops.
///
/// One thread at a time: the handler writes, then hands the stream over.
public final class ResponseSpool {
    /// A spool file that could not be made, written or read (disk full, folder gone).
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public let description: String
    }

    public let path: String
    /// The bytes written so far.
    public private(set) var size: Int64 = 0
    private var descriptor: Int32
    /// The file's identity, so that removing it never unlinks another file that took its path.
    private let device: UInt64
    private let inode: UInt64
    private var handedOver = false

    /// Makes an empty spool file in `directory` (the request's ``HTTPRequest/spoolDirectory``).
    public init(in directory: String) throws(Failure) {
        let path = (directory.hasSuffix("/") ? directory : directory + "/") + "gatehouse-response-" + Digest.hex(SecureRandom.bytes(16))
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw Failure(description: "cannot create a response spool file in \(directory): \(String(cString: strerror(errno)))") }
        var status = stat()
        guard fstat(fd, &status) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            unlink(path)
            throw Failure(description: "cannot stat the response spool file: \(reason)")
        }
        self.path = path
        descriptor = fd
        device = UInt64(status.st_dev)
        inode = UInt64(status.st_ino)
    }

    /// Appends `bytes`.
    public func write(_ bytes: [UInt8]) throws(Failure) {
        guard descriptor >= 0, !handedOver else { throw Failure(description: "the response spool is closed") }
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { buffer in
                #if canImport(Glibc)
                Glibc.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                #else
                Darwin.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                #endif
            }
            if written < 0 {
                if errno == EINTR { continue }
                throw Failure(description: "cannot write the response spool file: \(String(cString: strerror(errno)))")
            }
            offset += written
        }
        size += Int64(bytes.count)
    }

    /// Ends the writing: the body to send, read from the file; the file goes when the body is
    /// closed (sent, or the client gone), and `onClose` runs then. The spool must not be used after this.
    public func stream(onClose: @escaping () -> Void = {}) -> ResponseStream {
        handedOver = true
        let fd = descriptor
        descriptor = -1
        let total = size
        let remover = Remover(path: path, device: device, inode: inode, descriptor: fd)
        var position: Int64 = 0
        return ResponseStream(
            size: total,
            read: { maxBytes throws -> [UInt8] in
                let wanted = Int(min(Int64(max(0, maxBytes)), total - position))
                guard wanted > 0 else { return [] }
                var bytes = [UInt8](repeating: 0, count: wanted)
                var filled = 0
                while filled < wanted {
                    let count = bytes.withUnsafeMutableBytes { buffer in
                        pread(fd, buffer.baseAddress! + filled, wanted - filled, off_t(position + Int64(filled)))
                    }
                    if count < 0 && errno == EINTR { continue }
                    guard count > 0 else { throw Failure(description: "short read of the response spool file") }
                    filled += count
                }
                position += Int64(filled)
                return bytes
            },
            close: {
                remover.remove()
                onClose()
            })
    }

    /// Removes the file without sending it (the handler failed before ``stream()``).
    public func discard() {
        guard !handedOver else { return }
        handedOver = true
        Remover(path: path, device: device, inode: inode, descriptor: descriptor).remove()
        descriptor = -1
    }

    deinit { discard() }

    /// Closes the descriptor and unlinks the file if its path still names it; once.
    private final class Remover {
        let path: String
        let device: UInt64
        let inode: UInt64
        var descriptor: Int32

        init(path: String, device: UInt64, inode: UInt64, descriptor: Int32) {
            self.path = path
            self.device = device
            self.inode = inode
            self.descriptor = descriptor
        }

        func remove() {
            guard descriptor >= 0 else { return }
            var status = stat()
            if lstat(path, &status) == 0, UInt64(status.st_dev) == device, UInt64(status.st_ino) == inode { unlink(path) }
            close(descriptor)
            descriptor = -1
        }
    }
}
