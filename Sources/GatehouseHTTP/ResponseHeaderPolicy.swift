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
        var name = name, value = value
        guard !name.isEmpty, name.withUTF8({ $0.allSatisfy { tokenBytes[Int($0)] } }) else { return false }
        guard value.withUTF8({ $0.allSatisfy { $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) } }) else { return false }
        return !framing.contains { HTTPHeaders.namesMatch($0, name) }
    }

    /// Whether each byte may appear in a token (RFC 9110, 5.6.2), by table: every response
    /// header passes through here.
    private static let tokenBytes: [Bool] = (0...255).map { byte in
        switch UInt8(byte) {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default:
            "!#$%&'*+-.^_`|~".utf8.contains(UInt8(byte))
        }
    }
}
