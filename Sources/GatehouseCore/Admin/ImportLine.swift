import Foundation

/// One line of an import (`POST /v1/admin/users/import`, `gatehouse users import`), checked:
/// `{email?, email_verified?, password_hash?, first_name?, last_name?, display_name?, locale?,
/// created_at?, identities?: [{provider, subject, email?}], app_metadata?, user_metadata?}`, and
/// an export line's `id` and `last_sign_in_at`, read and left (the import makes new ids; nobody
/// has signed in to the new account). Other fields are refused (an export's `ban` among them: a
/// ban is not imported); a line needs an email or an identity, and a password hash needs an email
/// (its sign-in name).
public struct ImportLine: Sendable, Equatable {
    public var email: String?
    public var emailVerified: Bool
    public var passwordHash: ImportedPasswordHash?
    public var firstName: String?
    public var lastName: String?
    public var displayName: String?
    public var locale: String?
    /// Milliseconds since 1970; nil: the time of the import.
    public var createdAt: Int64?
    /// Provider accounts (``providers(of:)``), linked at once: their users sign in with them.
    public var identities: [(provider: IdentityProvider, subject: String, email: String?)]
    public var appMetadata: UserMetadata
    public var userMetadata: UserMetadata

    /// The providers an imported identity may name: those whose sign-in finds a linked identity
    /// by the provider's own subject — Apple and Google (natively, on the web, or through a
    /// Firebase token, which carries the Apple or Google subject in `firebase.identities`), and
    /// the providers the app defines (`oidc_providers`, by their ids).
    public static func providers(of settings: AppSettings) -> [IdentityProvider] {
        [.apple, .google] + settings.oidcProviders.map { IdentityProvider(rawValue: $0.id) }
    }
    /// The most identities a line may have (one a provider).
    static let maxIdentities = 2 + AppSettings.OIDCProvider.maxCount
    /// Longest identity subject (Apple's and Google's are far shorter).
    static let maxSubjectLength = 255

    public static func == (lhs: ImportLine, rhs: ImportLine) -> Bool {
        lhs.email == rhs.email && lhs.emailVerified == rhs.emailVerified && lhs.passwordHash == rhs.passwordHash && lhs.firstName == rhs.firstName
            && lhs.lastName == rhs.lastName && lhs.displayName == rhs.displayName && lhs.locale == rhs.locale && lhs.createdAt == rhs.createdAt
            && lhs.identities.map(\.provider) == rhs.identities.map(\.provider) && lhs.identities.map(\.subject) == rhs.identities.map(\.subject)
            && lhs.identities.map(\.email) == rhs.identities.map(\.email) && lhs.appMetadata == rhs.appMetadata && lhs.userMetadata == rhs.userMetadata
    }

    /// Checks a parsed line with the rules of the rest of the API (email normalisation, the name
    /// rules, ``UserMetadata/checked(_:field:)``, ``ImportedPasswordHash/decode(_:firebase:path:)``),
    /// every problem at once. `firebase`: the app's `firebase.hash_config`. `now`: a `created_at`
    /// in the future is refused.
    public static func decode(
        _ json: JSON, firebase: FirebaseHashConfig?, providers: [IdentityProvider] = [.apple, .google], now: Int64
    ) throws(GatehouseError) -> ImportLine {
        var reader = FieldReader(json)
        var errors: [FieldError] = []
        func check<T>(_ work: () throws(GatehouseError) -> T?) -> T? {
            do { return try work() } catch {
                errors += error.fieldErrors.isEmpty ? [FieldError("body", error.detail ?? "Not valid.")] : error.fieldErrors
                return nil
            }
        }
        let email = reader.string("email", maxLength: 320).flatMap { raw in check { () throws(GatehouseError) in try InputRules.email(raw) } }
        let emailVerified = reader.bool("email_verified") ?? false
        let firstName = reader.string("first_name", maxLength: 1024).flatMap { raw in
            check { () throws(GatehouseError) in try InputRules.name(raw, field: "first_name") }
        }
        let lastName = reader.string("last_name", maxLength: 1024).flatMap { raw in
            check { () throws(GatehouseError) in try InputRules.name(raw, field: "last_name") }
        }
        let displayName = reader.string("display_name", maxLength: 1024).flatMap { raw in
            check { () throws(GatehouseError) in try InputRules.displayName(raw) }
        }
        let locale = reader.string("locale", maxLength: 64).flatMap { raw in check { () throws(GatehouseError) in try InputRules.locale(raw) } }
        let appMetadata = check { () throws(GatehouseError) in try UserMetadata.checked(reader.raw("app_metadata"), field: "app_metadata") } ?? .empty
        let userMetadata = check { () throws(GatehouseError) in try UserMetadata.checked(reader.raw("user_metadata"), field: "user_metadata") } ?? .empty
        // An export line's own: a new id is made, and the imported account has no sign-in yet.
        _ = reader.raw("id")
        _ = reader.raw("last_sign_in_at")
        let passwordHash = reader.raw("password_hash").flatMap { raw in
            check { () throws(GatehouseError) in try ImportedPasswordHash.decode(raw, firebase: firebase) }
        }
        let createdAt = createdAt(&reader, now: now)
        let identities = identities(&reader, providers: providers)
        reader.rejectUnknown()
        errors = reader.errors + errors
        if errors.isEmpty {
            if email == nil, identities.isEmpty {
                errors.append(FieldError("email", "Required: a line needs an email or an identity."))
            } else if passwordHash != nil, email == nil {
                errors.append(FieldError("email", "Required with password_hash: the email is what the user signs in with."))
            }
        }
        guard errors.isEmpty else { throw .validation(errors) }
        return ImportLine(
            email: email, emailVerified: email != nil && emailVerified, passwordHash: passwordHash, firstName: firstName, lastName: lastName,
            displayName: displayName, locale: locale, createdAt: createdAt, identities: identities, appMetadata: appMetadata, userMetadata: userMetadata)
    }

    /// `created_at`: RFC 3339 (as the API shows times) or whole milliseconds since 1970, not in
    /// the future.
    private static func createdAt(_ reader: inout FieldReader, now: Int64) -> Int64? {
        guard let raw = reader.raw("created_at") else { return nil }
        let millis: Int64?
        switch raw {
        case .string(let text) where text.utf8.count <= 64: millis = rfc3339Millis(text)
        case .int(let value): millis = value
        default: millis = nil
        }
        guard let millis, millis >= 0 else {
            reader.fail("created_at", "Must be an RFC 3339 time (2024-05-01T12:00:00Z) or milliseconds since 1970.")
            return nil
        }
        guard millis <= now + 60_000 else {
            reader.fail("created_at", "Must not be in the future.")
            return nil
        }
        return millis
    }

    private static func identities(
        _ reader: inout FieldReader, providers: [IdentityProvider]
    ) -> [(provider: IdentityProvider, subject: String, email: String?)] {
        guard let raw = reader.raw("identities") else { return [] }
        guard case .array(let items) = raw else {
            reader.fail("identities", "Must be an array of {provider, subject}.")
            return []
        }
        guard items.count <= maxIdentities else {
            reader.fail("identities", "Must have at most \(maxIdentities) items, one a provider.")
            return []
        }
        var result: [(provider: IdentityProvider, subject: String, email: String?)] = []
        for (index, item) in items.enumerated() {
            var entry = FieldReader(item, path: "identities[\(index)]")
            let provider = entry.string("provider", maxLength: 32)
            let subject = entry.string("subject", maxLength: maxSubjectLength)
            // The address the provider gave (an export has it): kept on the identity as given.
            let email = entry.string("email", maxLength: 320)
            for key in ["provider", "subject"] where !entry.has(key) { entry.fail(key, "Required.") }
            entry.rejectUnknown()
            reader.absorb(entry.errors)
            guard entry.errors.isEmpty, let provider, let subject else { continue }
            guard let known = providers.first(where: { $0.rawValue == provider }) else {
                reader.fail(
                    path: "identities[\(index)].provider",
                    "Must be one of \(providers.map(\.rawValue).joined(separator: ", ")) (apple, google, or the id of one of the app's oidc_providers).")
                continue
            }
            guard !subject.isEmpty, !InputRules.hasControlOrFormatCharacters(subject), subject == subject.trimmingCharacters(in: .whitespaces) else {
                reader.fail(path: "identities[\(index)].subject", "Must be the provider's user id: no spaces, control or formatting characters.")
                continue
            }
            guard !result.contains(where: { $0.provider == known }) else {
                reader.fail(path: "identities[\(index)].provider", "Only one identity a provider.")
                continue
            }
            result.append((known, subject, email.flatMap { try? InputRules.email($0) }))
        }
        return result
    }

    /// `2027-01-31T12:00:00Z`, with or without fractions of a second, or with an offset
    /// (`+09:00`); nil for anything else, a day that does not exist included. (Foundation's date
    /// formatters are slower to make than to use, and not safe to share between threads on Linux.)
    static func rfc3339Millis(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20 else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for byte in bytes[range] {
                guard (48...57).contains(byte) else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            return value
        }
        guard let year = number(0..<4), bytes[4] == UInt8(ascii: "-"), let month = number(5..<7), bytes[7] == UInt8(ascii: "-"),
            let day = number(8..<10), bytes[10] | 0x20 == UInt8(ascii: "t"), let hour = number(11..<13), bytes[13] == UInt8(ascii: ":"),
            let minute = number(14..<16), bytes[16] == UInt8(ascii: ":"), let second = number(17..<19),
            (1...12).contains(month), hour < 24, minute < 60, second < 60
        else { return nil }
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let monthDays = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        guard (1...monthDays[month - 1]).contains(day) else { return nil }
        var index = 19
        var millis = 0
        if bytes[index] == UInt8(ascii: ".") {
            let digits = bytes[(index + 1)...].prefix { (48...57).contains($0) }
            guard (1...9).contains(digits.count) else { return nil }
            for (position, digit) in digits.prefix(3).enumerated() { millis += Int(digit - 48) * [100, 10, 1][position] }
            index += 1 + digits.count
        }
        let zone = bytes[index...]
        var offset = 0
        if zone.count == 1, zone.first! | 0x20 == UInt8(ascii: "z") {
            offset = 0
        } else if zone.count == 6, zone.first == UInt8(ascii: "+") || zone.first == UInt8(ascii: "-"), bytes[index + 3] == UInt8(ascii: ":"),
            let hours = number((index + 1)..<(index + 3)), let minutes = number((index + 4)..<(index + 6)), hours < 24, minutes < 60
        {
            offset = (zone.first == UInt8(ascii: "+") ? 1 : -1) * (hours * 3600 + minutes * 60)
        } else {
            return nil
        }
        // Days since 1970-01-01 of a proleptic Gregorian date (the civil-from-days inverse).
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset
        return Int64(seconds) * 1000 + Int64(millis)
    }
}
