/// The type of a file's content, from its bytes only (never its name or the type a client sent).
/// JPEG, PNG, GIF and WebP are recognised by their signatures and checked further where cheap;
/// anything else is `application/octet-stream`. A truncated JPEG (no end-of-image marker), PNG
/// (no `IEND` chunk last) or WebP (shorter than its RIFF header says) is not recognised, so it is
/// refused as a photo. A GIF is not checked past its logical screen: a GIF header before an HTML
/// body is `image/gif`, and served as that with `nosniff` it is only ever an image.
public enum ContentSniffer {
    public static let octetStream = "application/octet-stream"
    /// The types recognised: the image types a photo may be.
    public static let imageTypes: Set<String> = ["image/jpeg", "image/png", "image/gif", "image/webp"]

    /// Bytes read from the start of a file: enough for every check below.
    public static let headBytes = 64
    /// Bytes read from the end of a file.
    public static let tailBytes = 64

    /// The type of a file whose first bytes are `head`, last bytes `tail` (they may overlap in a
    /// small file) and whose size is `size`.
    public static func sniff(head: [UInt8], tail: [UInt8], size: Int64) -> String {
        if isJPEG(head, tail) { return "image/jpeg" }
        if isPNG(head, tail) { return "image/png" }
        if isGIF(head) { return "image/gif" }
        if isWebP(head, size: size) { return "image/webp" }
        return octetStream
    }

    /// The type of a whole file in memory.
    public static func sniff(_ bytes: [UInt8]) -> String {
        sniff(head: Array(bytes.prefix(headBytes)), tail: Array(bytes.suffix(tailBytes)), size: Int64(bytes.count))
    }

    /// The type of a local file (an upload spooled by the HTTP layer).
    public static func sniff(path: String) throws -> String {
        let head = try FileBlobReader(path: path, length: Int64(headBytes))
        defer { head.close() }
        let size = try FileBlobReader(path: path).size
        let tail = try FileBlobReader(path: path, offset: max(0, size - Int64(tailBytes)))
        defer { tail.close() }
        return sniff(head: try head.readAll(), tail: try tail.readAll(), size: size)
    }

    // SOI (FF D8) and the first marker's FF; EOI (FF D9) last, after any zero padding.
    private static func isJPEG(_ head: [UInt8], _ tail: [UInt8]) -> Bool {
        guard head.count >= 4, head[0] == 0xFF, head[1] == 0xD8, head[2] == 0xFF else { return false }
        var end = tail[...]
        while end.last == 0 { end = end.dropLast() }
        return end.count >= 2 && end[end.endIndex - 2] == 0xFF && end[end.endIndex - 1] == 0xD9
    }

    private static let pngSignature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
    private static let pngEnd: [UInt8] = [0, 0, 0, 0, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82]

    // The signature, then IHDR first (13 bytes of data) with a sane size and a valid bit depth for
    // its colour type; the IEND chunk last.
    private static func isPNG(_ head: [UInt8], _ tail: [UInt8]) -> Bool {
        guard head.count >= 33, Array(head[0..<8]) == pngSignature, Array(head[8..<16]) == [0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52] else { return false }
        let width = bigEndian(head[16..<20])
        let height = bigEndian(head[20..<24])
        guard (1...100_000).contains(width), (1...100_000).contains(height) else { return false }
        let depth = head[24]
        let allowed: [UInt8: [UInt8]] = [0: [1, 2, 4, 8, 16], 2: [8, 16], 3: [1, 2, 4, 8], 4: [8, 16], 6: [8, 16]]
        guard allowed[head[25]]?.contains(depth) == true, head[26] == 0, head[27] == 0, head[28] <= 1 else { return false }
        return tail.count >= pngEnd.count && Array(tail.suffix(pngEnd.count)) == pngEnd
    }

    // GIF87a or GIF89a, then a logical screen of non-zero width and height.
    private static func isGIF(_ head: [UInt8]) -> Bool {
        guard head.count >= 13, Array(head[0..<6]) == Array("GIF87a".utf8) || Array(head[0..<6]) == Array("GIF89a".utf8) else { return false }
        let width = Int(head[6]) | Int(head[7]) << 8
        let height = Int(head[8]) | Int(head[9]) << 8
        return width > 0 && height > 0
    }

    // RIFF, its size (the whole file less 8 bytes), WEBP, then a VP8, VP8L or VP8X chunk.
    private static func isWebP(_ head: [UInt8], size: Int64) -> Bool {
        guard head.count >= 16, Array(head[0..<4]) == Array("RIFF".utf8), Array(head[8..<12]) == Array("WEBP".utf8) else { return false }
        let riffSize = Int64(head[4]) | Int64(head[5]) << 8 | Int64(head[6]) << 16 | Int64(head[7]) << 24
        guard riffSize + 8 == size else { return false }
        let chunk = Array(head[12..<16])
        return chunk == Array("VP8 ".utf8) || chunk == Array("VP8L".utf8) || chunk == Array("VP8X".utf8)
    }

    private static func bigEndian(_ bytes: ArraySlice<UInt8>) -> Int {
        bytes.reduce(0) { $0 << 8 | Int($1) }
    }
}
