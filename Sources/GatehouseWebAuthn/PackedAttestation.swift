import COpenSSL
import GatehouseCrypto

/// The `packed` attestation statement (WebAuthn §8.2): `{alg, sig}` signed by the credential key
/// itself (self attestation), or `{alg, sig, x5c}` signed by the key of the first certificate.
/// The certificate is read by OpenSSL and held to §8.2.1's rules; its chain is not walked to a
/// vendor root (Gatehouse asks for `attestation: "none"` and keeps no metadata service).
enum PackedAttestation {
    static func verify(_ statement: CBORValue, signed: [UInt8], credentialKey: COSEKey, aaguid: [UInt8], now: Int64) throws(WebAuthnError) {
        guard let alg = statement[text: "alg"]?.integer, let algorithm = COSEAlgorithm(rawValue: alg) else {
            throw WebAuthnError("The packed attestation's algorithm is not supported.")
        }
        guard let signature = statement[text: "sig"]?.bytesValue else { throw WebAuthnError("The packed attestation has no signature.") }
        if let chain = statement[text: "x5c"] {
            guard case .array(let certificates) = chain, let leaf = certificates.first?.bytesValue else {
                throw WebAuthnError("The packed attestation's x5c must be an array of certificates.")
            }
            let key = try AttestationCertificate.check(leaf, aaguid: aaguid, now: now)
            guard key.algorithm == (algorithm == .es256 ? .es256 : .rs256) else {
                throw WebAuthnError("The packed attestation's algorithm does not match its certificate's key.")
            }
            let valid = switch algorithm {
            case .rs256: key.verify(signature: signature, message: signed)
            case .es256: ECDSASignature.raw(fromDER: signature).map { key.verify(signature: $0, message: signed) } ?? false
            }
            guard valid else { throw WebAuthnError("The packed attestation's signature does not verify with its certificate.") }
        } else {
            guard algorithm == credentialKey.algorithm else {
                throw WebAuthnError("The packed self attestation's algorithm is not the credential's.")
            }
            guard credentialKey.verify(signature: signature, message: signed) else {
                throw WebAuthnError("The packed self attestation's signature does not verify with the credential key.")
            }
        }
    }
}

/// An attestation certificate (WebAuthn §8.2.1), read with OpenSSL: X.509 version 3, not a CA,
/// valid now, subject OU `Authenticator Attestation`, and when it carries the FIDO AAGUID
/// extension (1.3.6.1.4.1.45724.1.1.4), the credential's AAGUID.
enum AttestationCertificate {
    static func check(_ der: [UInt8], aaguid: [UInt8], now: Int64) throws(WebAuthnError) -> VerificationKey {
        let certificate: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return d2i_X509(nil, &cursor, buffer.count)
        }
        guard let certificate else {
            ERR_clear_error()
            throw WebAuthnError("The attestation certificate is not DER X.509.", malformed: true)
        }
        defer { X509_free(certificate) }
        guard X509_get_version(certificate) == 2 else { throw WebAuthnError("The attestation certificate must be X.509 version 3.") }
        guard X509_check_ca(certificate) == 0 else { throw WebAuthnError("The attestation certificate must not be a CA.") }
        var time = time_t(now / 1000)
        guard X509_cmp_time(X509_get0_notBefore(certificate), &time) < 0, X509_cmp_time(X509_get0_notAfter(certificate), &time) > 0 else {
            throw WebAuthnError("The attestation certificate is not valid at this time.")
        }
        guard subjectUnit(certificate) == "Authenticator Attestation" else {
            throw WebAuthnError("The attestation certificate's subject OU must be Authenticator Attestation.")
        }
        if let extensionAAGUID = try aaguidExtension(certificate), extensionAAGUID != aaguid {
            throw WebAuthnError("The attestation certificate's AAGUID is not the authenticator's.")
        }
        guard let publicKey = X509_get0_pubkey(certificate) else { throw WebAuthnError("The attestation certificate has no public key.") }
        do {
            return try VerificationKey(pem: publicKeyPEM(publicKey))
        } catch {
            throw WebAuthnError("The attestation certificate's key is not an accepted key: \(error.reason)")
        }
    }

    private static func subjectUnit(_ certificate: OpaquePointer) -> String? {
        guard let name = X509_get_subject_name(certificate) else { return nil }
        var buffer = [CChar](repeating: 0, count: 256)
        let length = X509_NAME_get_text_by_NID(name, NID_organizationalUnitName, &buffer, Int32(buffer.count))
        guard length > 0 else { return nil }
        return String(decoding: buffer[..<Int(length)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The AAGUID the certificate's extension names: its value is an OCTET STRING holding a
    /// 16-byte OCTET STRING, unwrapped by OpenSSL's DER decoder.
    private static func aaguidExtension(_ certificate: OpaquePointer) throws(WebAuthnError) -> [UInt8]? {
        guard let oid = OBJ_txt2obj("1.3.6.1.4.1.45724.1.1.4", 1) else { return nil }
        defer { ASN1_OBJECT_free(oid) }
        let index = X509_get_ext_by_OBJ(certificate, oid, -1)
        guard index >= 0, let ext = X509_get_ext(certificate, index), let data = X509_EXTENSION_get_data(ext) else { return nil }
        guard X509_EXTENSION_get_critical(ext) == 0 else { throw WebAuthnError("The attestation certificate's AAGUID extension must not be critical.") }
        guard let bytes = ASN1_STRING_get0_data(data) else { return nil }
        var cursor: UnsafePointer<UInt8>? = bytes
        guard let inner = d2i_ASN1_OCTET_STRING(nil, &cursor, Int(ASN1_STRING_length(data))) else {
            ERR_clear_error()
            throw WebAuthnError("The attestation certificate's AAGUID extension is malformed.")
        }
        defer { ASN1_OCTET_STRING_free(inner) }
        guard ASN1_STRING_length(inner) == 16, let value = ASN1_STRING_get0_data(inner) else {
            throw WebAuthnError("The attestation certificate's AAGUID extension is malformed.")
        }
        return Array(UnsafeBufferPointer(start: value, count: 16))
    }

    private static func publicKeyPEM(_ key: OpaquePointer) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        guard PEM_write_bio_PUBKEY(bio, key) == 1 else { return "" }
        let pending = Int(BIO_ctrl_pending(bio))
        var output = [UInt8](repeating: 0, count: pending)
        let read = output.withUnsafeMutableBytes { BIO_read(bio, $0.baseAddress, Int32(pending)) }
        return String(decoding: output.prefix(Int(max(read, 0))), as: UTF8.self)
    }
}
