import Testing

@testable import GatehouseCore

/// `JSON.parse`'s direct path for flat objects of plain strings, booleans and nulls must give what
/// the full (Foundation) path gives, and leave everything else to it.
@Suite struct JSONParseTests {
    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    static func flat(_ text: String) -> JSON? { bytes(text).withUnsafeBufferPointer(JSON.flatObject) }

    @Test(arguments: [
        #"{}"#,
        #" {} "#,
        #"{"refresh_token":"abc.DEF_-123"}"#,
        "\t{ \"email\" : \"a@example.com\" ,\r\n \"password\" : \"p a s s\" }\n",
        #"{"a":"","b":true,"c":false,"d":null}"#,
        #"{"":"empty name"}"#,
        #"{"x":"{not nested}, [/]: 'quoted'"}"#,
    ])
    func flatObjectsAreReadDirectlyAsTheFullPathReadsThem(text: String) throws {
        let direct = try #require(Self.flat(text), "the direct path declined \(text)")
        #expect(direct == (try JSON.parseWithFoundation(Self.bytes(text))))
        #expect(try JSON.parse(Self.bytes(text)) == direct)
    }

    @Test(arguments: [
        #"{"n":1}"#,  // numbers: the full path decides int or double
        #"{"s":"a\"b"}"#,  // escapes
        #"{"s":"\u00e9"}"#,
        #"{"s":"é"}"#,  // non-ASCII
        #"{"o":{}}"#,  // nesting
        #"{"a":[]}"#,
        #"["a"]"#,  // not an object
        #""a""#,
        "\u{FEFF}{}",  // a byte-order mark
        "{\"a\":\"\u{7F}\"}",  // DEL, valid unescaped
    ])
    func otherValidDocumentsGoToTheFullPathWithTheSameResult(text: String) throws {
        #expect(Self.flat(text) == nil)
        // Whatever the full path makes of it (a value, or an error for the byte-order mark), parse agrees.
        #expect((try? JSON.parse(Self.bytes(text))) == (try? JSON.parseWithFoundation(Self.bytes(text))))
        if !text.hasPrefix("\u{FEFF}") { #expect(throws: Never.self) { try JSON.parse(Self.bytes(text)) } }
    }

    @Test(arguments: [
        #"{"a":"1","a":"2"}"#,  // a repeated name
        #"{"a":"1",}"#,  // a trailing comma
        #"{"a":"1"} x"#,  // trailing bytes
        #"{"a":"1""#,  // unterminated
        #"{"a" "1"}"#,
        #"{"a":tru}"#,
        #"{"a":"x"}}"#,
        "{\"a\":\"line\nbreak\"}",  // a raw control character in a string
        "",
    ])
    func invalidOrDoubtfulDocumentsAreNotReadDirectlyAndStayErrors(text: String) {
        #expect(Self.flat(text) == nil)
        #expect(throws: JSON.ParseError.self) { try JSON.parse(Self.bytes(text)) }
    }

    /// A seeded generator, so that a failure can be replayed.
    struct SplitMix64: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// Differential: over generated inputs near the direct path's grammar (its tokens, whitespace,
    /// control bytes, non-ASCII and byte-order-mark bytes, and one-byte changes of documents it
    /// accepts), whatever the direct path reads, the full path reads too, to the same value.
    @Test func whateverTheDirectPathReadsTheFullPathReadsAlike() throws {
        var random = SplitMix64(state: 0x6A7E_4F05_E000_0036)
        let alphabet: [UInt8] = Array(#"{}":,abrufelsn01-/ "#.utf8) + [0x09, 0x0A, 0x0D, 0x00, 0x1F, 0x7F, 0x80, 0xC3, 0xA9, 0xFF, 0xEF, 0xBB, 0xBF]
        let accepted = [#"{"a":"b","c":true,"d":null}"#, #"{"refresh_token":"x.y_z-1"}"#, #" { "" : false } "#].map(Self.bytes)
        var read = 0
        for round in 0..<20_000 {
            var input: [UInt8]
            if round % 2 == 0 {
                input = (0..<Int.random(in: 0...24, using: &random)).map { _ in alphabet.randomElement(using: &random)! }
                if round % 4 == 0 { input = Array(#"{""#.utf8) + input }
            } else {
                input = accepted.randomElement(using: &random)!
                let position = Int.random(in: 0..<input.count, using: &random)
                switch Int.random(in: 0..<3, using: &random) {
                case 0: input[position] = alphabet.randomElement(using: &random)!
                case 1: input.remove(at: position)
                default: input.insert(alphabet.randomElement(using: &random)!, at: position)
                }
            }
            guard let direct = input.withUnsafeBufferPointer(JSON.flatObject) else { continue }
            read += 1
            let full = try? JSON.parseWithFoundation(input)
            #expect(full == direct, "\(input): direct \(direct), full \(String(describing: full))")
        }
        #expect(read > 500, "the generator reached the direct path \(read) times")
    }

    /// The encoder escapes exactly `"`, `\\`, control bytes and DEL, whichever way a string takes
    /// (no escape at all, or runs between escapes), and what it writes reads back as the same string.
    @Test func stringsAreEscapedAsTheRuleSaysAndReadBack() throws {
        func expected(_ s: String) -> String {
            var out = "\""
            for byte in s.utf8 {
                switch byte {
                case UInt8(ascii: "\""): out += "\\\""
                case UInt8(ascii: "\\"): out += "\\\\"
                case 0x0A: out += "\\n"
                case 0x0D: out += "\\r"
                case 0x09: out += "\\t"
                case 0..<0x20, 0x7F: out += "\\u00" + (byte < 16 ? "0" : "") + String(byte, radix: 16)
                default: out += String(UnicodeScalar(byte))  // ASCII only: see below
                }
            }
            return out + "\""
        }
        var random = SplitMix64(state: 0x5EED)
        let pieces = ["a", "Z", "0", " ", "\"", "\\", "/", "\n", "\r", "\t", "\u{0}", "\u{1F}", "\u{7F}", "<", "é", "한", "\u{2028}", "😀", "abcdefghijklmnop"]
        for _ in 0..<5_000 {
            let s = (0..<Int.random(in: 0...12, using: &random)).map { _ in pieces.randomElement(using: &random)! }.joined()
            let written = JSON.string(s).serializedString
            if s.unicodeScalars.allSatisfy(\.isASCII) { #expect(written == expected(s), "\(s.debugDescription)") }
            #expect(try JSON.parse(Array(written.utf8)) == .string(s), "\(s.debugDescription) → \(written)")
        }
    }

    @Test func serialisationSortsMembersByName() {
        let json: JSON = ["b": 1, "a": ["d": true, "c": nil], "é": "x", "A": "y"]
        #expect(json.serializedString == #"{"A":"y","a":{"c":null,"d":true},"b":1,"é":"x"}"#)
    }
}
