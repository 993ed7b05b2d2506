import COpenSSL

/// Hashes and MACs from OpenSSL libcrypto, plus lowercase hex formatting.
public enum Digest {
    /// The SHA-256 digest (32 bytes) of `data`.
    public static func sha256(_ data: some Sequence<UInt8>) -> [UInt8] {
        let input = Array(data)
        var output = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let status = input.withUnsafeBufferPointer { input in
            output.withUnsafeMutableBufferPointer { output in
                EVP_Digest(input.baseAddress, input.count, output.baseAddress, &length, EVP_sha256(), nil)
            }
        }
        guard status == 1, length == 32 else {
            fatalError("EVP_Digest(SHA-256) failed: \(OpenSSLErrorQueue.drain() ?? "unknown")")
        }
        return output
    }

    /// HMAC-SHA-256 (RFC 2104) of `data` under `key`; returns the 32-byte tag.
    ///
    /// Compare tags with ``constantTimeEquals(_:_:)``, never with `==`. For many tags under one
    /// key, keep an ``HMACKey``.
    public static func hmacSHA256(key: [UInt8], data: some Sequence<UInt8>) -> [UInt8] {
        HMACKey(key).tag(Array(data))
    }

    /// Lowercase hexadecimal text of `bytes`, two characters per byte.
    public static func hex(_ bytes: some Collection<UInt8>) -> String {
        // Looped over as an array: a generic collection is walked through witness calls per byte
        // when the caller is in another module (a request id's 12 bytes cost 3 % of `/healthz`).
        let input = Array(bytes)
        return String(unsafeUninitializedCapacity: input.count * 2) { output in
            var next = 0
            for byte in input {
                output[next] = hexDigit(byte >> 4)
                output[next + 1] = hexDigit(byte & 0x0F)
                next += 2
            }
            return next
        }
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 { nibble < 10 ? 0x30 + nibble : 0x57 + nibble }
}
