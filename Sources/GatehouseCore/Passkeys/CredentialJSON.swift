import GatehouseCrypto

/// The members of a WebAuthn Level 3 `RegistrationResponseJSON` Gatehouse reads: only
/// `rawId` and `response.{clientDataJSON, attestationObject, transports}`. What browsers add
/// beside them (`authenticatorAttachment`, `clientExtensionResults`, `response.publicKey`,
/// `publicKeyAlgorithm`, `authenticatorData`) is ignored: the key is taken from the attestation
/// object alone.
struct RegistrationResponse {
    let rawID: [UInt8]
    let clientDataJSON: [UInt8]
    let attestationObject: [UInt8]
    let transports: [String]

    init(_ json: JSON) throws {
        var reader = CredentialReader(json)
        rawID = reader.rawID()
        let response = reader.response()
        clientDataJSON = reader.bytes(response, "clientDataJSON", maxBytes: 16 * 1024)
        attestationObject = reader.bytes(response, "attestationObject", maxBytes: 64 * 1024)
        var transports: [String] = []
        if case .array(let items)? = response?["transports"] {
            transports = items.compactMap(\.stringValue).filter { Self.knownTransports.contains($0) }
        }
        self.transports = Array(Set(transports)).sorted()
        try reader.finish()
    }

    static let knownTransports: Set<String> = ["usb", "nfc", "ble", "smart-card", "hybrid", "internal"]
}

/// The members of an `AuthenticationResponseJSON` Gatehouse reads.
struct AuthenticationResponse {
    let rawID: [UInt8]
    let clientDataJSON: [UInt8]
    let authenticatorData: [UInt8]
    let signature: [UInt8]
    let userHandle: [UInt8]?

    init(_ json: JSON) throws {
        var reader = CredentialReader(json)
        rawID = reader.rawID()
        let response = reader.response()
        clientDataJSON = reader.bytes(response, "clientDataJSON", maxBytes: 16 * 1024)
        authenticatorData = reader.bytes(response, "authenticatorData", maxBytes: 16 * 1024)
        signature = reader.bytes(response, "signature", maxBytes: 2048)
        if let value = response?["userHandle"], value != .null {
            let handle = reader.bytes(response, "userHandle", maxBytes: 64)
            userHandle = handle.isEmpty ? nil : handle
        } else {
            userHandle = nil
        }
        try reader.finish()
    }
}

/// Reads a credential object's base64url members, collecting every problem as a field error
/// under `credential.` (400 `request/validation-failed`).
private struct CredentialReader {
    let object: [String: JSON]?
    var errors: [FieldError] = []

    init(_ json: JSON) {
        object = json.objectValue
        if object == nil { errors.append(FieldError("credential", "Must be a WebAuthn credential object (PublicKeyCredential JSON).")) }
    }

    mutating func rawID() -> [UInt8] {
        guard let object else { return [] }
        if let type = object["type"], type != "public-key" { errors.append(FieldError("credential.type", "Must be public-key.")) }
        let raw = decode(object["rawId"], "credential.rawId", maxBytes: 1023)
        if let id = object["id"], id.stringValue.flatMap(Base64URL.decode) != raw, !raw.isEmpty {
            errors.append(FieldError("credential.id", "Must be the same credential id as rawId."))
        }
        return raw
    }

    mutating func response() -> [String: JSON]? {
        guard let object else { return nil }
        guard let response = object["response"]?.objectValue else {
            errors.append(FieldError("credential.response", "Required: an object."))
            return nil
        }
        return response
    }

    mutating func bytes(_ response: [String: JSON]?, _ key: String, maxBytes: Int) -> [UInt8] {
        guard let response else { return [] }
        return decode(response[key], "credential.response.\(key)", maxBytes: maxBytes)
    }

    private mutating func decode(_ value: JSON?, _ field: String, maxBytes: Int) -> [UInt8] {
        guard let text = value?.stringValue else {
            errors.append(FieldError(field, "Required: base64url without padding."))
            return []
        }
        guard text.utf8.count <= (maxBytes * 4 + 2) / 3 + 2, let bytes = Base64URL.decode(text), !bytes.isEmpty else {
            errors.append(FieldError(field, "Must be base64url without padding, at most \(maxBytes) bytes."))
            return []
        }
        return bytes
    }

    func finish() throws {
        if !errors.isEmpty { throw GatehouseError.validation(errors) }
    }
}
