import GatehouseCrypto

/// Seals secrets at rest with AES-256-GCM under a key derived from the master key. The additional
/// data binds each ciphertext to its app and field, so a sealed value copied to another app or
/// field fails to open.
///
/// `v2.` values are sealed under ``MasterKeyDerivation/sealing``; `v1.` values, written before
/// every purpose had its own key, were sealed under the master key itself and are still opened
/// (each is sealed again as `v2.` when its app's settings are next written).
public struct SecretSealer: Sendable {
    private let cipher: AESGCM
    private let legacyCipher: AESGCM

    public init(masterKey: [UInt8]) throws(CryptoError) {
        cipher = try AESGCM(key: MasterKeyDerivation.key(for: .sealing, from: masterKey))
        legacyCipher = try AESGCM(key: masterKey)
    }

    /// Seals one of an app's secrets: `v1.` and the base64url of nonce || ciphertext || tag.
    public func seal(_ plaintext: String, app: AppID, field: String) -> String {
        seal(plaintext, context: "gatehouse/\(app.rawValue)/\(field)")
    }

    public func open(_ sealed: String, app: AppID, field: String) throws(CryptoError) -> String {
        try open(sealed, context: "gatehouse/\(app.rawValue)/\(field)")
    }

    /// Seals a value bound to `context` (the additional authenticated data).
    public func seal(_ plaintext: String, context: String) -> String {
        "v2." + Base64URL.encode(cipher.seal(Array(plaintext.utf8), associatedData: Array(context.utf8)))
    }

    public func open(_ sealed: String, context: String) throws(CryptoError) -> String {
        let version = sealed.prefix(3)
        guard version == "v2." || version == "v1.", let box = Base64URL.decode(sealed.dropFirst(3)) else {
            throw CryptoError(.malformedInput, "sealed value has an unknown format")
        }
        let opener = version == "v2." ? cipher : legacyCipher
        return String(decoding: try opener.open(box, associatedData: Array(context.utf8)), as: UTF8.self)
    }

    /// The server value that holds the sealed marker of ``verifyMatchesDatabase(_:)``.
    public static let checkName = "master_key_check"

    /// Checks that this master key is the one the database was written with: the first start
    /// stores a sealed marker, every later start must open it. Without this check a wrong key
    /// would only show up as errors on the first request that needs a secret.
    public func verifyMatchesDatabase(_ store: any Store) throws {
        let context = "gatehouse/server/master-key-check"
        if let marker = try store.serverValue(Self.checkName) {
            do { _ = try open(marker, context: context) } catch {
                throw MasterKeyMismatch()
            }
        } else {
            try store.setServerValueIfAbsent(Self.checkName, seal("gatehouse", context: context))
            // Another node may have won the race with another key: read back and check.
            if let marker = try store.serverValue(Self.checkName), (try? open(marker, context: context)) == nil { throw MasterKeyMismatch() }
        }
    }
}

/// The configured master key cannot open what the database holds.
public struct MasterKeyMismatch: Error, CustomStringConvertible {
    public var description: String {
        "The master key does not match the one this database was written with. Start with the original GATEHOUSE_MASTER_KEY (or the master.key file of the data folder); secrets sealed with it cannot be read otherwise."
    }
}
