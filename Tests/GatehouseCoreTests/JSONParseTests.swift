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

    @Test func serialisationSortsMembersByName() {
        let json: JSON = ["b": 1, "a": ["d": true, "c": nil], "é": "x", "A": "y"]
        #expect(json.serializedString == #"{"A":"y","a":{"c":null,"d":true},"b":1,"é":"x"}"#)
    }
}
