import GatehouseCore

/// Blobs in the database (`GATEHOUSE_BLOB_STORE=database`, the default; migration 0014): a
/// `blobs` row per blob and its bytes in `blob_chunks` of ``chunkBytes`` each, so neither a write
/// nor a read holds more than one chunk in memory. Several nodes on one PostgreSQL share them
/// with nothing to set up. A put writes each chunk in a statement of its own and the header row
/// last: a reader (which starts from the header) sees the whole blob or none, and no put holds
/// SQLite's one write lock for longer than a chunk, so sign-ins and refreshes are not held behind
/// a large upload. Not scoped to an app, as an object store is not: a key begins with its app's id.
public struct SQLBlobStore: BlobStore {
    public let database: any SQLDatabase
    public let chunkBytes: Int

    public init(database: any SQLDatabase, chunkBytes: Int = 256 * 1024) {
        self.database = database
        self.chunkBytes = chunkBytes
    }

    public func put(_ key: BlobKey, from source: any BlobReader) throws {
        // The header first: from here on no reader finds the blob until it is whole again.
        try delete(key)
        do {
            var seq: Int64 = 0
            var size: Int64 = 0
            while case let piece = try source.read(upTo: chunkBytes), !piece.isEmpty {
                try database.execute("INSERT INTO blob_chunks (blob_key, seq, data) VALUES (\(key.rawValue), \(seq), \(piece))")
                seq += 1
                size += Int64(piece.count)
            }
            try database.execute("""
                INSERT INTO blobs (blob_key, size, chunk_bytes, chunks) VALUES (\(key.rawValue), \(size), \(Int64(chunkBytes)), \(seq))
                """)
        } catch {
            _ = try? database.execute("DELETE FROM blob_chunks WHERE blob_key = \(key.rawValue)")
            throw error
        }
    }

    public func open(_ key: BlobKey, range: Range<Int64>?) throws -> (any BlobReader)? {
        guard let row = try database.query("SELECT size, chunk_bytes FROM blobs WHERE blob_key = \(key.rawValue)").first else { return nil }
        let size = try row.int64("size")
        let start = min(max(0, range?.lowerBound ?? 0), size)
        let end = max(start, min(size, range?.upperBound ?? size))
        return SQLBlobReader(database: database, key: key, chunkBytes: try row.int64("chunk_bytes"), position: start, end: end)
    }

    public func delete(_ key: BlobKey) throws {
        try database.transaction { db in
            try db.execute("DELETE FROM blobs WHERE blob_key = \(key.rawValue)")
            try db.execute("DELETE FROM blob_chunks WHERE blob_key = \(key.rawValue)")
        }
    }
}

/// Reads a database blob a chunk at a time, each chunk one statement on a pooled connection.
final class SQLBlobReader: BlobReader {
    let size: Int64
    private let database: any SQLDatabase
    private let key: BlobKey
    private let chunkBytes: Int64
    private var position: Int64
    private let end: Int64
    /// The chunk last read and its number: a reader asking for less than a chunk reads it once.
    private var cached: (seq: Int64, data: [UInt8])?
    private var closed = false

    init(database: any SQLDatabase, key: BlobKey, chunkBytes: Int64, position: Int64, end: Int64) {
        self.database = database
        self.key = key
        self.chunkBytes = chunkBytes
        self.position = position
        self.end = end
        size = end - position
    }

    func read(upTo maxBytes: Int) throws -> [UInt8] {
        guard !closed else { throw BlobStoreError("read after close") }
        guard position < end, maxBytes > 0 else { return [] }
        let seq = position / chunkBytes
        if cached?.seq != seq {
            guard let row = try database.query("SELECT data FROM blob_chunks WHERE blob_key = \(key.rawValue) AND seq = \(seq)").first else {
                throw BlobStoreError("the blob \(key) lost its chunk \(seq) (deleted while read)")
            }
            cached = (seq, try row.bytes("data"))
        }
        let chunk = cached!.data
        let offset = Int(position - seq * chunkBytes)
        let count = Int(min(Int64(maxBytes), end - position, Int64(chunk.count - offset)))
        guard count > 0 else { throw BlobStoreError("the blob \(key) is shorter than recorded") }
        position += Int64(count)
        return Array(chunk[offset..<offset + count])
    }

    func close() {
        closed = true
        cached = nil
    }
}
