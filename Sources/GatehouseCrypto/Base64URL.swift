/// Base64url (RFC 4648 §5) without padding, as used by JWS, JWK and PKCE.
///
/// Decoding is strict: it accepts only the url-safe alphabet, no `=` padding, no whitespace, and
/// only the canonical encoding (unused trailing bits must be zero), so every byte string has
/// exactly one accepted text form.
public enum Base64URL {
    private static let alphabet: [UInt8] = Array(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Maps an ASCII byte to its 6-bit value, or 0xFF when it is not in the alphabet.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, symbol) in alphabet.enumerated() { table[Int(symbol)] = UInt8(index) }
        return table
    }()

    /// Encodes bytes as unpadded base64url text.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let input = Array(bytes)
        var output = [UInt8]()
        output.reserveCapacity((input.count * 4 + 2) / 3)
        var index = 0
        while index + 3 <= input.count {
            let chunk = UInt32(input[index]) << 16 | UInt32(input[index + 1]) << 8 | UInt32(input[index + 2])
            output.append(alphabet[Int(chunk >> 18 & 0x3F)])
            output.append(alphabet[Int(chunk >> 12 & 0x3F)])
            output.append(alphabet[Int(chunk >> 6 & 0x3F)])
            output.append(alphabet[Int(chunk & 0x3F)])
            index += 3
        }
        switch input.count - index {
        case 1:
            let chunk = UInt32(input[index]) << 16
            output.append(alphabet[Int(chunk >> 18 & 0x3F)])
            output.append(alphabet[Int(chunk >> 12 & 0x3F)])
        case 2:
            let chunk = UInt32(input[index]) << 16 | UInt32(input[index + 1]) << 8
            output.append(alphabet[Int(chunk >> 18 & 0x3F)])
            output.append(alphabet[Int(chunk >> 12 & 0x3F)])
            output.append(alphabet[Int(chunk >> 6 & 0x3F)])
        default:
            break
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Decodes unpadded base64url text; returns `nil` for any character outside the url-safe
    /// alphabet (including `=`, `+`, `/` and whitespace), an impossible length, or non-zero
    /// trailing bits.
    public static func decode(_ string: some StringProtocol) -> [UInt8]? {
        decode(utf8: Array(string.utf8))
    }

    /// Decodes unpadded base64url given as UTF-8 bytes (see ``decode(_:)``).
    static func decode(utf8 text: some Collection<UInt8>) -> [UInt8]? {
        if text.count % 4 == 1 { return nil }
        var output = [UInt8]()
        output.reserveCapacity(text.count * 3 / 4)
        var accumulator: UInt32 = 0
        var pending = 0
        for symbol in text {
            let value = values[Int(symbol)]
            if value == 0xFF { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            pending += 1
            if pending == 4 {
                output.append(UInt8(accumulator >> 16 & 0xFF))
                output.append(UInt8(accumulator >> 8 & 0xFF))
                output.append(UInt8(accumulator & 0xFF))
                accumulator = 0
                pending = 0
            }
        }
        switch pending {
        case 2:  // 12 bits carry one byte; the low 4 bits must be zero.
            if accumulator & 0x0F != 0 { return nil }
            output.append(UInt8(accumulator >> 4 & 0xFF))
        case 3:  // 18 bits carry two bytes; the low 2 bits must be zero.
            if accumulator & 0x03 != 0 { return nil }
            output.append(UInt8(accumulator >> 10 & 0xFF))
            output.append(UInt8(accumulator >> 2 & 0xFF))
        default:
            break
        }
        return output
    }
}
