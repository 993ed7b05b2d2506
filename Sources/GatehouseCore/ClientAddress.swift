/// The client's IP address: the peer's, unless the peer is a trusted proxy, in which case the
/// right-most address of `X-Forwarded-For` that is not itself a trusted proxy. Addresses left of
/// that are whatever the client wrote and are never believed. A forwarded address comes out in
/// its canonical spelling (``IPRange/canonical(_:)``), so that one client is one limiter subject.
public enum ClientAddress {
    public static func resolve(peer: String, forwardedFor: String?, trustedProxies: [IPRange]) -> String {
        guard !trustedProxies.isEmpty, let forwardedFor, isTrusted(peer, trustedProxies) else { return peer }
        let hops = forwardedFor.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        for hop in hops.reversed() {
            guard let address = IPRange.canonical(hop) else { return peer }  // garbage: fall back to what we know
            if !isTrusted(address, trustedProxies) { return address }
        }
        return hops.first.flatMap(IPRange.canonical) ?? peer
    }

    private static func isTrusted(_ address: String, _ ranges: [IPRange]) -> Bool {
        ranges.contains { $0.contains(address) }
    }
}
