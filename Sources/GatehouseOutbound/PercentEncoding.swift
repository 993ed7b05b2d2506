/// Strict percent-encoding for URL query and form values: everything but RFC 3986's unreserved
/// characters (`A–Z a–z 0–9 - . _ ~`) is encoded as `%XX` of its UTF-8 bytes, so `&`, `=`, `+`,
/// `/`, `?`, `#` and space (`%20`) can never change the meaning of the surrounding query.
public enum PercentEncoding {
    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    public static func encode(_ value: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(value.utf8.count)
        for byte in value.utf8 {
            if isUnreserved(byte) {
                out.append(byte)
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(hexDigits[Int(byte >> 4)])
                out.append(hexDigits[Int(byte & 0x0F)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `name=value&name=value` with both sides encoded.
    public static func form(_ fields: [(String, String)]) -> String {
        fields.map { "\(encode($0.0))=\(encode($0.1))" }.joined(separator: "&")
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"):
            true
        default:
            false
        }
    }
}
