#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a file of newline-delimited lines (NDJSON) one line at a time, holding one read buffer
/// and one line, never the file. A line longer than ``maxLineBytes`` comes back as ``Line/tooLong``
/// (its bytes skipped to the next newline). Lines are numbered from 1 as in an editor; a `\r`
/// before the `\n` is dropped.
public final class NDJSONLines {
    /// One line of the file.
    public enum Line {
        case text(number: Int, bytes: [UInt8])
        case tooLong(number: Int)
    }

    /// A file that cannot be opened or read.
    public struct ReadError: Error, CustomStringConvertible, Sendable {
        public let description: String
    }

    /// The longest line kept: an import line with 4 KiB of `app_metadata` (written with escapes),
    /// a hash and names fits many times over.
    public static let maxLineBytes = 256 * 1024
    private static let chunkBytes = 64 * 1024

    private let fd: Int32
    private var buffer: [UInt8] = []
    private var start = 0
    private var ended = false
    private var number = 0

    public init(path: String) throws(ReadError) {
        fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ReadError(description: "cannot open \(path): \(String(cString: strerror(errno)))") }
    }

    deinit { close(fd) }

    /// The next line, or nil at the end of the file. A last line without its newline counts.
    public func next() throws(ReadError) -> Line? {
        var skipping = false
        while true {
            if let newline = buffer[start...].firstIndex(of: 10) {
                number += 1
                defer { start = newline + 1 }
                if skipping { return .tooLong(number: number) }
                var end = newline
                if end > start, buffer[end - 1] == 13 { end -= 1 }
                return .text(number: number, bytes: Array(buffer[start..<end]))
            }
            if buffer.count - start > Self.maxLineBytes {
                // Too long: forget what is buffered and read on to its newline.
                skipping = true
                buffer.removeAll(keepingCapacity: true)
                start = 0
            }
            if ended {
                guard start < buffer.count else { return nil }
                number += 1
                defer { buffer.removeAll(); start = 0 }
                if skipping { return .tooLong(number: number) }
                return .text(number: number, bytes: Array(buffer[start...]))
            }
            try fill()
        }
    }

    /// Reads the next chunk, first dropping the lines already returned.
    private func fill() throws(ReadError) {
        if start > 0 {
            buffer.removeFirst(start)
            start = 0
        }
        let old = buffer.count
        buffer.append(contentsOf: repeatElement(0, count: Self.chunkBytes))
        var count = 0
        while true {
            count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + old, Self.chunkBytes) }
            if count < 0, errno == EINTR { continue }
            break
        }
        guard count >= 0 else {
            buffer.removeLast(Self.chunkBytes)
            throw ReadError(description: "cannot read the file: \(String(cString: strerror(errno)))")
        }
        buffer.removeLast(Self.chunkBytes - count)
        if count == 0 { ended = true }
    }

    /// Whether `bytes` hold nothing but spaces and tabs (a blank line: ignored).
    public static func isBlank(_ bytes: [UInt8]) -> Bool {
        bytes.allSatisfy { $0 == 32 || $0 == 9 }
    }
}
