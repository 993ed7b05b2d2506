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
        Self(unchecked: prefix + Base32.encode(SecureRandom.bytes(15), lowercase: true))
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
        guard body.allSatisfy({ Base32.lowercaseAlphabet.contains($0) }) else { return nil }
        self.init(unchecked: String(text))
    }
}

public struct AppID: PrefixedID {
    public static let prefix = "app_"
    public let rawValue: String
    public init(unchecked rawValue: String) { self.rawValue = rawValue }
}
