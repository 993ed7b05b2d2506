import GatehouseCrypto

/// The relying party's checks of WebAuthn ceremonies (Level 3, §7.1 and §7.2). The caller has
/// read the challenge from ``ClientData`` and made sure it is one it issued and has not used;
/// everything else is checked here. Always requires user presence and user verification.
public enum WebAuthnVerifier {
    /// Checks a registration: client data, authenticator data, the credential key and its
    /// attestation (`none`, or `packed`: self attestation or an `x5c` chain's leaf).
    public static func verifyRegistration(
        clientData: ClientData, attestationObject: [UInt8], challenge: String, relyingParty: RelyingParty, now: Int64
    ) throws(WebAuthnError) -> VerifiedRegistration {
        try check(clientData, type: "webauthn.create", challenge: challenge, relyingParty: relyingParty)
        let object: CBORValue
        do { object = try CBOR.decode(attestationObject) } catch { throw WebAuthnError("attestationObject is not valid CBOR.", malformed: true) }
        guard let format = object[text: "fmt"]?.textValue, let statement = object[text: "attStmt"], case .map = statement,
            let authDataBytes = object[text: "authData"]?.bytesValue
        else { throw WebAuthnError("attestationObject needs fmt, attStmt and authData.", malformed: true) }
        let authData = try AuthenticatorData(authDataBytes)
        try check(authData, relyingParty: relyingParty)
        guard let credential = authData.attestedCredential else { throw WebAuthnError("The authenticator data holds no credential.") }
        let key = try COSEKey(credential.publicKey)
        let signed = authData.raw + clientData.hash
        switch format {
        case "none":
            guard case .map(let members) = statement, members.isEmpty else { throw WebAuthnError("A none attestation must have an empty statement.") }
        case "packed":
            try PackedAttestation.verify(statement, signed: signed, credentialKey: key, aaguid: credential.aaguid, now: now)
        default:
            throw WebAuthnError("The attestation format \(format.prefix(32)) is not supported: use none or packed.")
        }
        return VerifiedRegistration(
            credentialID: credential.credentialID, publicKey: credential.publicKey, algorithm: key.algorithm, signCount: authData.signCount,
            aaguid: credential.aaguid, backupEligible: authData.flags.contains(.backupEligible), backedUp: authData.flags.contains(.backedUp),
            attestationFormat: format)
    }

    /// Checks an assertion made with the stored credential key `publicKey` (COSE).
    public static func verifyAssertion(
        clientData: ClientData, authenticatorData: [UInt8], signature: [UInt8], publicKey: [UInt8], challenge: String, relyingParty: RelyingParty
    ) throws(WebAuthnError) -> VerifiedAssertion {
        try check(clientData, type: "webauthn.get", challenge: challenge, relyingParty: relyingParty)
        let authData = try AuthenticatorData(authenticatorData)
        try check(authData, relyingParty: relyingParty)
        let key = try COSEKey(publicKey)
        guard key.verify(signature: signature, message: authData.raw + clientData.hash) else {
            throw WebAuthnError("The assertion's signature does not verify with this passkey.")
        }
        return VerifiedAssertion(
            signCount: authData.signCount, backupEligible: authData.flags.contains(.backupEligible), backedUp: authData.flags.contains(.backedUp))
    }

    private static func check(_ clientData: ClientData, type: String, challenge: String, relyingParty: RelyingParty) throws(WebAuthnError) {
        guard clientData.type == type else { throw WebAuthnError("clientDataJSON.type must be \(type).") }
        guard clientData.challenge == challenge else { throw WebAuthnError("clientDataJSON.challenge is not the challenge issued.") }
        guard relyingParty.origins.contains(clientData.origin) else {
            throw WebAuthnError("The origin \(clientData.origin.prefix(200)) is not one of this app's passkey origins.")
        }
        guard !clientData.crossOrigin else { throw WebAuthnError("Cross-origin ceremonies are not accepted.") }
    }

    private static func check(_ authData: AuthenticatorData, relyingParty: RelyingParty) throws(WebAuthnError) {
        guard constantTimeEquals(authData.rpIDHash, relyingParty.idHash) else {
            throw WebAuthnError("The authenticator data is for another relying party (rpIdHash does not match \(relyingParty.id)).")
        }
        guard authData.flags.contains(.userPresent) else { throw WebAuthnError("The authenticator did not report user presence (UP).") }
        guard authData.flags.contains(.userVerified) else { throw WebAuthnError("The authenticator did not verify the user (UV): it is required.") }
        if authData.flags.contains(.backedUp), !authData.flags.contains(.backupEligible) {
            throw WebAuthnError("The authenticator data says backed up (BS) but not backup eligible (BE).")
        }
    }
}
