/// The name of a blob: one to eight segments of `[a-z0-9_]` joined by `/`, at most 200 bytes.
/// Nothing else can be one, so a key never names a path outside the blob folder (no `..`, no
/// leading `/`) nor needs escaping anywhere.
public struct BlobKey: Sendable, Hashable, CustomStringConvertible {
    public let rawValue: String
    public var description: String { rawValue }

    /// Parses a key; nil when it is not one.
    public init?(parsing text: String) {
        guard Self.isValid(text) else { return nil }
        rawValue = text
    }

    /// For keys built from parsed identifiers (``StoredFile/blobKey(app:file:)``); checked all the same.
    init(unchecked text: String) {
        precondition(Self.isValid(text), "not a blob key: \(text)")
        rawValue = text
    }

    /// The key's segments (each a safe path component).
    public var segments: [Substring] { rawValue.split(separator: "/") }

    static func isValid(_ text: String) -> Bool {
        guard !text.isEmpty, text.utf8.count <= 200 else { return false }
        let segments = text.split(separator: "/", omittingEmptySubsequences: false)
        guard segments.count <= 8 else { return false }
        return segments.allSatisfy { segment in
            !segment.isEmpty && segment.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F }
        }
    }
}

/// Bytes read in order, a piece at a time: a blob being read (``BlobStore/open(_:range:)``) or a
/// source being stored (``FileBlobReader``). Used by one thread at a time.
public protocol BlobReader: AnyObject {
    /// How many bytes this reader yields in all.
    var size: Int64 { get }
    /// The next bytes, at most `maxBytes`; empty once everything was read.
    func read(upTo maxBytes: Int) throws -> [UInt8]
    /// Releases what the reader holds (a file descriptor); reading after it is an error.
    func close()
}

extension BlobReader {
    /// Everything left, for small blobs and tests.
    public func readAll() throws -> [UInt8] {
        var bytes: [UInt8] = []
        while case let piece = try read(upTo: 256 * 1024), !piece.isEmpty { bytes += piece }
        return bytes
    }
}

/// A failure of a blob store (never shown to a client: a 500).
public struct BlobStoreError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Where file contents live (ADR 0013): in the database (`GATEHOUSE_BLOB_STORE=database`, the
/// default; `GatehouseSQL.SQLBlobStore`) or in a folder (`filesystem`, ``FileSystemBlobStore``).
/// Neither holds a whole blob in memory. Writes are not part of a unit of work: a blob is written
/// before the row that names it commits, and removed when that commit fails; a deleted row's blob
/// is removed after the commit (``BlobDeletion``).
public protocol BlobStore: Sendable {
    /// Stores everything `source` yields under `key`, replacing a blob of that key. Atomic: a
    /// reader sees the whole blob or none; a failed put leaves none.
    func put(_ key: BlobKey, from source: any BlobReader) throws
    /// A reader of the blob, or of `range` of it (clamped to its size); nil when there is no such blob.
    func open(_ key: BlobKey, range: Range<Int64>?) throws -> (any BlobReader)?
    /// Removes the blob; removing a missing blob is no error.
    func delete(_ key: BlobKey) throws
}

extension BlobStore {
    /// Stores the content of a local file (an upload spooled by the HTTP layer).
    public func put(_ key: BlobKey, contentsOf path: String) throws {
        let source = try FileBlobReader(path: path)
        defer { source.close() }
        try put(key, from: source)
    }

    public func open(_ key: BlobKey) throws -> (any BlobReader)? { try open(key, range: nil) }
}
