import GatehouseImaging

/// Tiny real images, made in the test (the server checks an upload's bytes, and decodes photos).
public enum TinyImages {
    /// A PNG declaring `width` × `height` (RGBA, 8 bits), its chunks' CRCs right. Its pixels are
    /// there (transparent) when it has at most 65,536 of them; a larger one carries a single
    /// pixel's data, for tests of what is refused from the header alone.
    public static func png(width: UInt32 = 1, height: UInt32 = 1) -> [UInt8] {
        func be(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
            let body = Array(type.utf8) + data
            return be(UInt32(data.count)) + body + be(crc32(body))
        }
        let ihdr = be(width) + be(height) + [8, 6, 0, 0, 0]
        let pixels = UInt64(width) * UInt64(height)
        let rows = pixels > 0 && pixels <= 65_536 ? Int(height) : 1
        let rowBytes = pixels > 0 && pixels <= 65_536 ? Int(width) * 4 : 4
        let raw = [UInt8](repeating: 0, count: rows * (1 + rowBytes))  // filter 0, transparent black
        return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + chunk("IHDR", ihdr) + chunk("IDAT", zlibStored(raw)) + chunk("IEND", [])
    }

    /// A 1×1 JPEG made by libvips.
    public static let jpeg: [UInt8] = PhotoCodec.sample(width: 1, height: 1, format: "image/jpeg")!
    public static let gif: [UInt8] = Array("GIF89a".utf8) + [1, 0, 1, 0, 0x80, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF] + [0x2C, 0, 0, 0, 0, 1, 0, 1, 0, 0, 2, 2, 0x44, 1, 0, 0x3B]
    public static func webp() -> [UInt8] {
        let body: [UInt8] = Array("WEBP".utf8) + Array("VP8L".utf8) + [5, 0, 0, 0, 0x2F, 0, 0, 0, 0, 0]
        let size = UInt32(body.count)
        return Array("RIFF".utf8) + [UInt8(size & 0xFF), UInt8(size >> 8 & 0xFF), UInt8(size >> 16 & 0xFF), UInt8(size >> 24)] + body
    }

    /// A real image of `width` × `height` in `type` (`image/jpeg`, `image/png`, `image/webp`), made by libvips.
    public static func image(width: Int, height: Int, type: String) -> [UInt8] {
        PhotoCodec.sample(width: width, height: height, format: type)!
    }

    /// `jpeg` with an APP1 Exif segment (camera make, GPS position, and `marker` as the image
    /// description) and a comment (`COM`, `marker` again) right after its start-of-image marker.
    public static func withEXIF(_ jpeg: [UInt8], marker: String) -> [UInt8] {
        func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF)] }
        func le32(_ v: Int) -> [UInt8] { le16(v & 0xFFFF) + le16(v >> 16) }
        func entry(_ tag: Int, _ type: Int, _ count: Int, _ value: [UInt8]) -> [UInt8] { le16(tag) + le16(type) + le32(count) + value }
        let text = Array(marker.utf8) + [0]
        // TIFF, little-endian: IFD0 at 8 with ImageDescription, Make and the GPS IFD pointer; the
        // GPS IFD with latitude ref and latitude; the values after the IFDs.
        let ifd0Offset = 8, ifd0Size = 2 + 3 * 12 + 4
        let gpsOffset = ifd0Offset + ifd0Size, gpsSize = 2 + 2 * 12 + 4
        let descriptionOffset = gpsOffset + gpsSize
        let make = Array("GatehouseCam".utf8) + [0]
        let makeOffset = descriptionOffset + text.count
        let latitudeOffset = makeOffset + make.count
        var tiff: [UInt8] = Array("II".utf8) + le16(42) + le32(ifd0Offset)
        tiff += le16(3)
        tiff += entry(0x010E, 2, text.count, le32(descriptionOffset))
        tiff += entry(0x010F, 2, make.count, le32(makeOffset))
        tiff += entry(0x8825, 4, 1, le32(gpsOffset))
        tiff += le32(0)
        tiff += le16(2)
        tiff += entry(0x0001, 2, 2, Array("N".utf8) + [0, 0, 0])
        tiff += entry(0x0002, 5, 3, le32(latitudeOffset))
        tiff += le32(0)
        tiff += text + make
        tiff += le32(37) + le32(1) + le32(33) + le32(1) + le32(1234) + le32(100)
        let exif = Array("Exif".utf8) + [0, 0] + tiff
        let app1: [UInt8] = [0xFF, 0xE1, UInt8((exif.count + 2) >> 8), UInt8((exif.count + 2) & 0xFF)] + exif
        let comment: [UInt8] = [0xFF, 0xFE, UInt8((marker.utf8.count + 2) >> 8), UInt8((marker.utf8.count + 2) & 0xFF)] + Array(marker.utf8)
        return Array(jpeg.prefix(2)) + app1 + comment + Array(jpeg.dropFirst(2))
    }

    /// zlib with stored (uncompressed) deflate blocks.
    private static func zlibStored(_ data: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [0x78, 0x01]
        var rest = data[...]
        repeat {
            let block = rest.prefix(65_535)
            rest = rest.dropFirst(block.count)
            let n = block.count
            out += [rest.isEmpty ? 1 : 0, UInt8(n & 0xFF), UInt8(n >> 8), UInt8(~n & 0xFF), UInt8(~n >> 8 & 0xFF)] + block
        } while !rest.isEmpty
        var a: UInt32 = 1, b: UInt32 = 0
        for byte in data {
            a = (a + UInt32(byte)) % 65_521
            b = (b + a) % 65_521
        }
        let adler = b << 16 | a
        return out + [UInt8(adler >> 24), UInt8(adler >> 16 & 0xFF), UInt8(adler >> 8 & 0xFF), UInt8(adler & 0xFF)]
    }

    private static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }
}
