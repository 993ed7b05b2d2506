/// RFC 4648 base32 without padding: lowercase for Gatehouse's identifiers and app keys,
/// uppercase for TOTP secrets (what authenticator apps read).
public enum Base32 {
    public static let uppercaseAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)
    public static let lowercaseAlphabet = Array("abcdefghijklmnopqrstuvwxyz234567".utf8)

    public static func encode(_ bytes: [UInt8], lowercase: Bool = false) -> String {
        let alphabet = lowercase ? lowercaseAlphabet : uppercaseAlphabet
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 8 + 4) / 5)
        var buffer: UInt32 = 0
        var bits = 0
        for byte in bytes {
            buffer = (buffer << 8) | UInt32(byte)
            bits += 8
            while bits >= 5 {
                out.append(alphabet[Int((buffer >> UInt32(bits - 5)) & 31)])
                bits -= 5
            }
            buffer &= (1 << UInt32(bits)) - 1
        }
        if bits > 0 { out.append(alphabet[Int((buffer << UInt32(5 - bits)) & 31)]) }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes either case, padding and spaces ignored; nil for any other character or trailing
    /// bits that are not zero.
    public static func decode(_ text: String) -> [UInt8]? {
        var out: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for c in text.utf8 where c != 0x3D && c != 0x20 {
            let upper = (c >= 0x61 && c <= 0x7A) ? c - 0x20 : c
            guard let value = uppercaseAlphabet.firstIndex(of: upper) else { return nil }
            buffer = (buffer << 5) | UInt32(value)
            bits += 5
            if bits >= 8 {
                out.append(UInt8((buffer >> UInt32(bits - 8)) & 0xFF))
                bits -= 8
            }
            buffer &= (1 << UInt32(bits)) - 1
        }
        guard buffer == 0 else { return nil }
        return out
    }
}
