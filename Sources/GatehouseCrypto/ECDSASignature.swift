import COpenSSL

/// Conversion between OpenSSL's DER-encoded ECDSA signatures and the fixed-width `r || s` form
/// JWS uses (RFC 7518 §3.4). Uses OpenSSL's ECDSA_SIG codec, not a hand-written DER parser.
public enum ECDSASignature {
    /// Bytes per coordinate for P-256.
    static let coordinateByteCount = 32

    /// `r || s`, each left-padded to 32 bytes, from a DER `ECDSA-Sig-Value`; `nil` if malformed.
    public static func raw(fromDER der: [UInt8]) -> [UInt8]? {
        der.withUnsafeBufferPointer { buffer -> [UInt8]? in
            guard let start = buffer.baseAddress else { return nil }
            var cursor: UnsafePointer<UInt8>? = start
            guard let signature = d2i_ECDSA_SIG(nil, &cursor, buffer.count) else {
                OpenSSLErrorQueue.clear()
                return nil
            }
            defer { ECDSA_SIG_free(signature) }
            guard cursor == start + buffer.count else { return nil }  // trailing bytes
            var r: OpaquePointer?
            var s: OpaquePointer?
            ECDSA_SIG_get0(signature, &r, &s)
            var output = [UInt8](repeating: 0, count: 2 * coordinateByteCount)
            let written = output.withUnsafeMutableBufferPointer { out -> Bool in
                BN_bn2binpad(r, out.baseAddress, Int32(coordinateByteCount)) == Int32(coordinateByteCount)
                    && BN_bn2binpad(s, out.baseAddress! + coordinateByteCount, Int32(coordinateByteCount))
                        == Int32(coordinateByteCount)
            }
            return written ? output : nil
        }
    }

    /// A DER `ECDSA-Sig-Value` from exactly 64 bytes of `r || s`; `nil` for any other length.
    public static func der(fromRaw raw: [UInt8]) -> [UInt8]? {
        guard raw.count == 2 * coordinateByteCount else { return nil }
        guard let signature = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(signature) }
        let (r, s) = raw.withUnsafeBufferPointer { raw in
            (BN_bin2bn(raw.baseAddress, Int32(coordinateByteCount), nil),
             BN_bin2bn(raw.baseAddress! + coordinateByteCount, Int32(coordinateByteCount), nil))
        }
        guard let r, let s, ECDSA_SIG_set0(signature, r, s) == 1 else {
            // On failure ownership stays with us.
            BN_free(r)
            BN_free(s)
            return nil
        }
        let length = i2d_ECDSA_SIG(signature, nil)
        guard length > 0 else { return nil }
        var output = [UInt8](repeating: 0, count: Int(length))
        let written = output.withUnsafeMutableBufferPointer { out -> Int32 in
            var cursor = out.baseAddress
            return i2d_ECDSA_SIG(signature, &cursor)
        }
        return written == length ? output : nil
    }
}
