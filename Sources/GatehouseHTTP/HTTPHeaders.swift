/// HTTP header fields as ordered `(name, value)` pairs.
///
/// Order and duplicates are kept as received (or as added); lookups compare names
/// case-insensitively (ASCII), as HTTP requires.
public struct HTTPHeaders: Sendable, Sequence {
    /// One header field.
    public typealias Element = (name: String, value: String)

    private var fields: [Element]

    /// Creates headers from pairs, keeping their order.
    public init(_ pairs: [(String, String)] = []) {
        fields = pairs.map { (name: $0.0, value: $0.1) }
    }

    /// The first value of the field `name`, or `nil` if absent.
    public subscript(_ name: String) -> String? {
        fields.first { Self.namesMatch($0.name, name) }?.value
    }

    /// Every value of the field `name`, in order.
    public func values(_ name: String) -> [String] {
        fields.filter { Self.namesMatch($0.name, name) }.map(\.value)
    }

    /// Appends a field, keeping any existing ones with the same name.
    public mutating func add(_ name: String, _ value: String) {
        fields.append((name: name, value: value))
    }

    /// Replaces every field named `name` with a single one.
    public mutating func set(_ name: String, _ value: String) {
        remove(name)
        fields.append((name: name, value: value))
    }

    /// Removes every field named `name`.
    public mutating func remove(_ name: String) {
        fields.removeAll { Self.namesMatch($0.name, name) }
    }

    /// Whether a field named `name` is present.
    public func contains(_ name: String) -> Bool {
        fields.contains { Self.namesMatch($0.name, name) }
    }

    /// The number of fields (duplicates counted).
    public var count: Int { fields.count }

    public func makeIterator() -> IndexingIterator<[Element]> {
        fields.makeIterator()
    }

    static func namesMatch(_ a: String, _ b: String) -> Bool {
        guard a.utf8.count == b.utf8.count else { return false }
        // Over contiguous bytes: zipping the two UTF-8 views cost more per request than the rest
        // of a header lookup (a native string is contiguous already; withUTF8 copies only a bridged one).
        var a = a, b = b
        return a.withUTF8 { a in
            b.withUTF8 { b in
                guard a.count == b.count else { return false }
                for index in a.indices where a[index] != b[index] && asciiLower(a[index]) != asciiLower(b[index]) { return false }
                return true
            }
        }
    }

    private static func asciiLower(_ byte: UInt8) -> UInt8 {
        (byte >= 0x41 && byte <= 0x5A) ? byte | 0x20 : byte
    }
}

extension HTTPHeaders: ExpressibleByDictionaryLiteral {
    /// `["Content-Type": "application/json"]`, in literal order.
    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }
}
