import Foundation
import GatehouseCrypto

extension AppSettings {
    /// The `passkeys` section (ADR 0028): the WebAuthn relying party id and the web origins whose
    /// pages may use it. Absent (null): passkey calls answer 503 `auth/provider-not-configured`.
    public struct Passkeys: Sendable, Equatable {
        /// A domain of every origin's host (`example.com` for `https://app.example.com`), or `localhost`.
        public var rpID: String
        /// `https://host[:port]`, `http://localhost[:port]` for development, or an Android app's
        /// `android:apk-key-hash:<base64url SHA-256 of its signing certificate>` (what Credential
        /// Manager puts in `clientDataJSON.origin` for a native app).
        public var origins: [String]
    }
}

extension AppSettings.Passkeys {
    static func decode(_ f: inout FieldReader, _ context: SettingsDecoding) -> Self? {
        let rpID = f.string("rp_id", maxLength: 253)?.lowercased()
        let origins = f.stringArray("origins", maxCount: 20, maxLength: 300)
        if rpID == nil, !f.errors.contains(where: { $0.field.hasSuffix("rp_id") }) { f.fail("rp_id", "Required: the relying party id, a domain such as example.com.") }
        if origins == nil, !f.errors.contains(where: { $0.field.hasSuffix("origins") }) { f.fail("origins", "Required: the web origins that use passkeys.") }
        guard let rpID, let origins else { return nil }
        guard Self.isDomain(rpID) else {
            f.fail("rp_id", "Must be a domain name (not an address, no scheme or port), such as example.com, or localhost.")
            return nil
        }
        if origins.isEmpty { f.fail("origins", "Must name at least one origin.") }
        var normalised: [String] = []
        for (i, origin) in origins.enumerated() {
            if origin.hasPrefix(Self.androidPrefix) {
                // An app's signing certificate digest: 32 bytes, base64url without padding.
                let digest = origin.dropFirst(Self.androidPrefix.count)
                guard digest.utf8.count == 43, let bytes = Base64URL.decode(String(digest)), bytes.count == 32 else {
                    f.fail(path: f.field("origins") + "[\(i)]", "An Android origin is android:apk-key-hash: and the base64url (no padding) SHA-256 of the app's signing certificate.")
                    continue
                }
                normalised.append(origin)
                continue
            }
            guard let c = URLComponents(string: origin), let scheme = c.scheme?.lowercased(), let host = c.host?.lowercased(), !host.isEmpty,
                c.user == nil, c.password == nil, c.path.isEmpty, c.query == nil, c.fragment == nil
            else {
                f.fail(path: f.field("origins") + "[\(i)]", "Must be an origin: https://host[:port], no path.")
                continue
            }
            guard scheme == "https" || (scheme == "http" && host == "localhost") else {
                f.fail(path: f.field("origins") + "[\(i)]", "Must be https (http only for localhost).")
                continue
            }
            guard host == rpID || host.hasSuffix("." + rpID) else {
                f.fail(path: f.field("origins") + "[\(i)]", "Its host \(host) is not \(rpID) or a subdomain of it: rp_id must be a registrable suffix of every origin's host.")
                continue
            }
            normalised.append(c.port.map { "\(scheme)://\(host):\($0)" } ?? "\(scheme)://\(host)")
        }
        return Self(rpID: rpID, origins: uniqued(normalised))
    }

    /// The origin Android's Credential Manager gives a native app's ceremonies.
    static let androidPrefix = "android:apk-key-hash:"

    /// A DNS name of at least two labels (a public suffix alone cannot be checked here; the
    /// browser refuses it), or `localhost`.
    static func isDomain(_ s: String) -> Bool {
        if s == "localhost" { return true }
        let labels = s.split(separator: ".", omittingEmptySubsequences: false)
        guard labels.count >= 2, s.utf8.count <= 253 else { return false }
        let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789-")
        for label in labels {
            guard !label.isEmpty, label.count <= 63, label.allSatisfy(allowed.contains), label.first != "-", label.last != "-" else { return false }
        }
        // An IPv4 address is not a domain.
        return !labels.allSatisfy { $0.allSatisfy(\.isNumber) } && !(labels.last!.allSatisfy(\.isNumber))
    }

    var json: JSON { ["rp_id": .string(rpID), "origins": .strings(origins)] }
}
