import CVips

/// Why a photo was not re-encoded.
public enum PhotoCodecError: Error, Equatable, CustomStringConvertible {
    /// Not an image of a photo type libvips can read (damaged, truncated, or another format).
    case unreadable
    /// More pixels than allowed, as declared by its header (nothing was decoded) or decoded.
    case tooManyPixels(width: Int, height: Int)
    /// libvips could not start or encode: a fault of the server, not of the image.
    case failed(String)

    public var description: String {
        switch self {
        case .unreadable: "not a readable image"
        case .tooManyPixels(let width, let height): "an image of \(width)×\(height) pixels"
        case .failed(let reason): "libvips: \(reason)"
        }
    }
}

/// Decodes a photo and encodes it anew with libvips (ADR 0025): what is stored is pixels only —
/// no EXIF, GPS, XMP, ICC profile or comment survives, nor anything hidden after the image — with
/// its longest side at most ``maxSide``. The header is read first, so an image declaring more than
/// ``maxPixels`` is refused before a pixel is decoded. JPEG, PNG and WebP stay what they were; a
/// GIF becomes a PNG (its first frame). Synchronous and CPU-bound: callers run it off the HTTP
/// workers (``GatehouseCore/PhotoProcessor``).
public enum PhotoCodec {
    /// The most pixels a photo may have (width × height), declared or decoded: 40 megapixels.
    public static let maxPixels = 40_000_000
    /// The longest side of a stored photo.
    public static let maxSide = 1024

    /// The library opened at the first photo (ADR 0025): Debian's `libvips42`.
    static let library = "libvips.so.42"

    /// Opens libvips and starts it, the first time (``gh_vips_start``): no cache, one thread per
    /// pipeline, only the photo loaders. nil once started, or why it could not be: a library that
    /// could not be opened is tried again at the next photo.
    static func start() -> String? {
        reason { gh_vips_start(library, $0, $1) }
    }

    /// Test support: whether `library` opens and has libvips' functions; nil, or why not.
    static func check(_ library: String) -> String? {
        reason { gh_vips_check(library, $0, $1) }
    }

    private static func reason(_ call: (UnsafeMutablePointer<CChar>, Int) -> Int32) -> String? {
        var error = [CChar](repeating: 0, count: 512)
        let status = error.withUnsafeMutableBufferPointer { call($0.baseAddress!, $0.count) }
        guard status != 0 else { return nil }
        return String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The photo re-encoded, and its content type.
    public static func normalise(_ bytes: [UInt8], maxPixels: Int = maxPixels, maxSide: Int = maxSide) throws(PhotoCodecError) -> (bytes: [UInt8], contentType: String) {
        if let failure = start() { throw .failed(failure) }
        defer { gh_vips_error_clear() }
        let outcome: Result<(bytes: [UInt8], contentType: String), PhotoCodecError> = bytes.withUnsafeBytes { raw in
            guard let base = raw.baseAddress, raw.count > 0 else { return .failure(.unreadable) }
            // The header alone: libvips decodes lazily, so nothing past it is read here.
            guard let header = gh_vips_header(base, raw.count) else { return .failure(.unreadable) }
            let width = Int(gh_vips_width(header)), height = Int(gh_vips_height(header))
            let loader = gh_vips_loader(header).map { String(cString: $0) } ?? ""
            gh_vips_unref(header)
            guard width > 0, height > 0, width.multipliedReportingOverflow(by: height).partialValue <= maxPixels, width <= maxPixels, height <= maxPixels else {
                return .failure(.tooManyPixels(width: width, height: height))
            }
            guard let encoder = Encoder(loader: loader) else { return .failure(.unreadable) }
            guard let image = gh_vips_thumbnail(base, raw.count, Int32(maxSide)) else { return .failure(.unreadable) }
            defer { gh_vips_unref(image) }
            let outWidth = Int(gh_vips_width(image)), outHeight = Int(gh_vips_height(image))
            guard outWidth <= maxSide, outHeight <= maxSide else { return .failure(.tooManyPixels(width: outWidth, height: outHeight)) }
            var buffer: UnsafeMutableRawPointer?
            var length = 0
            // Pixels are decoded here, as the encoder pulls them: a damaged image fails now.
            let status: Int32 = switch encoder {
            case .jpeg: gh_vips_jpegsave(image, &buffer, &length)
            case .png: gh_vips_pngsave(image, &buffer, &length)
            case .webp: gh_vips_webpsave(image, &buffer, &length)
            }
            defer { gh_vips_free(buffer) }
            guard status == 0, let buffer, length > 0 else { return .failure(.unreadable) }
            return .success((Array(UnsafeRawBufferPointer(start: buffer, count: length)), encoder.contentType))
        }
        return try outcome.get()
    }

    /// The size an image's header declares, without decoding it; nil when libvips cannot read it.
    public static func dimensions(_ bytes: [UInt8]) -> (width: Int, height: Int)? {
        guard start() == nil else { return nil }
        defer { gh_vips_error_clear() }
        return bytes.withUnsafeBytes { raw in
            guard let base = raw.baseAddress, let header = gh_vips_header(base, raw.count) else { return nil }
            defer { gh_vips_unref(header) }
            return (Int(gh_vips_width(header)), Int(gh_vips_height(header)))
        }
    }

    /// Test support: a real image of `width` × `height` in `format` (`image/jpeg`, `image/png` or
    /// `image/webp`), made by libvips.
    public static func sample(width: Int, height: Int, format: String) -> [UInt8]? {
        guard start() == nil else { return nil }
        defer { gh_vips_error_clear() }
        let code: Int32 = switch format {
        case "image/jpeg": 0
        case "image/png": 1
        case "image/webp": 2
        default: -1
        }
        guard code >= 0 else { return nil }
        var buffer: UnsafeMutableRawPointer?
        var length = 0
        guard gh_vips_make_test_image(Int32(width), Int32(height), code, &buffer, &length) == 0, let buffer else { return nil }
        defer { gh_vips_free(buffer) }
        return Array(UnsafeRawBufferPointer(start: buffer, count: length))
    }

    private enum Encoder {
        case jpeg, png, webp

        /// From the loader's nickname (`jpegload_buffer`, …); a GIF is stored as a PNG.
        init?(loader: String) {
            switch loader {
            case "jpegload_buffer": self = .jpeg
            case "pngload_buffer", "gifload_buffer": self = .png
            case "webpload_buffer": self = .webp
            default: return nil
            }
        }

        var contentType: String {
            switch self {
            case .jpeg: "image/jpeg"
            case .png: "image/png"
            case .webp: "image/webp"
            }
        }
    }
}
