import COpenSSL
import Synchronization

/// An HMAC-SHA-256 key (RFC 2104) set up once for many tags. OpenSSL 3 fetches the MAC and
/// digest implementations and absorbs the key's pads each time a context is keyed; under load,
/// with every HTTP thread doing it, the fetches' shared locks made a refresh token's successor
/// cost 1.5 % of the refresh. Each ``tag(_:)`` here copies a context keyed once.
/// ``Digest/hmacSHA256(key:data:)`` is the one-off form.
///
/// Thread safety: `@unchecked Sendable` is sound because `template` is never updated after `init`
/// and is copied only under `templateLock` (as ``SigningKey`` copies its template); each tag is
/// computed in its own copy.
public final class HMACKey: @unchecked Sendable {
    private let template: OpaquePointer
    private let templateLock = Mutex<Void>(())

    /// Keys a template context with `key` (any length, empty included).
    public init(_ key: [UInt8]) {
        guard let mac = EVP_MAC_fetch(nil, "HMAC", nil) else {
            fatalError("EVP_MAC_fetch(HMAC) failed: \(OpenSSLErrorQueue.drain() ?? "unknown")")
        }
        defer { EVP_MAC_free(mac) }
        guard let template = EVP_MAC_CTX_new(mac) else {
            fatalError("EVP_MAC_CTX_new failed: \(OpenSSLErrorQueue.drain() ?? "unknown")")
        }
        // OpenSSL 3 treats a NULL key as "no key"; an empty key needs a valid pointer.
        let keyBytes = key.isEmpty ? [0] : key
        let status = "SHA256".withCString { digest in
            var parameters = [
                OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, UnsafeMutablePointer(mutating: digest), 0),
                OSSL_PARAM_construct_end(),
            ]
            return keyBytes.withUnsafeBufferPointer { keyBuffer in
                EVP_MAC_init(template, keyBuffer.baseAddress, key.count, &parameters)
            }
        }
        guard status == 1 else {
            EVP_MAC_CTX_free(template)
            fatalError("EVP_MAC_init(HMAC-SHA-256) failed: \(OpenSSLErrorQueue.drain() ?? "unknown")")
        }
        self.template = template
    }

    deinit { EVP_MAC_CTX_free(template) }

    /// The 32-byte HMAC-SHA-256 tag of `data`. Compare tags with
    /// ``constantTimeEquals(_:_:)``, never with `==`.
    public func tag(_ data: [UInt8]) -> [UInt8] {
        guard let context = templateLock.withLock({ _ in EVP_MAC_CTX_dup(template) }) else {
            fatalError("EVP_MAC_CTX_dup failed: \(OpenSSLErrorQueue.drain() ?? "unknown")")
        }
        defer { EVP_MAC_CTX_free(context) }
        var output = [UInt8](repeating: 0, count: 32)
        var length = 0
        let status = data.withUnsafeBufferPointer { input in
            output.withUnsafeMutableBufferPointer { output in
                EVP_MAC_update(context, input.baseAddress, input.count) == 1
                    && EVP_MAC_final(context, output.baseAddress, &length, output.count) == 1
            }
        }
        guard status, length == 32 else {
            fatalError("HMAC-SHA-256 failed: \(OpenSSLErrorQueue.drain() ?? "unknown")")
        }
        return output
    }
}
