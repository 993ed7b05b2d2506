@testable import GatehouseImaging
import GatehouseTesting
import Testing

/// libvips is opened by name at the first photo (ADR 0025); a library that is missing, or is not
/// libvips, is a reason given, not a crash.
@Suite("Loading libvips")
struct PhotoCodecLoadingTests {
    @Test
    func aMissingLibraryOrOneWithoutLibvipsFunctionsIsAReason() {
        let missing = PhotoCodec.load("libvips-not-installed.so.42")
        #expect(missing?.hasPrefix("cannot load libvips-not-installed.so.42: ") == true, "\(missing ?? "nil")")
        #expect(PhotoCodec.load("libz.so.1") == "libz.so.1 has no vips_init")
    }

    @Test
    func photosAreReencodedOnceLoaded() throws {
        let png = TinyImages.image(width: 40, height: 30, type: "image/png")
        let photo = try PhotoCodec.normalise(png)
        #expect(photo.contentType == "image/png")
        #expect(PhotoCodec.dimensions(photo.bytes).map { [$0.width, $0.height] } == [40, 30])
        #expect(PhotoCodec.load(PhotoCodec.library) == nil, "loaded once; a second call changes nothing")
    }
}
