/// Authenticator data (WebAuthn §6.1): a fixed binary layout read here, with the credential's
/// COSE key measured and decoded by libcbor.
///
/// `rpIdHash` (32) ‖ `flags` (1) ‖ `signCount` (4, big-endian) ‖ [attested credential data:
/// `aaguid` (16) ‖ `credentialIdLength` (2) ‖ `credentialId` ‖ COSE key (CBOR)] ‖ [extensions (CBOR)].
public struct AuthenticatorData: Sendable, Equatable {
    public struct Flags: OptionSet, Sendable, Equatable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let userPresent = Flags(rawValue: 0x01)
        public static let userVerified = Flags(rawValue: 0x04)
        public static let backupEligible = Flags(rawValue: 0x08)
        public static let backedUp = Flags(rawValue: 0x10)
        public static let attestedCredentialData = Flags(rawValue: 0x40)
        public static let extensionData = Flags(rawValue: 0x80)
    }

    /// The credential an authenticator made (registration only).
    public struct AttestedCredential: Sendable, Equatable {
        public let aaguid: [UInt8]
        public let credentialID: [UInt8]
        /// The COSE_Key exactly as the authenticator encoded it.
        public let publicKey: [UInt8]
    }

    public let rpIDHash: [UInt8]
    public let flags: Flags
    public let signCount: UInt32
    public let attestedCredential: AttestedCredential?
    /// The bytes it was read from (signed over as they are).
    public let raw: [UInt8]

    /// Longest credential id accepted (WebAuthn's limit).
    public static let maximumCredentialIDLength = 1023

    public init(_ bytes: [UInt8]) throws(WebAuthnError) {
        guard bytes.count >= 37 else { throw WebAuthnError("The authenticator data is too short.", malformed: true) }
        raw = bytes
        rpIDHash = Array(bytes[0..<32])
        flags = Flags(rawValue: bytes[32])
        signCount = bytes[33..<37].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        var offset = 37
        if flags.contains(.attestedCredentialData) {
            guard bytes.count >= offset + 18 else { throw WebAuthnError("The attested credential data is too short.", malformed: true) }
            let aaguid = Array(bytes[offset..<offset + 16])
            let length = Int(bytes[offset + 16]) << 8 | Int(bytes[offset + 17])
            offset += 18
            guard length > 0, length <= Self.maximumCredentialIDLength, bytes.count >= offset + length else {
                throw WebAuthnError("The credential id's length is not valid.", malformed: true)
            }
            let credentialID = Array(bytes[offset..<offset + length])
            offset += length
            let read: Int
            do {
                (_, read) = try CBOR.decodePrefix(bytes[offset...])
            } catch {
                throw WebAuthnError("The credential public key is not valid CBOR.", malformed: true)
            }
            attestedCredential = AttestedCredential(aaguid: aaguid, credentialID: credentialID, publicKey: Array(bytes[offset..<offset + read]))
            offset += read
        } else {
            attestedCredential = nil
        }
        if flags.contains(.extensionData) {
            guard offset < bytes.count, let (_, read) = try? CBOR.decodePrefix(bytes[offset...]) else {
                throw WebAuthnError("The authenticator extension data is not valid CBOR.", malformed: true)
            }
            offset += read
        }
        guard offset == bytes.count else { throw WebAuthnError("The authenticator data has trailing bytes.", malformed: true) }
    }
}
