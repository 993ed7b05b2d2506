@testable import GatehouseHTTP
import Testing

/// The per-client connection count: IPv4 addresses one by one, IPv6 by /64 (a real-socket test
/// of the IPv4 side is in HTTPServerTests; loopback offers one IPv6 address, ::1).
@Suite struct ConnectionGuardTests {
    @Test func ipv6AddressesShareABucketPerSlash64AndIPv4AddressesOneEach() throws {
        func bucket(_ address: String) throws -> ConnectionBucket { try #require(ConnectionBucket(address: address)) }
        #expect(try bucket("2001:db8:1:2::1") == bucket("2001:db8:1:2:ffff:ffff:ffff:fffe"))
        #expect(try bucket("2001:db8:1:2::1") != bucket("2001:db8:1:3::1"))
        #expect(try bucket("192.0.2.1") != bucket("192.0.2.2"))
        // A dual-stack listener's IPv4 clients are IPv4-mapped, all inside ::/64: still one each.
        #expect(try bucket("::ffff:192.0.2.1") == bucket("192.0.2.1"))
        #expect(try bucket("::ffff:192.0.2.1") != bucket("::ffff:192.0.2.2"))
        #expect(try bucket("::1") != bucket("::ffff:0.0.0.1"))
        #expect(ConnectionBucket(address: "example.com") == nil)
    }

    @Test func oneSlash64GetsTheLimitWhateverAddressesItUses() throws {
        let guardian = ConnectionGuard(perClientLimit: 2, headerTimeoutMillis: 0)
        let network = try #require(ConnectionBucket(address: "2001:db8:0:7::1"))
        var open: [ConnectionRecord] = []
        for host in ["2001:db8:0:7::1", "2001:db8:0:7::2"] {
            let bucket = try #require(ConnectionBucket(address: host))
            #expect(guardian.mayAccept(bucket))
            open.append(guardian.opened(socket: -1, bucket: bucket, now: 1))
        }
        #expect(guardian.count(network) == 2)
        #expect(!guardian.mayAccept(ConnectionBucket(address: "2001:db8:0:7:abcd::99")), "a third host of the /64 is refused")
        #expect(guardian.mayAccept(ConnectionBucket(address: "2001:db8:0:8::1")), "the next /64 is another client")
        guardian.closed(open.removeFirst())
        #expect(guardian.count(network) == 1)
        #expect(guardian.mayAccept(ConnectionBucket(address: "2001:db8:0:7::3")))
        guardian.closed(open.removeFirst())
        #expect(guardian.count(network) == 0)
    }

    @Test func theSweepCutsOnlyConnectionsWaitingForHeadersPastTheDeadline() {
        let guardian = ConnectionGuard(perClientLimit: 0, headerTimeoutMillis: 1000)
        let waiting = guardian.opened(socket: -1, bucket: nil, now: 1000)
        let handling = guardian.opened(socket: -1, bucket: nil, now: 1000)
        handling.headersReceived()
        let fresh = guardian.opened(socket: -1, bucket: nil, now: 1800)
        #expect(guardian.sweep(now: 1900) == 0, "none is past the deadline yet")
        #expect(guardian.sweep(now: 2001) == 1, "only the one waiting since 1000")
        #expect(guardian.sweep(now: 2500) == 0, "and only once")
        fresh.requestEnded(now: 2500)  // a kept-alive connection waits for its next headers
        #expect(guardian.sweep(now: 3501) == 1)
        guardian.closed(handling)
        guardian.closed(fresh)
        guardian.closed(waiting)
    }
}
