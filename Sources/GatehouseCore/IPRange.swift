import Foundation

/// An IPv4 or IPv6 address or CIDR range, parsed with `inet_pton`.
public struct IPRange: Sendable, Equatable {
    /// 4 or 16 bytes.
    public let network: [UInt8]
    public let prefixLength: Int

    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = IPRange.parseAddress(String(parts[0])) else { return nil }
        let maxBits = address.count * 8
        var bits = maxBits
        if parts.count == 2 {
            guard let n = Int(parts[1]), (0...maxBits).contains(n) else { return nil }
            bits = n
        }
        // A range of IPv4-mapped addresses (`::ffff:10.0.0.0/104`) is the IPv4 range it maps:
        // addresses are compared unmapped.
        if address.count == 16, bits >= 96, let v4 = IPRange.unmapped(address) {
            self.network = v4
            self.prefixLength = bits - 96
        } else {
            self.network = address
            self.prefixLength = bits
        }
    }

    /// True when `address` (textual) is inside this range. IPv4-mapped IPv6 addresses match IPv4 ranges.
    public func contains(_ address: String) -> Bool {
        guard let parsed = IPRange.parseAddress(address) else { return false }
        let bytes = IPRange.unmapped(parsed) ?? parsed
        guard bytes.count == network.count else { return false }
        var remaining = prefixLength
        for i in 0..<bytes.count where remaining > 0 {
            let take = min(8, remaining)
            let mask: UInt8 = take == 8 ? 0xFF : ~(0xFF >> UInt8(take))
            if bytes[i] & mask != network[i] & mask { return false }
            remaining -= take
        }
        return true
    }

    /// One spelling per address: IPv4 dotted, IPv6 as `inet_ntop` writes it, and an IPv4-mapped
    /// IPv6 address (`::ffff:10.0.0.1`) as the IPv4 address it is. Nil when `text` is no address.
    public static func canonical(_ text: String) -> String? {
        guard let parsed = parseAddress(text) else { return nil }
        let bytes = unmapped(parsed) ?? parsed
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        guard bytes.withUnsafeBytes({ inet_ntop(family, $0.baseAddress, &buffer, socklen_t(buffer.count)) }) != nil else { return nil }
        let length = buffer.firstIndex(of: 0) ?? buffer.count
        return String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The IPv4 address inside an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`), or nil.
    public static func unmapped(_ bytes: [UInt8]) -> [UInt8]? {
        guard bytes.count == 16, bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF else { return nil }
        return Array(bytes[12...])
    }

    /// The 4 or 16 bytes of a textual IP address, or nil.
    public static func parseAddress(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            return withUnsafeBytes(of: &v6) { Array($0) }
        }
        return nil
    }
}
