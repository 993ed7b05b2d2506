import Foundation

/// Reads a raw email with Python's `email` package (policy `default`: RFC 5322 and MIME, RFC 2047
/// decoding), not with Gatehouse's code, and reports what a mail client would see. A message
/// whose header holds bytes outside ASCII is read as RFC 6532 (UTF-8 header fields, as sent with
/// SMTPUTF8): decoded as UTF-8 (invalid UTF-8 fails the parse), and Python's
/// `NonASCIILocalPartDefect`, which its address parser reports even where RFC 6532 allows such a
/// local part, is not counted among the defects.
public enum IndependentMailParser {
    /// What Python made of a message.
    public struct Parsed: Decodable, Sendable {
        /// Header names in order, as they appear.
        public let headerNames: [String]
        /// Decoded header values by name (the first of each name).
        public let headers: [String: String]
        /// `[display name, address]` of each mailbox in `From` and `To`.
        public let from: [[String]]
        public let to: [[String]]
        /// The raw `From` value decoded by `email.header.decode_header` (RFC 2047 as written:
        /// white space between adjacent encoded words dropped), unfolded.
        public let decodedFrom: String
        public let contentType: String
        /// Each part of a multipart message, in order.
        public let parts: [Part]
        /// Every defect Python's parser noticed in the message, its headers and its parts.
        public let defects: [String]
        /// The longest line in bytes, without its CRLF.
        public let longestLine: Int
        /// A CR or LF not part of a CRLF pair.
        public let bareLineBreaks: Int
        /// Bytes outside 7-bit ASCII.
        public let eightBitBytes: Int
        /// The header holds bytes outside ASCII (UTF-8 header fields, RFC 6532).
        public let utf8Headers: Bool

        public struct Part: Decodable, Sendable {
            public let contentType: String
            public let charset: String?
            public let transferEncoding: String?
            /// The decoded text, line breaks as LF.
            public let content: String
        }

        enum CodingKeys: String, CodingKey {
            case headerNames = "header_names", headers, from, to, decodedFrom = "decoded_from", contentType = "content_type", parts, defects
            case longestLine = "longest_line", bareLineBreaks = "bare_line_breaks", eightBitBytes = "eight_bit_bytes"
            case utf8Headers = "utf8_headers"
        }
    }

    static let script = #"""
        import email, json, re, sys
        from email import policy
        from email.header import decode_header, make_header
        raw = open(sys.argv[1], "rb").read()
        utf8_headers = any(b > 127 for b in raw.split(b"\r\n\r\n", 1)[0])
        if utf8_headers:
            message = email.message_from_string(raw.decode("utf-8"), policy=policy.default)
        else:
            message = email.message_from_bytes(raw, policy=policy.default)
        defects = [type(d).__name__ for d in message.defects]
        headers = {}
        for name, value in message.items():
            defects += ["%s: %s" % (name, type(d).__name__) for d in getattr(value, "defects", [])
                        if not (utf8_headers and type(d).__name__ == "NonASCIILocalPartDefect")]
            headers.setdefault(name, str(value))
        def mailboxes(name):
            value = message[name]
            return [[a.display_name, a.addr_spec] for a in value.addresses] if value is not None else []
        parts = []
        if message.is_multipart():
            for part in message.iter_parts():
                defects += [type(d).__name__ for d in part.defects]
                parts.append({"contentType": part.get_content_type(), "charset": part.get_content_charset(),
                              "transferEncoding": part.get("Content-Transfer-Encoding"),
                              "content": part.get_content().replace("\r\n", "\n")})
        lines = raw.split(b"\r\n")
        print(json.dumps({
            "header_names": list(message.keys()), "headers": headers,
            "from": mailboxes("From"), "to": mailboxes("To"),
            "decoded_from": str(make_header(decode_header(dict(message.raw_items()).get("From", "").replace("\r\n", "")))),
            "content_type": message.get_content_type(), "parts": parts, "defects": defects,
            "longest_line": max(len(l) for l in lines),
            "bare_line_breaks": sum(l.count(b"\r") + l.count(b"\n") for l in lines),
            "eight_bit_bytes": sum(1 for b in raw if b > 127), "utf8_headers": utf8_headers,
        }))
        """#

    /// Parses `raw` with Python's `email` package.
    public static func parse(_ raw: [UInt8]) throws -> Parsed {
        let file = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("gatehouse-mail-\(UUID().uuidString).eml")
        try Data(raw).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let output = try ExternalProgram.run(ExternalProgram.python, ["-c", script, file.path])
        return try JSONDecoder().decode(Parsed.self, from: Data(output.utf8))
    }
}
