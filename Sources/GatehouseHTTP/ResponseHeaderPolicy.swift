/// Which response header fields may be sent.
enum ResponseHeaderPolicy {
    /// Fields libmicrohttpd writes itself; a second copy would corrupt the framing.
    private static let framing: [String] = ["Content-Length", "Transfer-Encoding"]

    /// Fields every answer of ours carries unless the responder set them: a browser must not
    /// sniff an error page or a JSON body into HTML or script. (libmicrohttpd's own answers —
    /// its 400 for a missing Host, its 431/414 past the memory limit — cannot be given headers.)
    static let always: [(name: String, value: String)] = [("X-Content-Type-Options", "nosniff")]

    /// A name must be a token; a value must not contain CR, LF, NUL or other control
    /// characters but tab (no header splitting, no truncation at NUL in C).
    static func allows(name: String, value: String) -> Bool {
        guard !name.isEmpty, name.utf8.allSatisfy(isTokenByte) else { return false }
        guard value.utf8.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else { return false }
        return !framing.contains { HTTPHeaders.namesMatch($0, name) }
    }

    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default:
            "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}
