import CMicroHTTPD

/// Reads what libmicrohttpd parsed from a connection's current request.
enum RequestReader {
    struct Collected {
        var headers = HTTPHeaders()
        var query: [(name: String, value: String)] = []
        /// Sum of header name and value lengths in bytes.
        var headerBytes = 0
    }

    private final class Collector {
        var collected = Collected()
    }

    static func read(connection: OpaquePointer) -> Collected {
        let collector = Collector()
        withExtendedLifetime(collector) {
            let pointer = Unmanaged.passUnretained(collector).toOpaque()
            _ = MHD_get_connection_values_n(connection, .HEADER_KIND, collectHeader, pointer)
            _ = MHD_get_connection_values_n(connection, .GET_ARGUMENT_KIND, collectArgument, pointer)
        }
        return collector.collected
    }

    static func remoteAddress(connection: OpaquePointer) -> String {
        guard let address = gatehouse_mhd_client_address(connection) else { return "" }
        return BindAddress.text(of: address)
    }

    private static let collectHeader: MHD_KeyValueIteratorN = { cls, _, key, keySize, value, valueSize in
        guard let cls else { return .YES }
        let collector = Unmanaged<Collector>.fromOpaque(cls).takeUnretainedValue()
        collector.collected.headerBytes += keySize + valueSize
        collector.collected.headers.add(text(key, keySize), text(value, withoutTrailingWhitespace(value, valueSize)))
        return .YES
    }

    /// The size of a header value without the spaces and tabs at its end, which are not part of
    /// it (RFC 9110, 5.5); libmicrohttpd drops only those at its start.
    private static func withoutTrailingWhitespace(_ value: UnsafePointer<CChar>?, _ size: Int) -> Int {
        guard let value else { return 0 }
        var size = size
        while size > 0, value[size - 1] == 0x20 || value[size - 1] == 0x09 { size -= 1 }
        return size
    }

    private static let collectArgument: MHD_KeyValueIteratorN = { cls, _, key, keySize, value, valueSize in
        guard let cls else { return .YES }
        let collector = Unmanaged<Collector>.fromOpaque(cls).takeUnretainedValue()
        collector.collected.query.append((name: text(key, keySize), value: text(value, valueSize)))
        return .YES
    }

    private static func text(_ pointer: UnsafePointer<CChar>?, _ size: Int) -> String {
        guard let pointer, size > 0 else { return "" }
        return pointer.withMemoryRebound(to: UInt8.self, capacity: size) {
            String(decoding: UnsafeBufferPointer(start: $0, count: size), as: UTF8.self)
        }
    }
}
