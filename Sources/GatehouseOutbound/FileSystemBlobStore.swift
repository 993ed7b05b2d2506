import Foundation
import GatehouseCore
import GatehouseCrypto

/// Blobs as files in one folder (`GATEHOUSE_BLOB_STORE=filesystem`, `GATEHOUSE_BLOB_DIRECTORY`):
/// for one node with large files. A key's segments are its path under the folder (a ``BlobKey``
/// cannot name anything outside it). A put writes a temporary file in the target's folder,
/// flushes it to disk, and renames it over the target: a reader sees the old blob or the new one,
/// never half of one, and a crash leaves at most a `.tmp-…` file behind.
public final class FileSystemBlobStore: BlobStore {
    public let directory: String

    /// Creates the folder when it is missing.
    public init(directory: String) throws {
        var trimmed = directory
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed.removeLast() }
        self.directory = trimmed
        do {
            try FileManager.default.createDirectory(atPath: trimmed, withIntermediateDirectories: true)
        } catch {
            throw BlobStoreError("cannot create the blob folder \(trimmed): \(error)")
        }
    }

    /// The path of a key: its segments under the folder.
    public func path(of key: BlobKey) -> String {
        directory + "/" + key.rawValue
    }

    public func put(_ key: BlobKey, from source: any BlobReader) throws {
        let target = path(of: key)
        let folder = (target as NSString).deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        } catch {
            throw BlobStoreError("cannot create \(folder): \(error)")
        }
        let temporary = folder + "/.tmp-" + Digest.hex(SecureRandom.bytes(8))
        let fd = Foundation.open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw BlobStoreError("cannot create \(temporary): errno \(errno)") }
        var renamed = false
        defer {
            if !renamed { unlink(temporary) }
        }
        do {
            defer { Foundation.close(fd) }
            while case let piece = try source.read(upTo: 256 * 1024), !piece.isEmpty {
                var written = 0
                while written < piece.count {
                    let count = piece.withUnsafeBytes { write(fd, $0.baseAddress! + written, piece.count - written) }
                    if count < 0 && errno == EINTR { continue }
                    guard count > 0 else { throw BlobStoreError("cannot write \(temporary): errno \(errno)") }
                    written += count
                }
            }
            guard fsync(fd) == 0 else { throw BlobStoreError("cannot flush \(temporary): errno \(errno)") }
        }
        guard rename(temporary, target) == 0 else { throw BlobStoreError("cannot rename to \(target): errno \(errno)") }
        renamed = true
        // The rename itself is durable once the folder is flushed.
        let folderFD = Foundation.open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if folderFD >= 0 {
            _ = fsync(folderFD)
            Foundation.close(folderFD)
        }
    }

    public func open(_ key: BlobKey, range: Range<Int64>?) throws -> (any BlobReader)? {
        let target = path(of: key)
        guard FileManager.default.fileExists(atPath: target) else { return nil }
        do {
            return try FileBlobReader(path: target, offset: range?.lowerBound ?? 0, length: range.map { $0.upperBound - $0.lowerBound })
        } catch {
            // Deleted between the check and the open.
            if !FileManager.default.fileExists(atPath: target) { return nil }
            throw error
        }
    }

    public func delete(_ key: BlobKey) throws {
        guard unlink(path(of: key)) == 0 || errno == ENOENT else { throw BlobStoreError("cannot delete \(key): errno \(errno)") }
    }
}
