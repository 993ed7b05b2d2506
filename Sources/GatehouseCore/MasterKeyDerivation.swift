import GatehouseCrypto

/// Every purpose gets its own key, derived from the master key with HKDF-SHA-256 (RFC 5869), so
/// that no two purposes share a key and none uses the master key itself: a key exposed through
/// one purpose (a checksum, a MAC) tells nothing about the others.
public enum MasterKeyDerivation {
    public enum Purpose: String, Sendable, CaseIterable {
        /// AES-256-GCM for secrets at rest (``SecretSealer``).
        case sealing = "gatehouse/v2/sealing"
        /// HMAC-SHA-256 over an applied `Tenants/` file's settings (``AppService``).
        case tenantChecksum = "gatehouse/v2/tenant-checksum"
        /// HMAC-SHA-256 that turns an email into the subject of its guessing limiter (``PasswordService``).
        case limiterSubjects = "gatehouse/v2/limiter-subjects"
        /// HMAC-SHA-256 of emailed codes and of the addresses they go to (``EmailCodes``).
        case emailCodes = "gatehouse/v2/email-codes"
        /// HMAC-SHA-256 of second-factor recovery codes (``MFAService``).
        case recoveryCodes = "gatehouse/v2/recovery-codes"
    }

    public static func key(for purpose: Purpose, from masterKey: [UInt8]) -> [UInt8] {
        HKDF.sha256(key: masterKey, info: Array(purpose.rawValue.utf8))
    }
}
