#if canImport(Security)
import Foundation
import Security

/// A session kept in the Keychain as one generic password item, readable after the device's
/// first unlock and never migrated to another device
/// (`kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`). Pass an `accessGroup` to share the
/// session with an app extension.
public final class KeychainSessionStore: SessionStore, Sendable {
    /// A Keychain call failed with `status` (an `OSStatus`).
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let status: Int32
        public var description: String { "Keychain error \(status)" }
    }

    public let service: String
    public let account: String
    public let accessGroup: String?

    public init(service: String = "GatehouseKit", account: String = "session", accessGroup: String? = nil) {
        self.service = service
        self.account = account
        self.accessGroup = accessGroup
    }

    private var query: [String: Any] {
        var query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: service,
            kSecAttrAccount as String: account,
        ]
        if let accessGroup { query[kSecAttrAccessGroup as String] = accessGroup }
        #if os(macOS)
        // The data-protection keychain, as on iOS: the file-based login keychain macOS uses
        // otherwise ignores kSecAttrAccessible.
        query[kSecUseDataProtectionKeychain as String] = true
        #endif
        return query
    }

    public func load() throws -> StoredSession? {
        var search = query
        search[kSecReturnData as String] = true
        search[kSecMatchLimit as String] = kSecMatchLimitOne
        var result: CFTypeRef?
        let status = SecItemCopyMatching(search as CFDictionary, &result)
        if status == errSecItemNotFound { return nil }
        guard status == errSecSuccess, let data = result as? Data else { throw Failure(status: status) }
        return try JSONDecoder().decode(StoredSession.self, from: data)
    }

    public func save(_ session: StoredSession) throws {
        let data = try JSONEncoder().encode(session)
        let update: [String: Any] = [
            kSecValueData as String: data,
            kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
        ]
        var status = SecItemUpdate(query as CFDictionary, update as CFDictionary)
        if status == errSecItemNotFound {
            var add = query
            for (key, value) in update { add[key] = value }
            status = SecItemAdd(add as CFDictionary, nil)
        }
        guard status == errSecSuccess else { throw Failure(status: status) }
    }

    public func clear() throws {
        let status = SecItemDelete(query as CFDictionary)
        guard status == errSecSuccess || status == errSecItemNotFound else { throw Failure(status: status) }
    }
}
#endif
