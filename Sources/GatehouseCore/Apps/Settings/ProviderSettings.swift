import Foundation
import GatehouseCrypto

extension AppSettings {
    /// The `apple` section.
    public struct Apple: Sendable, Equatable {
        public var clientIDs: [String] = []
        public var servicesID: String?
        public var teamID: String?
        public var keyID: String?
        /// The `.p8` key (PKCS#8 PEM, P-256), secret.
        public var privateKey: String?
        public var requireNonce = true
    }
    /// The `google` section.
    public struct Google: Sendable, Equatable {
        public var clientIDs: [String] = []
    }
    /// The `firebase` section.
    public struct Firebase: Sendable, Equatable {
        public var projectID: String?
        /// `hash_config`: the project's password hash parameters, which imported `firebase_scrypt`
        /// hashes without their own use. Its `signer_key` is a secret (sealed when stored, shown
        /// to admins as `{"set": true}`).
        public var hashConfig: FirebaseHashConfig?
    }
}

extension AppSettings.Apple {
    static func decode(_ f: inout FieldReader, _ context: SettingsDecoding) -> Self {
        var apple = Self()
        if let v = f.stringArray("client_ids", maxCount: 50, maxLength: 255) {
            for id in v where !isClientID(id) { f.fail("client_ids", "\(id) is not a valid client id.") }
            apple.clientIDs = uniqued(v)
        }
        if let v = f.string("services_id", maxLength: 255) {
            if isClientID(v) { apple.servicesID = v } else { f.fail("services_id", "Not a valid Services ID.") }
        }
        for (key, keyPath) in [("team_id", \Self.teamID), ("key_id", \Self.keyID)] {
            guard let v = f.string(key, maxLength: 10) else { continue }
            if v.utf8.count == 10, v.utf8.allSatisfy({ isUpperAlnum($0) }) { apple[keyPath: keyPath] = v } else {
                f.fail(key, "Must be 10 uppercase letters or digits, as Apple shows it.")
            }
        }
        apple.privateKey = context.secret(&f, "private_key", current: context.current?.apple.privateKey)
        if let pem = apple.privateKey, (try? SigningKey(pem: pem, algorithm: .es256)) == nil {
            f.fail("private_key", "Must be the .p8 key Apple gave you (PKCS#8 PEM, P-256).")
        }
        if let v = f.bool("require_nonce") { apple.requireNonce = v }
        return apple
    }

    func json(secrets: SecretRendering) -> JSON {
        [
            "client_ids": .strings(clientIDs), "services_id": .optional(servicesID), "team_id": .optional(teamID),
            "key_id": .optional(keyID), "private_key": secrets.render(privateKey, "apple.private_key"),
            "require_nonce": .bool(requireNonce),
        ]
    }
}

extension AppSettings.Google {
    static func decode(_ f: inout FieldReader, _ context: SettingsDecoding) -> Self {
        var google = Self()
        if let v = f.stringArray("client_ids", maxCount: 50, maxLength: 255) {
            for id in v where !isClientID(id) { f.fail("client_ids", "\(id) is not a valid client id.") }
            google.clientIDs = uniqued(v)
        }
        return google
    }

    var json: JSON { ["client_ids": .strings(clientIDs)] }
}

extension AppSettings.Firebase {
    static func decode(_ f: inout FieldReader, _ context: SettingsDecoding) -> Self {
        var firebase = Self()
        if let v = f.string("project_id", maxLength: 30) {
            if isFirebaseProjectID(v) { firebase.projectID = v } else { f.fail("project_id", "Must be a Firebase project id (6–30 lowercase letters, digits, hyphens).") }
        }
        firebase.hashConfig = hashConfig(&f, context)
        return firebase
    }

    /// `hash_config`: `{signer_key, salt_separator, rounds, mem_cost}`, checked by
    /// ``FirebaseHashConfig/decode(_:path:)``; `signer_key` read as a secret (`{"set": true}`
    /// keeps it; `signer_key_env`/`_file` in Tenants files).
    private static func hashConfig(_ f: inout FieldReader, _ context: SettingsDecoding) -> FirebaseHashConfig? {
        guard let raw = f.raw("hash_config") else { return nil }
        let path = f.field("hash_config")
        guard case .object(var plain) = raw else {
            f.fail("hash_config", "Must be an object {signer_key, salt_separator, rounds, mem_cost}, or null.")
            return nil
        }
        var secrets = FieldReader(raw, path: path)
        let current = context.current?.firebase.hashConfig.map { Data($0.signerKey).base64EncodedString() }
        let signerKey = context.secret(&secrets, "signer_key", current: current)
        f.absorb(secrets.errors)
        for key in ["signer_key", "signer_key_env", "signer_key_file"] { plain[key] = nil }
        guard secrets.errors.isEmpty else { return nil }
        guard let signerKey else {
            f.fail(path: "\(path).signer_key", "Required.")
            return nil
        }
        plain["signer_key"] = .string(signerKey)
        do {
            return try FirebaseHashConfig.decode(.object(plain), path: path)
        } catch {
            f.absorb(error.fieldErrors)
            return nil
        }
    }

    func json(secrets: SecretRendering) -> JSON {
        [
            "project_id": .optional(projectID),
            "hash_config": hashConfig.map { config in
                [
                    "signer_key": secrets.render(Data(config.signerKey).base64EncodedString(), "firebase.hash_config.signer_key"),
                    "salt_separator": .string(Data(config.saltSeparator).base64EncodedString()), "rounds": .int(Int64(config.rounds)),
                    "mem_cost": .int(Int64(config.memoryCost)),
                ]
            } ?? .null,
        ]
    }
}

private func isUpperAlnum(_ c: UInt8) -> Bool { (c >= 65 && c <= 90) || (c >= 48 && c <= 57) }

/// Apple bundle/Services ids and Google OAuth client ids: printable ASCII without spaces.
private func isClientID(_ s: String) -> Bool {
    !s.isEmpty && s.utf8.count <= 255 && s.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
}

private func isFirebaseProjectID(_ s: String) -> Bool {
    let u = Array(s.utf8)
    guard (6...30).contains(u.count), (97...122).contains(u[0]) else { return false }
    return u.allSatisfy { (97...122).contains($0) || (48...57).contains($0) || $0 == 45 }
}
