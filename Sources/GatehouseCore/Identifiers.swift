import GatehouseCrypto

/// An opaque identifier with a type prefix (`app_`, `usr_`, `ses_`, …): the prefix followed by
/// 24 lowercase base32 characters (120 random bits).
public protocol PrefixedID: Hashable, Sendable, CustomStringConvertible {
    static var prefix: String { get }
    var rawValue: String { get }
    init(unchecked rawValue: String)
}

extension PrefixedID {
    public var description: String { rawValue }

    /// A new random identifier.
    public static func generate() -> Self {
        Self(unchecked: prefix + Base32.lowercase(SecureRandom.bytes(15)))
    }

    /// The five bits of the identifier's last character (0–31), to spread identifiers over a
    /// cache's shards without hashing them a second time: what follows the prefix is random
    /// (``generate()``), and a client cannot choose it. Decoded from base32, not the character's
    /// code, whose remainders by 16 are far from even.
    var shardNumber: Int {
        let last = Int(rawValue.utf8.last ?? 0)
        return (last >= 97 ? last - 97 : last + 8) & 31  // "a"–"z" are 0–25, "2"–"7" are 26–31
    }

    /// Parses an identifier from a client, checking its prefix and alphabet (so that nothing odd
    /// ever reaches a query or a log line). Returns nil when it is not one.
    public init?(parsing text: some StringProtocol) {
        guard text.hasPrefix(Self.prefix), text.utf8.count == Self.prefix.utf8.count + 24 else { return nil }
        let body = text.utf8.dropFirst(Self.prefix.utf8.count)
        guard body.allSatisfy({ Base32.alphabet.contains($0) }) else { return nil }
        self.init(unchecked: String(text))
    }
}

public struct AppID: PrefixedID {
    public static let prefix = "app_"
    public let rawValue: String
    public init(unchecked rawValue: String) { self.rawValue = rawValue }
}

/// RFC 4648 base32 in lowercase without padding; used for identifiers.
enum Base32 {
    static let alphabet = Array("abcdefghijklmnopqrstuvwxyz234567".utf8)

    static func lowercase(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for byte in bytes {
            buffer = (buffer << 8) | UInt32(byte)
            bits += 8
            while bits >= 5 {
                out.append(alphabet[Int((buffer >> UInt32(bits - 5)) & 31)])
                bits -= 5
            }
        }
        if bits > 0 { out.append(alphabet[Int((buffer << UInt32(5 - bits)) & 31)]) }
        return String(decoding: out, as: UTF8.self)
    }
}
