import Foundation

/// A JSON value. Requests are decoded into it so that unknown fields and wrong types can be
/// reported field by field; responses are built from it and serialised without `JSONEncoder`
/// (which is the main cost of a small JSON response).
public enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSON])
    case object([String: JSON])

    /// Parses a UTF-8 JSON document (any value, not only objects). Throws `JSON.ParseError` for
    /// invalid UTF-8 or JSON. Foundation's `JSONSerialization` does the parsing (about five times
    /// faster here than `JSONDecoder`); this only converts its objects.
    public static func parse(_ bytes: some Collection<UInt8>) throws(JSON.ParseError) -> JSON {
        let array = Array(bytes)
        if let flat = array.withUnsafeBufferPointer(flatObject) { return flat }
        return try parseWithFoundation(array)
    }

    /// The full path: any JSON value.
    static func parseWithFoundation(_ array: [UInt8]) throws(JSON.ParseError) -> JSON {
        // JSONSerialization would also guess UTF-16 and UTF-32; the API speaks UTF-8 only. It
        // (and JSONDecoder) also take a trailing comma, which RFC 8259 does not allow, and keep
        // the last of two equal keys, where a proxy or a log reader may take the first (I-JSON,
        // RFC 7493, forbids them): every `:` outside strings starts a member, so an object that
        // lost one to a duplicate shows as fewer members than colons.
        guard String(validating: array, as: UTF8.self) != nil, let colons = colonsOutsideStrings(array),
            let object = try? JSONSerialization.jsonObject(with: Data(array), options: [.fragmentsAllowed])
        else { throw ParseError() }
        var members = 0
        guard let json = JSON(foundation: object, members: &members), members == colons else { throw ParseError() }
        return json
    }

    /// Most request bodies, read directly: an object whose members are ASCII strings without
    /// escapes, `true`, `false` or `null`, between JSON whitespace (`{"refresh_token":"…"}`). Nil
    /// for anything else (a number, an escape, a byte outside printable ASCII in a string, nesting,
    /// a repeated name, trailing bytes, any doubt), which the full path then decides: this accepts
    /// a strict subset of what it accepts, with the same value, at a fraction of its cost (it
    /// showed as 2 % of a refresh's server CPU).
    static func flatObject(_ bytes: UnsafeBufferPointer<UInt8>) -> JSON? {
        var index = 0
        let end = bytes.count
        func skipBlanks() {
            while index < end, bytes[index] == 0x20 || bytes[index] == 0x09 || bytes[index] == 0x0A || bytes[index] == 0x0D { index += 1 }
        }
        /// A string starting at `index` (its opening quote), of printable ASCII without `\`.
        func string() -> String? {
            guard index < end, bytes[index] == UInt8(ascii: "\"") else { return nil }
            let start = index + 1
            var at = start
            while at < end {
                let byte = bytes[at]
                if byte == UInt8(ascii: "\"") {
                    index = at + 1
                    return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<at]), as: UTF8.self)
                }
                guard byte >= 0x20, byte < 0x7F, byte != UInt8(ascii: "\\") else { return nil }
                at += 1
            }
            return nil
        }
        func literal(_ word: StaticString) -> Bool {
            let count = word.utf8CodeUnitCount
            guard end - index >= count else { return false }
            for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { return false }
            index += count
            return true
        }
        skipBlanks()
        guard index < end, bytes[index] == UInt8(ascii: "{") else { return nil }
        index += 1
        var members: [String: JSON] = [:]
        skipBlanks()
        if index < end, bytes[index] == UInt8(ascii: "}") {
            index += 1
        } else {
            while true {
                skipBlanks()
                guard let name = string() else { return nil }
                skipBlanks()
                guard index < end, bytes[index] == UInt8(ascii: ":") else { return nil }
                index += 1
                skipBlanks()
                guard index < end else { return nil }
                let value: JSON
                switch bytes[index] {
                case UInt8(ascii: "\""):
                    guard let text = string() else { return nil }
                    value = .string(text)
                case UInt8(ascii: "t"):
                    guard literal("true") else { return nil }
                    value = .bool(true)
                case UInt8(ascii: "f"):
                    guard literal("false") else { return nil }
                    value = .bool(false)
                case UInt8(ascii: "n"):
                    guard literal("null") else { return nil }
                    value = .null
                default:
                    return nil
                }
                guard members.updateValue(value, forKey: name) == nil else { return nil }
                skipBlanks()
                guard index < end else { return nil }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                guard bytes[index] == UInt8(ascii: "}") else { return nil }
                index += 1
                break
            }
        }
        skipBlanks()
        return index == end ? .object(members) : nil
    }

    /// The number of `:` outside strings, or nil when a `,` outside strings is followed (after
    /// whitespace) by `}` or `]`.
    static func colonsOutsideStrings(_ bytes: [UInt8]) -> Int? {
        var inString = false
        var escaped = false
        var afterComma = false
        var colons = 0
        for byte in bytes {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            switch byte {
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"):
                continue
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if afterComma { return nil }
            case UInt8(ascii: "\""):
                inString = true
            case UInt8(ascii: ":"):
                colons += 1
            default:
                break
            }
            afterComma = byte == UInt8(ascii: ",")
        }
        return colons
    }

    /// `members`: the objects' members converted so far, added to.
    private init?(foundation object: Any, members: inout Int) {
        // Containers and strings first: testing a Swift dictionary `as NSNumber` would bridge it.
        if let dictionary = object as? [String: Any] {
            var values: [String: JSON] = [:]
            values.reserveCapacity(dictionary.count)
            members += dictionary.count
            for (key, element) in dictionary {
                guard let value = JSON(foundation: element, members: &members) else { return nil }
                values[key] = value
            }
            self = .object(values)
        } else if let array = object as? [Any] {
            var values: [JSON] = []
            values.reserveCapacity(array.count)
            for element in array {
                guard let value = JSON(foundation: element, members: &members) else { return nil }
                values.append(value)
            }
            self = .array(values)
        } else if let string = object as? String {
            self = .string(string)
        } else if let number = object as? NSNumber {
            // Booleans come back as NSNumber with the `char` type; integers as `i`/`q`/…; others as double.
            switch String(cString: number.objCType) {
            case "c", "B": self = .bool(number.boolValue)
            case "d", "f": self = .double(number.doubleValue)
            default: self = .int(number.int64Value)
            }
        } else if object is NSNull {
            self = .null
        } else {
            return nil
        }
    }

    /// The body could not be parsed as JSON.
    public struct ParseError: Error, Sendable {}

    public var objectValue: [String: JSON]? { if case .object(let o) = self { o } else { nil } }
    public var arrayValue: [JSON]? { if case .array(let a) = self { a } else { nil } }
    public var stringValue: String? { if case .string(let s) = self { s } else { nil } }

    public subscript(key: String) -> JSON? {
        if case .object(let o) = self { o[key] } else { nil }
    }

    /// Compact serialisation with keys sorted, so that output is stable.
    public func serialized() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(to: &out)
        return out
    }

    public var serializedString: String { String(decoding: serialized(), as: UTF8.self) }

    private func write(to out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .int(let i): out.append(contentsOf: String(i).utf8)
        case .double(let d):
            if d.isFinite { out.append(contentsOf: "\(d)".utf8) } else { out.append(contentsOf: "null".utf8) }
        case .string(let s): JSON.writeString(s, to: &out)
        case .array(let a):
            out.append(UInt8(ascii: "["))
            for (i, v) in a.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                v.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let o):
            out.append(UInt8(ascii: "{"))
            // The members sorted once, with their values (no second lookup by name).
            for (i, member) in o.sorted(by: { $0.key < $1.key }).enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSON.writeString(member.key, to: &out)
                out.append(UInt8(ascii: ":"))
                member.value.write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    private static func writeString(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { bytes in
            // Most strings (ids, tokens, emails) need no escape: found by one pass without an early
            // exit, which vectorises (a token is 700–900 bytes), and copied at once.
            var hits: UInt8 = 0
            for byte in bytes {
                hits |= (byte < 0x20 ? 1 : 0) | (byte == 0x7F ? 1 : 0) | (byte == UInt8(ascii: "\"") ? 1 : 0) | (byte == UInt8(ascii: "\\") ? 1 : 0)
            }
            if hits == 0 {
                out.append(contentsOf: bytes)
                return
            }
            // Runs of bytes that need no escape are copied at once.
            var runStart = 0
            for (index, byte) in bytes.enumerated() where byte < 0x20 || byte == 0x7F || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
                runStart = index + 1
                switch byte {
                case UInt8(ascii: "\""): out.append(contentsOf: [92, 34])
                case UInt8(ascii: "\\"): out.append(contentsOf: [92, 92])
                case 0x0A: out.append(contentsOf: [92, UInt8(ascii: "n")])
                case 0x0D: out.append(contentsOf: [92, UInt8(ascii: "r")])
                case 0x09: out.append(contentsOf: [92, UInt8(ascii: "t")])
                default:
                    out.append(contentsOf: [92, UInt8(ascii: "u"), 48, 48])
                    out.append(hexDigits[Int(byte >> 4)])
                    out.append(hexDigits[Int(byte & 0xF)])
                }
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart...]))
        }
        out.append(UInt8(ascii: "\""))
    }
}

extension JSON: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSON...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSON)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
    public init(nilLiteral: ()) { self = .null }
}

extension JSON {
    /// `.string(s)` or `.null`.
    public static func optional(_ s: String?) -> JSON { s.map(JSON.string) ?? .null }

    /// RFC 7396 JSON merge patch: objects merge recursively, `null` removes, anything else replaces.
    public func merging(patch: JSON) -> JSON {
        guard case .object(let patchObject) = patch else { return patch }
        var result = self.objectValue ?? [:]
        for (key, value) in patchObject {
            if value == .null {
                result.removeValue(forKey: key)
            } else {
                result[key] = (result[key] ?? .null).merging(patch: value)
            }
        }
        return .object(result)
    }

    /// `self` (the result of `merging(patch:)`) with every member that `patch` removes put back
    /// as `null`, through nested objects. A reader that takes `null` as absent reads the same
    /// settings, and one that rejects unknown members also sees the names the patch removed.
    public func keepingRemovals(of patch: JSON) -> JSON {
        guard case .object(let patchObject) = patch, case .object(var result) = self else { return self }
        for (key, value) in patchObject {
            if value == .null {
                if result[key] == nil { result[key] = .null }
            } else if case .object = value, let merged = result[key] {
                result[key] = merged.keepingRemovals(of: value)
            }
        }
        return .object(result)
    }
}
