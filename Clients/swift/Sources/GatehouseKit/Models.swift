import Foundation

/// A way to sign in (`identities` of a user, `sign_in_methods` of an app). A struct rather than
/// an enum so that a value a newer server adds decodes too.
public struct SignInProvider: RawRepresentable, Codable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(from decoder: any Decoder) throws { rawValue = try decoder.singleValueContainer().decode(String.self) }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
    public var description: String { rawValue }

    public static let password = SignInProvider(rawValue: "password")
    public static let apple = SignInProvider(rawValue: "apple")
    public static let google = SignInProvider(rawValue: "google")
    /// A sign-in method of an app (`sign_in_methods`), not an identity.
    public static let emailCode = SignInProvider(rawValue: "email_code")
}

/// The user object.
public struct User: Codable, Sendable, Equatable {
    public let id: String
    public let email: String?
    public let emailVerified: Bool
    public let firstName: String?
    public let lastName: String?
    /// Absolute URL of the photo, when set.
    public let photoURL: URL?
    /// The user's language (a BCP 47 tag such as `ja` or `ko-KR`): the language of their mail.
    public let locale: String?
    /// The name the user chose to be shown by, when set.
    public let displayName: String?
    /// Custom data only the app's admin sets (also in the access token): read it, never trust a
    /// change made here.
    public let appMetadata: [String: MetadataValue]
    /// Custom data the user sets (``GatehouseClient/updateUser(firstName:lastName:locale:displayName:userMetadata:photoFileID:)``).
    public let userMetadata: [String: MetadataValue]
    /// Made by ``GatehouseClient/signInAnonymously(locale:)`` and not upgraded yet: no email, no
    /// sign-in method. Linking a password (with an email), a confirmed email or a provider makes
    /// it false, the same ``id``.
    public let isAnonymous: Bool
    public let createdAt: Date
    public let lastSignInAt: Date?
    /// The sign-in methods linked to the account (`password`, `apple`, `google`).
    public let identities: [SignInProvider]

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(String.self, forKey: .id)
        email = try container.decodeIfPresent(String.self, forKey: .email)
        emailVerified = try container.decode(Bool.self, forKey: .emailVerified)
        firstName = try container.decodeIfPresent(String.self, forKey: .firstName)
        lastName = try container.decodeIfPresent(String.self, forKey: .lastName)
        photoURL = try container.decodeIfPresent(URL.self, forKey: .photoURL)
        locale = try container.decodeIfPresent(String.self, forKey: .locale)
        // A server before custom data sends none of these.
        displayName = try container.decodeIfPresent(String.self, forKey: .displayName)
        appMetadata = try container.decodeIfPresent([String: MetadataValue].self, forKey: .appMetadata) ?? [:]
        userMetadata = try container.decodeIfPresent([String: MetadataValue].self, forKey: .userMetadata) ?? [:]
        // A server before anonymous users sends none: no user of it is anonymous.
        isAnonymous = try container.decodeIfPresent(Bool.self, forKey: .isAnonymous) ?? false
        createdAt = try container.decode(Date.self, forKey: .createdAt)
        lastSignInAt = try container.decodeIfPresent(Date.self, forKey: .lastSignInAt)
        identities = try container.decode([SignInProvider].self, forKey: .identities)
    }

    enum CodingKeys: String, CodingKey {
        case id, email, identities, locale
        case displayName = "display_name"
        case appMetadata = "app_metadata"
        case userMetadata = "user_metadata"
        case isAnonymous = "is_anonymous"
        case emailVerified = "email_verified"
        case firstName = "first_name"
        case lastName = "last_name"
        case photoURL = "photo_url"
        case createdAt = "created_at"
        case lastSignInAt = "last_sign_in_at"
    }
}

/// A JSON value of custom data (`app_metadata`, `user_metadata`). Whole numbers decode as
/// ``int(_:)``, others as ``double(_:)``.
public enum MetadataValue: Codable, Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([MetadataValue])
    case object([String: MetadataValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .int(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([MetadataValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: MetadataValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}

extension MetadataValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: MetadataValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, MetadataValue)...) { self = .object(Dictionary(elements) { _, last in last }) }
    public init(nilLiteral: ()) { self = .null }
}

/// What a sign-in answered.
public struct SignInResult: Sendable, Equatable {
    public let user: User
    /// The call created the account (HTTP 201).
    public let isNewUser: Bool
    /// The call restored an account pending deletion.
    public let isRestored: Bool
}

/// One sign-in method linked to the user (`GET /v1/me/identities`).
public struct Identity: Decodable, Sendable, Equatable {
    public let provider: SignInProvider
    public let email: String?
    public let createdAt: Date

    enum CodingKeys: String, CodingKey {
        case provider, email
        case createdAt = "created_at"
    }
}

/// One signed-in device (`GET /v1/me/sessions`).
public struct DeviceSession: Decodable, Sendable, Equatable {
    public let id: String
    /// This is the session of the calling client.
    public let current: Bool
    /// How it signed in: `password`, `email_code`, `apple`, `google`, `passkey`.
    public let method: String
    public let createdAt: Date
    public let lastUsedAt: Date
    public let ip: String?
    public let userAgent: String?

    enum CodingKeys: String, CodingKey {
        case id, current, method, ip
        case createdAt = "created_at"
        case lastUsedAt = "last_used_at"
        case userAgent = "user_agent"
    }
}

/// The app's public settings (`GET /v1/app`).
public struct AppInfo: Decodable, Sendable, Equatable {
    public struct Files: Decodable, Sendable, Equatable {
        public let maxBytes: Int
        public let photoTypes: [String]
        enum CodingKeys: String, CodingKey {
            case maxBytes = "max_bytes"
            case photoTypes = "photo_types"
        }
    }

    public let id: String
    public let name: String
    public let requireVerifiedEmail: Bool
    public let signInMethods: [SignInProvider]
    public let passwordMinLength: Int
    /// Whether ``GatehouseClient/signInAnonymously(locale:)`` is open (the app's `allow_anonymous`).
    public let allowAnonymous: Bool
    public let files: Files

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(String.self, forKey: .id)
        name = try container.decode(String.self, forKey: .name)
        requireVerifiedEmail = try container.decode(Bool.self, forKey: .requireVerifiedEmail)
        signInMethods = try container.decode([SignInProvider].self, forKey: .signInMethods)
        passwordMinLength = try container.decode(Int.self, forKey: .passwordMinLength)
        // A server before anonymous users sends none: it has none.
        allowAnonymous = try container.decodeIfPresent(Bool.self, forKey: .allowAnonymous) ?? false
        files = try container.decode(Files.self, forKey: .files)
    }

    enum CodingKeys: String, CodingKey {
        case id, name, files
        case allowAnonymous = "allow_anonymous"
        case requireVerifiedEmail = "require_verified_email"
        case signInMethods = "sign_in_methods"
        case passwordMinLength = "password_min_length"
    }
}

/// A change to one profile field: leave it, set it, or clear it (`null`).
public enum FieldChange<Value: Sendable & Equatable>: Sendable, Equatable {
    case unchanged
    case set(Value)
    case clear
}

/// Which sessions ``GatehouseClient/signOut(scope:)`` ends.
public enum SignOutScope: String, Sendable {
    /// This device.
    case current
    /// Every other device; this one stays signed in.
    case others
    /// Every device.
    case all
}

/// Why the client has no session any more.
public enum SignOutReason: Sendable, Equatable {
    /// ``GatehouseClient/signOut(scope:)``.
    case signedOut
    /// ``GatehouseClient/deleteAccount(reason:appleAuthorizationCode:)``.
    case accountDeleted
    /// Gatehouse ended the session: a refresh answered `auth/refresh-token-reused`,
    /// `auth/invalid-refresh-token` or `auth/session-revoked`, or a call answered
    /// `auth/session-revoked` (signed out elsewhere, password changed, banned, revoked by an admin).
    case sessionEnded(ErrorCode)
}

/// What happened to the client's session; see ``GatehouseClient/authEvents()``.
public enum AuthEvent: Sendable, Equatable {
    /// The first event of every stream: the user of the stored session when it opened, or `nil`.
    case initialSession(User?)
    case signedIn(User)
    /// New tokens (a refresh or a reauthentication).
    case tokenRefreshed
    /// The user changed (a profile update, a photo, a confirmed email, a refresh that brought a
    /// changed user). Reading the user (``GatehouseClient/getUser()``) never sends it.
    case userUpdated(User)
    case signedOut(SignOutReason)

    @available(*, deprecated, renamed: "tokenRefreshed")
    public static var tokensRefreshed: AuthEvent { .tokenRefreshed }

    /// The user this event leaves signed in (`nil` after a sign-out; for ``tokenRefreshed``, `nil`
    /// too: the user did not change, read ``GatehouseClient/currentUser``).
    public var user: User? {
        switch self {
        case .initialSession(let user): user
        case .signedIn(let user), .userUpdated(let user): user
        case .tokenRefreshed, .signedOut: nil
        }
    }
}
