import Foundation
@testable import GatehouseImaging
import GatehouseTesting
import Testing

/// libvips is opened by name at the first photo (ADR 0025); a library that is missing, or is not
/// libvips, is a reason given, not a crash; and only the photo loaders run once it is started.
@Suite("Loading libvips")
struct PhotoCodecLoadingTests {
    /// A 2 × 2 grey TIFF, uncompressed: libvips' `tiffload_buffer` reads it when not blocked
    /// (`vipsheader` gives "2x2 uchar, 1 band, b-w, tiffload").
    static let tiff: [UInt8] = {
        let entries: [(tag: UInt16, type: UInt16, value: UInt32)] = [
            (256, 3, 2), (257, 3, 2), (258, 3, 8), (259, 3, 1), (262, 3, 1), (273, 4, 110), (278, 3, 2), (279, 4, 4),
        ]
        func le<T: FixedWidthInteger>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value.littleEndian) { Array($0) } }
        var bytes: [UInt8] = Array("II".utf8) + le(UInt16(42)) + le(UInt32(8)) + le(UInt16(entries.count))
        for entry in entries {
            bytes += le(entry.tag) + le(entry.type) + le(UInt32(1))
            bytes += entry.type == 3 ? le(UInt16(entry.value)) + [0, 0] : le(entry.value)
        }
        return bytes + le(UInt32(0)) + [0x10, 0x80, 0xC0, 0xFF]
    }()

    @Test
    func aMissingLibraryOrOneWithoutLibvipsFunctionsIsAReason() {
        let missing = PhotoCodec.check("libvips-not-installed.so.42")
        #expect(missing?.hasPrefix("cannot load libvips-not-installed.so.42: ") == true, "\(missing ?? "nil")")
        #expect(PhotoCodec.check("libz.so.1") == "libz.so.1 has no vips_init")
        #expect(PhotoCodec.check(PhotoCodec.library) == nil)
    }

    @Test
    func photosAreReencodedAndOtherLoadersAreBlocked() throws {
        let png = TinyImages.image(width: 40, height: 30, type: "image/png")
        let photo = try PhotoCodec.normalise(png)
        #expect(photo.contentType == "image/png")
        #expect(PhotoCodec.dimensions(photo.bytes).map { [$0.width, $0.height] } == [40, 30])

        // A TIFF is a well-formed image libvips can read, but its loader is blocked: not even its
        // header is read.
        #expect(Self.tiff.count == 114 && Self.tiff.starts(with: [0x49, 0x49, 0x2A, 0x00]))
        #expect(PhotoCodec.dimensions(Self.tiff) == nil)
        #expect(throws: PhotoCodecError.unreadable) { try PhotoCodec.normalise(Self.tiff) }
    }

    /// The plug-in modules (ImageMagick, PDF, HEIF, JPEG XL, OpenSlide) are not loaded: their
    /// folder is under VIPSHOME, which is /dev/null from the process's start.
    @Test
    func libvipsPlugInModulesAreNeverLoaded() throws {
        _ = try PhotoCodec.normalise(TinyImages.image(width: 8, height: 8, type: "image/jpeg"))
        #expect(String(cString: getenv("VIPSHOME")) == "/dev/null")
        let maps = try #require(FileHandle(forReadingAtPath: "/proc/self/maps")).readDataToEndOfFile()
        let text = String(decoding: maps, as: UTF8.self)
        #expect(text.contains("/libvips.so.42"), "libvips itself is loaded")
        #expect(!text.contains("vips-modules"), "no plug-in module is")
    }
}
