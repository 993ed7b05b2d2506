import Foundation

/// The rules for what users type: emails, names and passwords (API.md, "Numbers").
public enum InputRules {
    /// Trimmed and lowercased; ≤ 254 characters, one `@`, a non-empty local part, a domain with a
    /// dot, no spaces or control characters.
    public static func email(_ raw: String, field: String = "email") throws(GatehouseError) -> String {
        let email = raw.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        let parts = email.split(separator: "@", omittingEmptySubsequences: false)
        guard email.count <= 254, parts.count == 2, !parts[0].isEmpty, parts[1].contains("."), !parts[1].hasPrefix("."),
            !parts[1].hasSuffix("."), !email.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.properties.generalCategory == .control })
        else { throw .validation(field, "Must be an email address.") }
        return email
    }

    /// A first or last name: trimmed, no control characters, at most 50 characters. Empty means none.
    public static func name(_ raw: String, field: String) throws(GatehouseError) -> String? {
        let name = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        guard name.count <= 50 else { throw .validation(field, "Must be at most 50 characters.") }
        guard !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw .validation(field, "Must not contain control characters.")
        }
        return name.isEmpty ? nil : name
    }

    /// 8–128 characters, at least the app's minimum. Under the minimum is `auth/weak-password`;
    /// over 128 is a validation error.
    public static func newPassword(_ password: String, minimum: Int64, field: String = "password") throws(GatehouseError) {
        if password.count > 128 { throw .validation(field, "Must be at most 128 characters.") }
        if password.count < max(8, minimum) {
            throw GatehouseError(.weakPassword, "Use at least \(max(8, minimum)) characters.", fieldErrors: [FieldError(field, "Too short.")])
        }
    }
}
