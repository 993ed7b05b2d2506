import Foundation

/// File names as clients send them, made safe to store, list and send back.
public enum FileName {
    /// The name a file gets when the client sent none, or nothing was left of it.
    public static let fallback = "file"

    /// No path (the last component after `/` or `\`), no control or format characters
    /// (``InputRules/hasControlOrFormatCharacters(_:)``: bidi overrides, zero-width characters),
    /// trimmed, at most 255 bytes of UTF-8 cut on a character boundary; `.` and `..` and an empty
    /// result are ``fallback``.
    public static func sanitise(_ raw: String?) -> String {
        guard let raw else { return fallback }
        let lastComponent = raw.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "/" || $0 == "\\" }).last.map(String.init) ?? ""
        var kept = ""
        for character in lastComponent where !InputRules.hasControlOrFormatCharacters(String(character)) {
            kept.append(character)
        }
        var name = kept.trimmingCharacters(in: .whitespacesAndNewlines)
        if name.utf8.count > 255 {
            var cut = ""
            for character in name {
                guard cut.utf8.count + String(character).utf8.count <= 255 else { break }
                cut.append(character)
            }
            name = cut.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        return name.isEmpty || name == "." || name == ".." ? fallback : name
    }

    /// A `Content-Disposition` value for serving a file (RFC 6266): `inline` for the image types
    /// the sniffer recognises (a browser shows them, and with `nosniff` never runs them),
    /// `attachment` for everything else (a download, never a page of this origin). The name twice:
    /// `filename="…"` in ASCII, every other character, quote, backslash and `%` as `_`, for old
    /// clients; and `filename*=UTF-8''…` percent-encoded (RFC 8187), which current clients prefer.
    public static func contentDisposition(name: String, contentType: String) -> String {
        let disposition = ContentSniffer.imageTypes.contains(contentType) ? "inline" : "attachment"
        let name = sanitise(name)
        var ascii = ""
        for scalar in name.unicodeScalars {
            ascii.append(scalar.isASCII && scalar.value >= 0x20 && scalar.value < 0x7F && !"\"\\%".unicodeScalars.contains(scalar) ? Character(scalar) : "_")
        }
        var encoded = ""
        for byte in name.utf8 {
            if isAttributeCharacter(byte) {
                encoded.append(Character(Unicode.Scalar(byte)))
            } else {
                encoded += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return "\(disposition); filename=\"\(ascii)\"; filename*=UTF-8''\(encoded)"
    }

    // RFC 8187 attr-char: ALPHA / DIGIT / "!" / "#" / "$" / "&" / "+" / "-" / "." / "^" / "_" / "`" / "|" / "~"
    private static func isAttributeCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "+"), UInt8(ascii: "-"),
            UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            true
        default: false
        }
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
