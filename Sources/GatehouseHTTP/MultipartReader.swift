import CMicroHTTPD
import GatehouseCrypto

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads one request's `multipart/form-data` body with libmicrohttpd's post processor: file
/// parts go to spool files (hashed and counted on the way), text fields stay in memory.
///
/// Memory per request is the post processor's buffer plus the text fields, whatever the size of
/// the files. Not thread-safe: used by the one worker that reads the request (`RequestState`).
final class MultipartReader {
    enum Failure: Error {
        /// The body or a file part passed its limit: 413.
        case tooLarge
        /// Not a well-formed multipart body, or a part this form refuses: 400.
        case malformed(String)
        /// The spool file could not be written (disk full, directory gone): not the client's fault.
        case spoolFailed(String)
    }

    /// Bytes libmicrohttpd's post processor buffers: a part's header line, and a boundary twice,
    /// must fit in it; the iterator receives the data in pieces of at most this size.
    static let processorBufferBytes = 32 * 1024

    let form: MultipartForm
    private let spoolDirectory: String
    private var processor: OpaquePointer?
    private(set) var failure: Failure?
    /// Whether `tooLarge` came from a file part (else from the whole body).
    private(set) var exceededFileLimit = false
    private var bodyBytes = 0
    private var fields: [String: String] = [:]
    private var files: [SpooledFile] = []
    /// Every spool file created for this request, removed when it ends.
    private var spools: [SpoolWriter] = []
    private var current: Part?
    private var sawPart = false

    private enum Part {
        case file(SpoolWriter, filename: String?, contentType: String?)
        case field(String, [UInt8])

        var isEmpty: Bool {
            switch self {
            case .file(let writer, _, _): writer.size == 0
            case .field(_, let bytes): bytes.isEmpty
            }
        }
    }

    /// Nil when libmicrohttpd refuses the body's `Content-Type` (no or a bad `boundary`).
    init?(connection: OpaquePointer, form: MultipartForm, spoolDirectory: String) {
        self.form = form
        self.spoolDirectory = spoolDirectory
        let processor = MHD_create_post_processor(
            connection, Self.processorBufferBytes, Self.iterator, Unmanaged.passUnretained(self).toOpaque())
        guard let processor else { return nil }
        self.processor = processor
    }

    deinit {
        discard()
    }

    /// Feeds the next piece of the body (as libmicrohttpd decoded it from the connection).
    func feed(_ bytes: UnsafePointer<CChar>, count: Int) {
        guard failure == nil, let processor else { return }
        bodyBytes += count
        guard bodyBytes <= form.maxBodyBytes else { return fail(.tooLarge) }
        if MHD_post_process(processor, bytes, count) == .NO, failure == nil {
            fail(.malformed("The multipart body is malformed."))
        }
    }

    /// The body has ended: what it held, or why it is refused.
    func finish() -> Result<Upload, Failure> {
        if failure == nil, let processor {
            self.processor = nil
            let clean = MHD_destroy_post_processor(processor) == .YES
            if !clean || (bodyBytes > 0 && !sawPart) {
                fail(.malformed("The multipart body ends before its closing boundary."))
            } else {
                completeCurrent()
            }
        }
        if let failure { return .failure(failure) }
        return .success(Upload(fields: fields, files: files))
    }

    /// Destroys the post processor and removes every spool file this request created. Called
    /// when the request ends, however it ends; more calls do nothing.
    func discard() {
        if let processor {
            self.processor = nil
            _ = MHD_destroy_post_processor(processor)
        }
        current = nil
        for spool in spools { spool.remove() }
        spools = []
    }

    private func fail(_ failure: Failure) {
        guard self.failure == nil else { return }
        self.failure = failure
        // The partial upload goes at once, not only when the connection is done.
        current = nil
        for spool in spools { spool.remove() }
        spools = []
    }

    // MARK: - The post processor's iterator

    private static let iterator: MHD_PostDataIterator = { cls, _, key, filename, contentType, _, data, offset, size in
        guard let cls else { return .NO }
        let reader = Unmanaged<MultipartReader>.fromOpaque(cls).takeUnretainedValue()
        return reader.receive(
            name: key.map { String(cString: $0) } ?? "", filename: filename, contentType: contentType, data: data, offset: offset, size: size)
            ? .YES : .NO
    }

    /// One call of the iterator: a piece of a part's value at `offset` within it.
    ///
    /// libmicrohttpd announces no part boundaries: a part starts where `offset` is 0. Its first
    /// call may carry no bytes (when the value's start has not arrived yet, or the value is
    /// empty), and the next then comes at offset 0 again; so a call at offset 0 continues the
    /// current part while that part has no bytes yet. An empty part followed by another of the
    /// same name is therefore read as one part: harmless, the bytes read are the bytes kept.
    private func receive(
        name: String, filename: UnsafePointer<CChar>?, contentType: UnsafePointer<CChar>?, data: UnsafePointer<CChar>?, offset: UInt64, size: Int
    ) -> Bool {
        guard failure == nil else { return false }
        if offset == 0, !(current.map { $0.isEmpty && partName($0) == name } ?? false) {
            completeCurrent()
            guard failure == nil, startPart(name: name, filename: filename, contentType: contentType) else { return false }
        }
        guard size > 0, let data else { return true }
        let bytes = UnsafeRawBufferPointer(start: data, count: size)
        switch current {
        case .file(let writer, _, _):
            guard writer.size + size <= form.maxFileBytes else {
                exceededFileLimit = true
                fail(.tooLarge)
                return false
            }
            if let error = writer.write(bytes) {
                fail(.spoolFailed(error))
                return false
            }
        case .field(let fieldName, var value):
            guard value.count + size <= form.maxFieldBytes else {
                fail(.malformed("The field \(Self.quoted(fieldName)) is longer than \(form.maxFieldBytes) bytes."))
                return false
            }
            current = nil  // keeps `value` uniquely referenced while it grows
            value.append(contentsOf: bytes)
            current = .field(fieldName, value)
        case nil:
            return false
        }
        return true
    }

    private func partName(_ part: Part) -> String {
        switch part {
        case .file(let writer, _, _): writer.field
        case .field(let name, _): name
        }
    }

    private func startPart(name: String, filename: UnsafePointer<CChar>?, contentType: UnsafePointer<CChar>?) -> Bool {
        sawPart = true
        if form.fileFields.contains(name) {
            guard !files.contains(where: { $0.field == name }) else {
                fail(.malformed("The field \(Self.quoted(name)) holds more than one file."))
                return false
            }
            let writer: SpoolWriter
            switch SpoolWriter.create(in: spoolDirectory, field: name) {
            case .success(let created): writer = created
            case .failure(let error):
                fail(.spoolFailed(error.description))
                return false
            }
            spools.append(writer)
            current = .file(writer, filename: filename.map { String(cString: $0) }, contentType: contentType.map { String(cString: $0) })
        } else {
            guard fields[name] == nil else {
                fail(.malformed("The field \(Self.quoted(name)) is sent more than once."))
                return false
            }
            guard fields.count < form.maxFields else {
                fail(.malformed("The form has more than \(form.maxFields) fields."))
                return false
            }
            current = .field(name, [])
        }
        return true
    }

    /// The current part has ended: a file is closed and listed, a text field checked and kept.
    private func completeCurrent() {
        guard let part = current else { return }
        current = nil
        switch part {
        case .file(let writer, let filename, let contentType):
            if let error = writer.close() { return fail(.spoolFailed(error)) }
            files.append(
                SpooledFile(
                    field: writer.field, filename: filename, declaredContentType: contentType, size: writer.size, sha256: writer.digest,
                    path: writer.path))
        case .field(let name, let bytes):
            guard let text = String(validating: bytes, as: UTF8.self), !bytes.contains(0) else {
                return fail(.malformed("The field \(Self.quoted(name)) is not UTF-8 text without U+0000."))
            }
            fields[name] = text
        }
    }

    private static func quoted(_ name: String) -> String {
        "\"" + String(name.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }.prefix(64)) + "\""
    }
}

/// A spool file being written: created 0600 with a random name, hashed and counted as it
/// grows, removed at the end of the request unless the receiver renamed it away.
final class SpoolWriter {
    let field: String
    let path: String
    private(set) var size = 0
    private(set) var digest: [UInt8] = []
    private var fd: Int32
    private let hasher = SHA256Hasher()
    /// The file's identity, so that `remove` never unlinks another file that took its path.
    private let device: UInt64
    private let inode: UInt64

    struct CreateError: Error {
        let description: String
    }

    private init(field: String, path: String, fd: Int32, device: UInt64, inode: UInt64) {
        self.field = field
        self.path = path
        self.fd = fd
        self.device = device
        self.inode = inode
    }

    static func create(in directory: String, field: String) -> Result<SpoolWriter, CreateError> {
        let path = (directory.hasSuffix("/") ? directory : directory + "/") + "gatehouse-upload-" + Digest.hex(SecureRandom.bytes(16))
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { return .failure(CreateError(description: "cannot create a spool file in \(directory): \(String(cString: strerror(errno)))")) }
        var status = stat()
        guard fstat(fd, &status) == 0 else {
            let reason = String(cString: strerror(errno))
            _ = Glibc.close(fd)
            unlink(path)
            return .failure(CreateError(description: "cannot stat the spool file: \(reason)"))
        }
        return .success(SpoolWriter(field: field, path: path, fd: fd, device: UInt64(status.st_dev), inode: UInt64(status.st_ino)))
    }

    /// Appends `bytes`; an error text if they could not all be written.
    func write(_ bytes: UnsafeRawBufferPointer) -> String? {
        var offset = 0
        while offset < bytes.count {
            let written = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                return "cannot write the spool file: \(String(cString: strerror(errno)))"
            }
            offset += written
        }
        hasher.update(bytes)
        size += bytes.count
        return nil
    }

    /// Ends the writing; an error text if the data may not be on disk whole.
    func close() -> String? {
        digest = hasher.finish()
        guard fd >= 0 else { return nil }
        let result = Glibc.close(fd)
        fd = -1
        return result == 0 ? nil : "cannot close the spool file: \(String(cString: strerror(errno)))"
    }

    /// Closes and unlinks the file, if `path` is still this file.
    func remove() {
        if fd >= 0 {
            _ = Glibc.close(fd)
            fd = -1
        }
        var status = stat()
        if lstat(path, &status) == 0, UInt64(status.st_dev) == device, UInt64(status.st_ino) == inode {
            unlink(path)
        }
    }

    deinit {
        if fd >= 0 { _ = Glibc.close(fd) }
    }
}
