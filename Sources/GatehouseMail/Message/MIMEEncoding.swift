import Foundation

/// The encodings a message is rendered with. Every output is 7-bit ASCII without CR, LF or NUL
/// except the CRLF line breaks these functions place themselves.
enum MIMEEncoding {
    /// `text` as one or more RFC 2047 encoded words (`=?UTF-8?B?…?=`), each at most 75
    /// characters, joined by CRLF SP (header folding), so that no line is over 78 characters
    /// when the first follows `firstLineUsed` characters (`"Subject: "`). Words break between
    /// Unicode scalars, never inside one.
    static func encodedWords(_ text: String, firstLineUsed: Int = 1) -> String {
        // A word is 12 characters ("=?UTF-8?B?", "?=") and 4 of base64 per 3 bytes; a folded
        // line has 1 space before it: at most 45 bytes (72 characters).
        func capacity(_ used: Int) -> Int { min(45, 3 * ((78 - used - 12) / 4)) }
        var maxBytes = capacity(firstLineUsed)
        var words: [String] = []
        var chunk: [UInt8] = []
        for scalar in text.unicodeScalars {
            let bytes = Array(String(scalar).utf8)
            if chunk.count + bytes.count > maxBytes, !chunk.isEmpty {
                maxBytes = capacity(1)
                words.append(word(chunk))
                chunk = []
            }
            chunk += bytes
        }
        if !chunk.isEmpty || words.isEmpty { words.append(word(chunk)) }
        return words.joined(separator: "\r\n ")
    }

    private static func word(_ bytes: [UInt8]) -> String {
        "=?UTF-8?B?" + Data(bytes).base64EncodedString() + "?="
    }

    /// Whether `text` may stand as it is in an unstructured header of `fieldName` (a short line of
    /// printable ASCII that a decoder cannot mistake for an encoded word).
    static func isPlainHeaderText(_ text: String, fieldName: String) -> Bool {
        let bytes = Array(text.utf8)
        return fieldName.utf8.count + 2 + bytes.count <= 78
            && bytes.allSatisfy { (0x20...0x7E).contains($0) }
            && !text.contains("=?")
            && bytes.first != 0x20 && bytes.last != 0x20
    }

    /// A display name as a quoted string when it is printable ASCII, else as encoded words that
    /// fit after `fieldName` and its colon.
    static func displayName(_ name: String, fieldName: String = "From") -> String {
        let bytes = Array(name.utf8)
        if bytes.count <= 60, bytes.allSatisfy({ (0x20...0x7E).contains($0) }), !name.contains("=?") {
            var quoted = "\""
            for character in name {
                if character == "\"" || character == "\\" { quoted.append("\\") }
                quoted.append(character)
            }
            return quoted + "\""
        }
        return encodedWords(name, firstLineUsed: fieldName.utf8.count + 2)
    }

    /// `text` as quoted-printable (RFC 2045 §6.7): its line breaks (CRLF, CR or LF) become CRLF,
    /// lines are at most 76 characters (soft breaks `=` CRLF), `=`, bytes outside printable ASCII,
    /// a space or tab at the end of a line and a `.` starting a line are written `=XX`.
    static func quotedPrintable(_ text: String) -> String {
        let normalised = text.replacingOccurrences(of: "\r\n", with: "\n").replacingOccurrences(of: "\r", with: "\n")
        let lines = normalised.split(separator: "\n", omittingEmptySubsequences: false)
        var out: [String] = []
        for line in lines {
            let bytes = Array(line.utf8)
            var tokens: [String] = []
            for (i, byte) in bytes.enumerated() {
                let atEnd = i == bytes.count - 1
                let literal: Bool
                switch byte {
                case 0x20, 0x09: literal = !atEnd
                case 0x2E: literal = i != 0
                case 0x3D: literal = false
                case 0x21...0x7E: literal = true
                default: literal = false
                }
                tokens.append(literal ? String(UnicodeScalar(byte)) : hex(byte))
            }
            // Soft line breaks: at most 75 characters before the "=".
            var current = ""
            for token in tokens {
                if current.utf8.count + token.utf8.count > 75 {
                    out.append(current + "=")
                    current = ""
                }
                current += token
            }
            out.append(current)
        }
        return out.joined(separator: "\r\n")
    }

    private static func hex(_ byte: UInt8) -> String {
        let digits = Array("0123456789ABCDEF")
        return "=" + String(digits[Int(byte >> 4)]) + String(digits[Int(byte & 0xF)])
    }
}
