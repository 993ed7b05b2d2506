import COpenSSL

/// SHA-256 fed piece by piece, for data too large to hold at once (a streamed upload).
///
/// Not thread-safe: one owner feeds it, then calls `finish()` once.
public final class SHA256Hasher {
    private let context: OpaquePointer

    /// A hasher with nothing fed yet.
    public init() {
        guard let context = EVP_MD_CTX_new(), EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1 else {
            fatalError("EVP_DigestInit_ex(SHA-256) failed: \(OpenSSLErrorQueue.drain() ?? "unknown")")
        }
        self.context = context
    }

    deinit {
        EVP_MD_CTX_free(context)
    }

    /// Feeds `bytes`.
    public func update(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        guard EVP_DigestUpdate(context, bytes.baseAddress, bytes.count) == 1 else {
            fatalError("EVP_DigestUpdate(SHA-256) failed: \(OpenSSLErrorQueue.drain() ?? "unknown")")
        }
    }

    /// Feeds `bytes`.
    public func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The digest (32 bytes) of everything fed. Call once; the hasher is spent afterwards.
    public func finish() -> [UInt8] {
        var output = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        guard EVP_DigestFinal_ex(context, &output, &length) == 1, length == 32 else {
            fatalError("EVP_DigestFinal_ex(SHA-256) failed: \(OpenSSLErrorQueue.drain() ?? "unknown")")
        }
        return output
    }
}
