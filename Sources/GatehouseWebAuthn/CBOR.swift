import CCbor

/// A CBOR data item as libcbor decoded it (RFC 8949), reduced to what WebAuthn uses. Nothing here
/// parses CBOR: ``CBOR/decode(_:)`` hands the bytes to `cbor_load` and walks the tree it built;
/// ``CBOR/encode(_:)`` builds a libcbor tree and has `cbor_serialize_alloc` write it.
public indirect enum CBORValue: Sendable, Equatable {
    case unsigned(UInt64)
    /// A negative integer `-1 - n`, holding `n` as CBOR does.
    case negative(UInt64)
    case bytes([UInt8])
    case text(String)
    case array([CBORValue])
    /// Pairs in their encoded order.
    case map([(CBORValue, CBORValue)])
    case bool(Bool)
    /// Anything else (tags, floats, null, undefined): never a value WebAuthn reads.
    case other

    /// An integer key or value as a Swift `Int`, for COSE labels and algorithm numbers.
    public var integer: Int? {
        switch self {
        case .unsigned(let n) where n <= UInt64(Int.max): Int(n)
        case .negative(let n) where n < UInt64(Int.max): -1 - Int(n)
        default: nil
        }
    }

    public var bytesValue: [UInt8]? { if case .bytes(let b) = self { b } else { nil } }
    public var textValue: String? { if case .text(let t) = self { t } else { nil } }

    /// The value under `key` of a map (the first, though a well-formed map has one).
    public subscript(key: CBORValue) -> CBORValue? {
        guard case .map(let pairs) = self else { return nil }
        return pairs.first { $0.0 == key }?.1
    }

    public subscript(text key: String) -> CBORValue? { self[.text(key)] }
    public subscript(int key: Int) -> CBORValue? { self[key >= 0 ? .unsigned(UInt64(key)) : .negative(UInt64(-1 - key))] }

    public static func int(_ value: Int) -> CBORValue { value >= 0 ? .unsigned(UInt64(value)) : .negative(UInt64(-1 - value)) }

    public static func == (lhs: CBORValue, rhs: CBORValue) -> Bool {
        switch (lhs, rhs) {
        case (.unsigned(let a), .unsigned(let b)), (.negative(let a), .negative(let b)): a == b
        case (.bytes(let a), .bytes(let b)): a == b
        case (.text(let a), .text(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.map(let a), .map(let b)): a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        case (.bool(let a), .bool(let b)): a == b
        case (.other, .other): true
        default: false
        }
    }
}

/// libcbor's decoder and encoder.
public enum CBOR {
    /// Deepest nesting accepted: a COSE key or an attestation statement is two or three levels.
    static let maximumDepth = 8
    /// Most entries a map may have: a COSE key has at most 6 (RSA: kty, alg, n, e; EC2: kty, alg,
    /// crv, x, y), an attestation object 3, extensions a few.
    static let maximumMapSize = 64

    /// Decodes the first data item of `bytes` with `cbor_load`; returns it and how many bytes it
    /// took (a COSE key inside authenticator data is followed by other bytes). Indefinite-length
    /// strings and maps, and anything nested deeper than ``maximumDepth``, are refused.
    public static func decodePrefix(_ bytes: ArraySlice<UInt8>) throws(WebAuthnError) -> (CBORValue, Int) {
        guard !bytes.isEmpty else { throw WebAuthnError("CBOR data is empty.") }
        // Bounded first (see gatehouse_cbor_scan): cbor_load allocates what headers declare.
        let scanned = bytes.withUnsafeBufferPointer { gatehouse_cbor_scan($0.baseAddress, $0.count, Int32(maximumDepth)) }
        guard scanned > 0 else { throw WebAuthnError("CBOR data is malformed, too deep, or declares more items than it holds.") }
        var result = cbor_load_result()
        let item: UnsafeMutablePointer<cbor_item_t>? = bytes.withUnsafeBufferPointer { buffer in
            cbor_load(buffer.baseAddress, buffer.count, &result)
        }
        guard let item, result.error.code == CBOR_ERR_NONE else {
            gatehouse_cbor_release(item)
            throw WebAuthnError("CBOR data is malformed.")
        }
        defer { gatehouse_cbor_release(item) }
        return (try value(item, depth: 0), result.read)
    }

    /// Decodes `bytes`, which must hold exactly one data item.
    public static func decode(_ bytes: [UInt8]) throws(WebAuthnError) -> CBORValue {
        let (value, read) = try decodePrefix(bytes[...])
        guard read == bytes.count else { throw WebAuthnError("CBOR data has trailing bytes.") }
        return value
    }

    private static func value(_ item: UnsafeMutablePointer<cbor_item_t>, depth: Int) throws(WebAuthnError) -> CBORValue {
        guard depth <= maximumDepth else { throw WebAuthnError("CBOR data is nested too deeply.") }
        switch cbor_typeof(item) {
        case CBOR_TYPE_UINT:
            return .unsigned(cbor_get_int(item))
        case CBOR_TYPE_NEGINT:
            return .negative(cbor_get_int(item))
        case CBOR_TYPE_BYTESTRING:
            guard cbor_bytestring_is_definite(item) else { throw WebAuthnError("CBOR byte strings must have a definite length.") }
            let length = cbor_bytestring_length(item)
            guard length > 0, let handle = cbor_bytestring_handle(item) else { return .bytes([]) }
            return .bytes(Array(UnsafeBufferPointer(start: handle, count: length)))
        case CBOR_TYPE_STRING:
            guard cbor_string_is_definite(item) else { throw WebAuthnError("CBOR text strings must have a definite length.") }
            let length = cbor_string_length(item)
            guard length > 0, let handle = cbor_string_handle(item) else { return .text("") }
            let bytes = Array(UnsafeBufferPointer(start: handle, count: length))
            guard let text = String(validating: bytes, as: UTF8.self) else { throw WebAuthnError("CBOR text is not UTF-8.") }
            return .text(text)
        case CBOR_TYPE_ARRAY:
            guard cbor_array_is_definite(item) else { throw WebAuthnError("CBOR arrays must have a definite length.") }
            let count = cbor_array_size(item)
            guard count > 0, let handle = cbor_array_handle(item) else { return .array([]) }
            var items: [CBORValue] = []
            for element in UnsafeBufferPointer(start: handle, count: count) {
                guard let element else { throw WebAuthnError("CBOR data is malformed.") }
                items.append(try value(element, depth: depth + 1))
            }
            return .array(items)
        case CBOR_TYPE_MAP:
            guard cbor_map_is_definite(item) else { throw WebAuthnError("CBOR maps must have a definite length.") }
            let count = cbor_map_size(item)
            // WebAuthn's maps hold a handful of entries; the repeated-key check is quadratic.
            guard count <= maximumMapSize else { throw WebAuthnError("A CBOR map has more than \(maximumMapSize) entries.") }
            guard count > 0, let handle = cbor_map_handle(item) else { return .map([]) }
            var pairs: [(CBORValue, CBORValue)] = []
            for pair in UnsafeBufferPointer(start: handle, count: count) {
                guard let key = pair.key, let value = pair.value else { throw WebAuthnError("CBOR data is malformed.") }
                let decodedKey = try Self.value(key, depth: depth + 1)
                guard !pairs.contains(where: { $0.0 == decodedKey }) else { throw WebAuthnError("A CBOR map repeats a key.") }
                pairs.append((decodedKey, try Self.value(value, depth: depth + 1)))
            }
            return .map(pairs)
        case CBOR_TYPE_FLOAT_CTRL:
            return cbor_is_bool(item) ? .bool(cbor_get_bool(item)) : .other
        default:
            return .other
        }
    }

    /// Encodes `value` with libcbor: integers in their shortest form, maps in the order given
    /// (the caller orders them canonically). `.other` encodes as CBOR null.
    public static func encode(_ value: CBORValue) -> [UInt8] {
        let item = build(value)
        defer { gatehouse_cbor_release(item) }
        var buffer: UnsafeMutablePointer<UInt8>?
        var capacity = 0
        let length = cbor_serialize_alloc(item, &buffer, &capacity)
        guard length > 0, let buffer else { fatalError("cbor_serialize_alloc failed") }
        defer { free(buffer) }
        return Array(UnsafeBufferPointer(start: buffer, count: length))
    }

    /// A new libcbor item (reference count one) for `value`.
    private static func build(_ value: CBORValue) -> UnsafeMutablePointer<cbor_item_t> {
        let item: UnsafeMutablePointer<cbor_item_t>?
        switch value {
        case .unsigned(let n):
            item = n <= UInt64(UInt8.max) ? cbor_build_uint8(UInt8(n)) : n <= UInt64(UInt16.max) ? cbor_build_uint16(UInt16(n))
                : n <= UInt64(UInt32.max) ? cbor_build_uint32(UInt32(n)) : cbor_build_uint64(n)
        case .negative(let n):
            item = n <= UInt64(UInt8.max) ? cbor_build_negint8(UInt8(n)) : n <= UInt64(UInt16.max) ? cbor_build_negint16(UInt16(n))
                : n <= UInt64(UInt32.max) ? cbor_build_negint32(UInt32(n)) : cbor_build_negint64(n)
        case .bytes(let bytes):
            item = bytes.withUnsafeBufferPointer { cbor_build_bytestring($0.baseAddress, $0.count) }
        case .text(let text):
            item = Array(text.utf8).withUnsafeBufferPointer { buffer in
                buffer.withMemoryRebound(to: CChar.self) { cbor_build_stringn($0.baseAddress, $0.count) }
            }
        case .array(let elements):
            let array = cbor_new_definite_array(elements.count)
            for element in elements {
                let child = build(element)
                _ = cbor_array_push(array, child)
                gatehouse_cbor_release(child)  // the array holds its own reference
            }
            item = array
        case .map(let pairs):
            let map = cbor_new_definite_map(pairs.count)
            for (key, value) in pairs {
                let k = build(key)
                let v = build(value)
                _ = gatehouse_cbor_map_add(map, k, v)
                gatehouse_cbor_release(k)
                gatehouse_cbor_release(v)
            }
            item = map
        case .bool(let flag):
            item = cbor_build_bool(flag)
        case .other:
            item = cbor_new_null()
        }
        guard let item else { fatalError("libcbor could not allocate an item") }
        return item
    }
}
