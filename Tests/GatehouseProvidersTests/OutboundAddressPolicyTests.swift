import Foundation
import GatehouseCore
import GatehouseHTTP
import GatehouseOutbound
import GatehouseProviders
import GatehouseTesting
import Testing

@Suite struct OutboundAddressPolicyTests {
    static let classified: [(String, AddressClass)] = [
        ("8.8.8.8", .global), ("17.253.144.10", .global), ("1.1.1.1", .global), ("100.128.0.1", .global),
        ("172.32.0.1", .global), ("169.255.0.1", .global), ("192.0.1.1", .global), ("223.255.255.255", .global),
        ("127.0.0.1", .loopback), ("127.255.255.254", .loopback), ("::1", .loopback),
        ("10.0.0.1", .private), ("172.16.0.1", .private), ("172.31.255.255", .private), ("192.168.1.1", .private),
        ("fc00::1", .private), ("fd12:3456::1", .private), ("fec0::1", .private), ("64:ff9b:1::a00:1", .private),
        ("169.254.0.1", .linkLocal), ("fe80::1", .linkLocal), ("febf::1", .linkLocal),
        ("100.64.0.1", .sharedAddressSpace), ("100.127.255.255", .sharedAddressSpace),
        ("0.0.0.0", .unspecified), ("0.1.2.3", .unspecified), ("::", .unspecified),
        ("224.0.0.1", .multicast), ("239.255.255.250", .multicast), ("ff02::1", .multicast),
        ("169.254.169.254", .metadata), ("fd00:ec2::254", .metadata),
        ("255.255.255.255", .reserved), ("240.0.0.1", .reserved), ("192.0.2.1", .reserved), ("198.18.0.1", .reserved),
        ("2001:db8::1", .reserved), ("100::1", .reserved),
        // IPv6 that carries an IPv4 address is what that address is.
        ("::ffff:10.0.0.1", .private), ("::ffff:127.0.0.1", .loopback), ("::ffff:169.254.169.254", .metadata),
        ("::ffff:8.8.8.8", .global), ("::10.0.0.1", .private),
        ("64:ff9b::10.0.0.1", .private), ("64:ff9b::7f00:1", .loopback), ("64:ff9b::8.8.8.8", .global),
        ("2002:a00:1::1", .private), ("2002:7f00:1::", .loopback), ("2002:808:808::1", .global),
        // SIIT's IPv4-translated form, ::ffff:0:a.b.c.d.
        ("::ffff:0:10.0.0.1", .private), ("::ffff:0:127.0.0.1", .loopback), ("::ffff:0:169.254.169.254", .metadata),
        ("::ffff:0:192.168.0.1", .private), ("::ffff:0:8.8.8.8", .global),
        // NAT64, well-known and local-use prefixes.
        ("64:ff9b::192.168.1.1", .private), ("64:ff9b::a9fe:a9fe", .metadata), ("64:ff9b:1::8.8.8.8", .private),
        // IPv4-compatible and 6to4 carrying other internal ranges.
        ("::127.0.0.1", .loopback), ("::169.254.169.254", .metadata), ("2002:c0a8:101::1", .private),
        ("2002:a9fe:a9fe::", .metadata), ("2002:6440:1::1", .sharedAddressSpace),
        // Teredo 2001:0:<server v4>:<flags>:<port>:<client v4 with every bit flipped>.
        ("2001:0:4136:e378:8000:63bf:f5ff:fffe", .private),  // client 10.0.0.1
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", .loopback),  // client 127.0.0.1
        ("2001:0:4136:e378:8000:63bf:5601:5601", .metadata),  // client 169.254.169.254
        ("2001:0:4136:e378:8000:63bf:3f57:57fe", .private),  // client 192.168.168.1
        ("2001:0:a00:1:8000:63bf:f7f7:f7f7", .private),  // server 10.0.0.1, client 8.8.8.8
        ("2001:0:4136:e378:8000:63bf:f7f7:f7f7", .global),  // server 65.54.227.120, client 8.8.8.8
        ("2001:4860:4860::8888", .global),  // 2001::/23 outside Teredo's /32 is ordinary
        ("2606:4700:4700::1111", .global), ("2a00:1450:4001:80b::200e", .global),
    ]

    @Test func addressesAreClassifiedByWhereTheyLead() throws {
        for (text, expected) in Self.classified {
            let bytes = try #require(IPRange.parseAddress(text), "\(text)")
            #expect(OutboundAddressPolicy.classify(bytes) == expected, "\(text)")
            #expect((OutboundAddressPolicy.globalOnly.refusal(of: bytes) == nil) == (expected == .global), "\(text)")
            #expect(OutboundAddressPolicy.anyAddress.refusal(of: bytes) == nil, "\(text)")
        }
        #expect(OutboundAddressPolicy.classify([1, 2, 3]) == .reserved)
        #expect(OutboundAddressPolicy.globalOnly.refusal(of: []) == .reserved)
        #expect(OutboundAddressPolicy.forTenantURLs(allowPrivate: false) == .globalOnly)
        #expect(OutboundAddressPolicy.forTenantURLs(allowPrivate: true) == .anyAddress)
    }

    /// The check runs on the address libcurl is about to connect to: a literal address and a
    /// name (`localhost`, resolved first) are refused alike, and the server never sees a request.
    @Test(arguments: ["127.0.0.1", "localhost", "[::ffff:127.0.0.1]"])
    func aTenantURLToALoopbackAddressIsRefusedBeforeAnyByteIsSent(_ host: String) throws {
        let server = try FakeHTTPServer { request, _ in request.path == "/hook" ? HTTPResponse(status: 204) : nil }
        defer { server.stop() }
        let tenant = OutboundHTTPClient(timeoutSeconds: 5, addressPolicy: .forTenantURLs(allowPrivate: false))
        let url = "http://\(host):\(server.port)/hook"
        guard case .addressRefused(let reason)? = providerError({ try tenant.postForm(url, fields: [("event", "x")]) }) else {
            Issue.record("\(url) was not refused for its address")
            return
        }
        #expect(reason.contains("(loopback)") && !reason.contains("127.0.0.1 "), "\(reason)")
        #expect(server.requests.isEmpty)

        // With private outbound allowed (local development), the same call goes through.
        let allowed = OutboundHTTPClient(timeoutSeconds: 5, addressPolicy: .forTenantURLs(allowPrivate: true))
        if host != "[::ffff:127.0.0.1]" {  // curl may connect over IPv6 there; the fake listens on IPv4
            #expect(try allowed.postForm(url, fields: [("event", "x")]).status == 204)
            #expect(server.requests == ["POST /hook"])
        }
        #expect(server.errors.isEmpty)
    }

    /// Not even a TCP connection is made: the refused socket is never opened.
    @Test func aRefusedAddressIsNeverConnectedTo() throws {
        let listener = try SilentListener()
        let tenant = OutboundHTTPClient(timeoutSeconds: 2, addressPolicy: .globalOnly)
        let error = providerError { try tenant.get("http://127.0.0.1:\(listener.port)/") }
        guard case .addressRefused? = error else {
            Issue.record("expected addressRefused, got \(String(describing: error))")
            return
        }
        #expect(listener.acceptedConnections() == 0)
        // The server's own URLs are not restricted: the same listener takes a trusted client's connection.
        _ = providerError { try OutboundHTTPClient(timeoutSeconds: 1).get("http://127.0.0.1:\(listener.port)/") }
        #expect(listener.acceptedConnections() == 1)
    }
}
