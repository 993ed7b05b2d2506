#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a `multipart/form-data` body held, read by the server for a route whose `head` answered
/// `HeadDecision.readMultipart`: the small text fields in memory, the file fields spooled to disk.
public struct Upload: Sendable {
    /// The text fields by name (each at most `MultipartForm.maxFieldBytes`, valid UTF-8).
    public var fields: [String: String]
    /// The parts of `MultipartForm.fileFields` that were sent, in order; at most one per field.
    public var files: [SpooledFile]

    public init(fields: [String: String] = [:], files: [SpooledFile] = []) {
        self.fields = fields
        self.files = files
    }

    /// The file sent under `field`, or nil.
    public func file(_ field: String) -> SpooledFile? {
        files.first { $0.field == field }
    }
}

/// One file part, written to a spool file while it arrived.
///
/// **Lifetime.** The spool file exists from before `HTTPResponder.respond(to:)` is called until
/// the response has been sent or the connection is gone; then the server removes it. The receiver
/// may read it (`prefix`, `forEachChunk`, or open `path` itself) during `respond`, and may keep
/// it by renaming it away (`rename(2)` within the same file system, e.g. into a blob directory):
/// the server only removes the file it created, so a renamed file is left alone. Anything else
/// (copying, uploading elsewhere) must be finished before `respond` returns.
///
/// Nothing here is trusted: `filename` and `declaredContentType` are what the client sent.
public struct SpooledFile: Sendable {
    /// The form field (the part's `name`).
    public let field: String
    /// The part's `filename` as sent, unsanitised (may hold `../`, be empty or absent).
    public let filename: String?
    /// The part's `Content-Type` as sent; says nothing about the bytes.
    public let declaredContentType: String?
    /// The number of bytes (may be 0).
    public let size: Int
    /// The SHA-256 of the bytes, computed while they arrived.
    public let sha256: [UInt8]
    /// Where the spool file is (in the server's spool directory, mode 0600).
    public let path: String

    public init(field: String, filename: String?, declaredContentType: String?, size: Int, sha256: [UInt8], path: String) {
        self.field = field
        self.filename = filename
        self.declaredContentType = declaredContentType
        self.size = size
        self.sha256 = sha256
        self.path = path
    }

    /// A spool file that cannot be read (gone, or an I/O error).
    public struct ReadError: Error, CustomStringConvertible, Sendable {
        public let description: String
    }

    /// The first `count` bytes (fewer if the file is shorter), e.g. to recognise its type.
    public func prefix(_ count: Int) throws(ReadError) -> [UInt8] {
        var result: [UInt8] = []
        try forEachChunk(size: max(1, min(count, 64 * 1024))) { chunk in
            result.append(contentsOf: chunk.prefix(count - result.count))
            return result.count < count
        }
        return result
    }

    /// Calls `body` with the file's bytes in order, at most `size` at a time, until it returns
    /// false or the file ends. Memory stays at one chunk whatever the file's size.
    public func forEachChunk(size: Int = 64 * 1024, _ body: (UnsafeRawBufferPointer) throws(ReadError) -> Bool) throws(ReadError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw ReadError(description: "cannot open the spooled upload: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, size), alignment: 1)
        defer { buffer.deallocate() }
        while true {
            let count = read(fd, buffer.baseAddress, buffer.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw ReadError(description: "cannot read the spooled upload: \(String(cString: strerror(errno)))")
            }
            if count == 0 { return }
            guard try body(UnsafeRawBufferPointer(rebasing: buffer[..<count])) else { return }
        }
    }
}

/// How `HeadDecision.readMultipart` reads a `multipart/form-data` body.
public struct MultipartForm: Sendable {
    /// The fields whose parts are files: spooled to disk, hashed, at most `maxFileBytes` each,
    /// and at most one part each (a second is 400). Other parts are text fields.
    public var fileFields: Set<String>
    /// The most bytes one file part may hold; more is 413.
    public var maxFileBytes: Int
    /// The most bytes one text field may hold; more is 400.
    public var maxFieldBytes: Int
    /// The most text fields; more is 400.
    public var maxFields: Int
    /// The most bytes the whole body may hold (413 before reading when `Content-Length` says
    /// more, while reading otherwise): the files plus room for the text fields and the
    /// multipart framing.
    public var maxBodyBytes: Int

    public init(fileFields: Set<String>, maxFileBytes: Int, maxFieldBytes: Int = 1024, maxFields: Int = 16) {
        self.fileFields = fileFields
        self.maxFileBytes = max(0, maxFileBytes)
        self.maxFieldBytes = max(0, maxFieldBytes)
        self.maxFields = max(0, maxFields)
        let framing = 64 * 1024  // part headers and boundaries; the text fields fit in it too
        let (files, overflow) = self.maxFileBytes.multipliedReportingOverflow(by: max(1, fileFields.count))
        self.maxBodyBytes = overflow ? Int.max : files.addingReportingOverflow(framing + self.maxFields * self.maxFieldBytes).partialValue
    }
}
