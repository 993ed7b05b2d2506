import CMicroHTTPD

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A parsed IP literal to bind, with the libmicrohttpd flags it needs.
struct BindAddress {
    private enum Storage {
        case v4(sockaddr_in)
        case v6(sockaddr_in6)
    }

    private let storage: Storage
    /// `MHD_USE_IPv6` for IPv6 addresses, plus dual stack for the unspecified `::`.
    let flags: UInt32

    init(host: String, port: UInt16) throws {
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, host, &v4) == 1 {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr = v4
            storage = .v4(address)
            flags = 0
        } else if inet_pton(AF_INET6, host, &v6) == 1 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            address.sin6_addr = v6
            storage = .v6(address)
            let isUnspecified = withUnsafeBytes(of: v6) { $0.allSatisfy { $0 == 0 } }
            flags = isUnspecified ? MHD_USE_DUAL_STACK.rawValue : MHD_USE_IPv6.rawValue
        } else {
            throw HTTPServer.StartError(
                description: "cannot listen on \(host): not an IPv4 or IPv6 address (use e.g. 127.0.0.1, 0.0.0.0, ::1 or ::)")
        }
    }

    func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>) -> R) -> R {
        switch storage {
        case .v4(var address):
            withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1, body) }
        case .v6(var address):
            withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1, body) }
        }
    }

    /// The textual form of a peer address; IPv4-mapped IPv6 addresses come out as IPv4.
    static func text(of address: UnsafePointer<sockaddr>) -> String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            var ip = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
            guard inet_ntop(AF_INET, &ip, &buffer, socklen_t(buffer.count)) != nil else { return "" }
        case AF_INET6:
            var ip = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
            let bytes = withUnsafeBytes(of: ip) { Array($0) }
            // As IPRange.unmapped in GatehouseCore, which this module does not import.
            if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
                return bytes[12..<16].map(String.init).joined(separator: ".")
            }
            guard inet_ntop(AF_INET6, &ip, &buffer, socklen_t(buffer.count)) != nil else { return "" }
        default:
            return ""
        }
        let length = buffer.firstIndex(of: 0) ?? buffer.count
        return String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
