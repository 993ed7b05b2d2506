import CCurl
import Glibc

/// Which addresses an outbound connection may reach, checked at connect time on the address
/// libcurl is about to connect to — after DNS resolution, for every address it tries, so a host
/// name that resolves (or re-resolves, DNS rebinding) to an internal address is caught too.
///
/// The server's own URLs (`GATEHOUSE_SMTP_URL`, the provider URLs) are trusted: ``anyAddress``.
/// URLs a tenant admin sets (an app's `email.smtp_url`, its webhooks) get ``forTenantURLs(allowPrivate:)``:
/// only global unicast addresses, unless `GATEHOUSE_ALLOW_PRIVATE_OUTBOUND=true` (local
/// development and tests). Behind `https_proxy` the check sees the proxy's address, not the
/// destination's: a tenant request through a proxy on a private address is refused.
public struct OutboundAddressPolicy: Sendable, Equatable {
    /// False: only ``AddressClass/global`` addresses may be reached.
    public let allowsNonGlobal: Bool

    /// Every address: for the server's own, operator-set URLs.
    public static let anyAddress = OutboundAddressPolicy(allowsNonGlobal: true)
    /// Global unicast addresses only.
    public static let globalOnly = OutboundAddressPolicy(allowsNonGlobal: false)

    /// The policy for URLs a tenant admin sets: ``globalOnly`` unless the server allows private
    /// outbound connections (`GATEHOUSE_ALLOW_PRIVATE_OUTBOUND`).
    public static func forTenantURLs(allowPrivate: Bool) -> OutboundAddressPolicy {
        allowPrivate ? .anyAddress : .globalOnly
    }

    /// `nil` when a connection to `address` (4 or 16 bytes) is allowed, else its class.
    public func refusal(of address: [UInt8]) -> AddressClass? {
        guard !allowsNonGlobal else { return nil }
        let kind = Self.classify(address)
        return kind == .global ? nil : kind
    }

    /// What kind of address `address` is (4 bytes IPv4, 16 bytes IPv6; anything else is
    /// ``AddressClass/reserved``). IPv4-mapped (`::ffff:a.b.c.d`), IPv4-translated (SIIT,
    /// `::ffff:0:a.b.c.d`), IPv4-compatible (`::a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`; the local-use
    /// `64:ff9b:1::/48` is private whatever it carries), 6to4 (`2002:aabb:ccdd::/48`) and Teredo
    /// (`2001:0:…`, its client's IPv4 in the last 32 bits, inverted) addresses are classified by
    /// the IPv4 address they carry, since that is where the packets end up.
    public static func classify(_ address: [UInt8]) -> AddressClass {
        switch address.count {
        case 4: return classifyV4(address)
        case 16: return classifyV6(address)
        default: return .reserved
        }
    }

    private static func classifyV4(_ a: [UInt8]) -> AddressClass {
        let (b0, b1, b2, b3) = (a[0], a[1], a[2], a[3])
        switch b0 {
        case 0: return .unspecified  // 0.0.0.0/8, "this network"; connecting to 0.0.0.0 reaches the host
        case 10: return .private
        case 100 where b1 & 0xC0 == 64: return .sharedAddressSpace  // 100.64.0.0/10
        case 127: return .loopback
        case 169 where b1 == 254: return b2 == 169 && b3 == 254 ? .metadata : .linkLocal
        case 172 where b1 & 0xF0 == 16: return .private  // 172.16.0.0/12
        case 192 where b1 == 168: return .private
        case 192 where b1 == 0 && (b2 == 0 || b2 == 2): return .reserved  // IETF assignments, TEST-NET-1
        case 198 where b1 & 0xFE == 18: return .reserved  // 198.18.0.0/15 benchmarking
        case 198 where b1 == 51 && b2 == 100, 203 where b1 == 0 && b2 == 113: return .reserved  // TEST-NET-2, -3
        case 224...239: return .multicast
        case 240...255: return .reserved  // 240.0.0.0/4 and the broadcast address
        default: return .global
        }
    }

    private static func classifyV6(_ a: [UInt8]) -> AddressClass {
        let v4 = Array(a[12...])
        if a[0..<10].allSatisfy({ $0 == 0 }) {
            if a[10] == 0xFF && a[11] == 0xFF { return classifyV4(v4) }  // ::ffff:0:0/96, IPv4-mapped
            if a[10] == 0 && a[11] == 0 {
                if v4 == [0, 0, 0, 0] { return .unspecified }  // ::
                if v4 == [0, 0, 0, 1] { return .loopback }  // ::1
                return classifyV4(v4)  // ::a.b.c.d, deprecated IPv4-compatible
            }
            return .reserved
        }
        // ::ffff:0:0:0/96, SIIT's IPv4-translated form (`::ffff:0:a.b.c.d`, RFC 7915 / 2765).
        if a[0..<8].allSatisfy({ $0 == 0 }) && a[8] == 0xFF && a[9] == 0xFF && a[10] == 0 && a[11] == 0 {
            return classifyV4(v4)
        }
        if a[0] == 0x00 && a[1] == 0x64 && a[2] == 0xFF && a[3] == 0x9B {
            if a[4..<12].allSatisfy({ $0 == 0 }) { return classifyV4(v4) }  // 64:ff9b::/96, NAT64
            if a[4] == 0 && a[5] == 1 { return .private }  // 64:ff9b:1::/48, local-use NAT64
        }
        if a[0] == 0x20 && a[1] == 0x02 { return classifyV4(Array(a[2..<6])) }  // 2002::/16, 6to4
        if a[0] == 0x20 && a[1] == 0x01 && a[2] == 0 && a[3] == 0 {
            // 2001::/32, Teredo (RFC 4380): the server's IPv4 in bits 32–63, the client's in the
            // last 32 bits with every bit flipped. Packets reach the client through a relay; either
            // address being internal makes the whole address so.
            let client = classifyV4(v4.map { ~$0 })
            return client != .global ? client : classifyV4(Array(a[4..<8]))
        }
        if a[0] == 0x20 && a[1] == 0x01 && a[2] == 0x0D && a[3] == 0xB8 { return .reserved }  // 2001:db8::/32, documentation
        if a[0] == 0x01 && a[1] == 0x00 && a[2..<8].allSatisfy({ $0 == 0 }) { return .reserved }  // 100::/64, discard-only
        if a[0] == 0xFF { return .multicast }  // ff00::/8
        if a[0] == 0xFE && a[1] & 0xC0 == 0x80 { return .linkLocal }  // fe80::/10
        if a[0] == 0xFE && a[1] & 0xC0 == 0xC0 { return .private }  // fec0::/10, deprecated site-local
        if a[0] & 0xFE == 0xFC {  // fc00::/7, unique local
            let ec2Metadata: [UInt8] = [0xFD, 0x00, 0x0E, 0xC2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54]
            return a == ec2Metadata ? .metadata : .private
        }
        return .global
    }
}

/// The kind of an IP address, as ``OutboundAddressPolicy`` sees it.
public enum AddressClass: String, Sendable {
    /// Reachable on the internet: the only kind ``OutboundAddressPolicy/globalOnly`` allows.
    case global
    /// 127.0.0.0/8, ::1.
    case loopback
    /// RFC 1918 (10/8, 172.16/12, 192.168/16), unique local fc00::/7, site-local fec0::/10, local-use NAT64.
    case `private`
    /// 169.254.0.0/16, fe80::/10.
    case linkLocal = "link-local"
    /// Carrier-grade NAT, 100.64.0.0/10.
    case sharedAddressSpace = "shared (CGNAT)"
    /// 0.0.0.0/8, ::.
    case unspecified
    /// 224.0.0.0/4, ff00::/8.
    case multicast
    /// Cloud instance metadata: 169.254.169.254, fd00:ec2::254.
    case metadata
    /// Documentation, benchmarking, 240/4, broadcast and other special-purpose ranges.
    case reserved
}

/// Installs an ``OutboundAddressPolicy`` on one curl easy handle through
/// `CURLOPT_OPENSOCKETFUNCTION`: every socket libcurl opens for the transfer (each address it
/// tries, each redirect it follows, whatever the protocol — http, smtp) is checked first, and a
/// refused one is never opened, so no byte leaves. The transfer then fails with
/// `CURLE_COULDNT_CONNECT` and ``refused`` says why.
///
/// Keep the guard alive until `curl_easy_perform` returns; the callback runs on that thread only.
public final class CurlAddressGuard {
    /// The policy every socket of the transfer is checked against.
    public let policy: OutboundAddressPolicy
    /// The class of the first refused address, e.g. `"loopback"`: not the address itself, which
    /// would map a name a tenant chose to the operator's internal addresses in the tenant's own
    /// listings and error details.
    public private(set) var refused: String?

    /// A guard for one transfer; ``install(on:)`` puts it on the handle.
    public init(policy: OutboundAddressPolicy) {
        self.policy = policy
    }

    /// Sets the callback on `handle`, and turns proxies off for it (a no-op for
    /// ``OutboundAddressPolicy/anyAddress``): through a proxy the callback would see only the
    /// proxy's address, and the proxy would reach whatever the URL names.
    public func install(on handle: UnsafeMutableRawPointer) -> CURLcode {
        guard !policy.allowsNonGlobal else { return CURLE_OK }
        var code = gh_curl_set_opensocket_function(handle, openCheckedSocket)
        guard code == CURLE_OK else { return code }
        code = gh_curl_setopt_ptr(handle, CURLOPT_OPENSOCKETDATA, Unmanaged.passUnretained(self).toOpaque())
        guard code == CURLE_OK else { return code }
        return gh_curl_setopt_string(handle, CURLOPT_NOPROXY, "*")
    }

    /// The socket for `address`, or `CURL_SOCKET_BAD` when the policy refuses it.
    fileprivate func open(_ address: UnsafeMutablePointer<curl_sockaddr>) -> curl_socket_t {
        let family = address.pointee.family
        let offset = MemoryLayout<curl_sockaddr>.offset(of: \curl_sockaddr.addr)!
        let socketAddress = UnsafeRawPointer(address) + offset
        let bytes: [UInt8]
        switch family {
        case AF_INET where address.pointee.addrlen >= UInt32(MemoryLayout<sockaddr_in>.size):
            var v4 = socketAddress.loadUnaligned(as: sockaddr_in.self).sin_addr
            bytes = withUnsafeBytes(of: &v4) { Array($0) }
        case AF_INET6 where address.pointee.addrlen >= UInt32(MemoryLayout<sockaddr_in6>.size):
            var v6 = socketAddress.loadUnaligned(as: sockaddr_in6.self).sin6_addr
            bytes = withUnsafeBytes(of: &v6) { Array($0) }
        default:
            bytes = []  // not an IP socket (a Unix socket): classified reserved
        }
        if let refusal = policy.refusal(of: bytes) {
            if refused == nil { refused = refusal.rawValue }
            return CURL_SOCKET_BAD
        }
        return socket(family, address.pointee.socktype | Int32(SOCK_CLOEXEC.rawValue), address.pointee.protocol)
    }
}

private let openCheckedSocket: curl_opensocket_callback = { context, _, address in
    guard let context, let address else { return CURL_SOCKET_BAD }
    return Unmanaged<CurlAddressGuard>.fromOpaque(context).takeUnretainedValue().open(address)
}
