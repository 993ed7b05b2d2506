import GatehouseCrypto

/// Seals secrets at rest with AES-256-GCM under the master key. The additional data binds each
/// ciphertext to its app and field, so a sealed value copied to another app or field fails to open.
public struct SecretSealer: Sendable {
    private let cipher: AESGCM

    public init(masterKey: [UInt8]) throws(CryptoError) {
        cipher = try AESGCM(key: masterKey)
    }

    /// Base64url text of nonce || ciphertext || tag.
    public func seal(_ plaintext: String, app: AppID, field: String) -> String {
        "v1." + Base64URL.encode(cipher.seal(Array(plaintext.utf8), associatedData: Self.context(app, field)))
    }

    public func open(_ sealed: String, app: AppID, field: String) throws(CryptoError) -> String {
        guard sealed.hasPrefix("v1."), let box = Base64URL.decode(sealed.dropFirst(3)) else {
            throw CryptoError(.malformedInput, "sealed value has an unknown format")
        }
        let bytes = try cipher.open(box, associatedData: Self.context(app, field))
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func context(_ app: AppID, _ field: String) -> [UInt8] {
        Array("gatehouse/\(app.rawValue)/\(field)".utf8)
    }
}
