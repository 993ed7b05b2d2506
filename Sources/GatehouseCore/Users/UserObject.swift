/// The user object of API.md: in session responses, `/v1/me`, the admin API and webhook bodies,
/// rendered here once.
public enum UserObject {
    /// `{"id", "email", "email_verified", "first_name", "last_name", "photo_url", "locale", "display_name",
    /// "app_metadata", "user_metadata", "is_anonymous", "created_at", "last_sign_in_at", "identities": [provider, …]}`, each provider once.
    public static func json(_ user: User, _ identities: [Identity]) -> JSON {
        [
            "id": .string(user.id.rawValue), "email": .optional(user.email), "email_verified": .bool(user.emailVerified),
            "first_name": .optional(user.firstName), "last_name": .optional(user.lastName), "photo_url": .optional(user.photoURL),
            "locale": .optional(user.locale), "display_name": .optional(user.displayName),
            "app_metadata": user.appMetadata.json, "user_metadata": user.userMetadata.json, "is_anonymous": .bool(user.isAnonymous),
            "created_at": .string(rfc3339(millis: user.createdAt)),
            "last_sign_in_at": user.lastSignInAt.map { .string(rfc3339(millis: $0)) } ?? .null,
            "identities": .array(uniqueProviders(identities).map(JSON.string)),
        ]
    }

    private static func uniqueProviders(_ identities: [Identity]) -> [String] {
        var seen = Set<String>()
        return identities.map(\.provider.rawValue).filter { seen.insert($0).inserted }
    }
}
