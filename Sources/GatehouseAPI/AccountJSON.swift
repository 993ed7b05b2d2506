import GatehouseCore

/// The JSON shapes of accounts.
enum AccountJSON {
    static func user(_ user: User, _ identities: [Identity]) -> JSON {
        [
            "id": .string(user.id.rawValue), "email": .optional(user.email), "email_verified": .bool(user.emailVerified),
            "first_name": .optional(user.firstName), "last_name": .optional(user.lastName), "photo_url": .optional(user.photoURL),
            "created_at": .string(rfc3339(millis: user.createdAt)),
            "last_sign_in_at": user.lastSignInAt.map { .string(rfc3339(millis: $0)) } ?? .null,
            "identities": .array(uniqueProviders(identities).map(JSON.string)),
        ]
    }

    /// The user object as a tenant admin sees it: with its `ban` (null when none holds) and its
    /// `pending_deletion` (null unless it waits out the app's grace period).
    static func adminUser(_ user: User, _ identities: [Identity], now: Int64) -> JSON {
        var fields = self.user(user, identities).objectValue ?? [:]
        if let ban = user.ban, ban.holds(at: now) {
            fields["ban"] = [
                "sanction_code": .string(ban.sanctionCode), "reason": .optional(ban.reason),
                "suspended_until": ban.suspendedUntil.map { .string(rfc3339(millis: $0)) } ?? .null,
            ]
        } else {
            fields["ban"] = .null
        }
        fields["pending_deletion"] = user.pendingDeletion.map {
            ["requested_at": .string(rfc3339(millis: $0.requestedAt)), "purge_at": .string(rfc3339(millis: $0.purgeAt))]
        } ?? .null
        return .object(fields)
    }

    static func identity(_ identity: Identity) -> JSON {
        ["provider": .string(identity.provider), "email": .optional(identity.email), "created_at": .string(rfc3339(millis: identity.createdAt))]
    }

    static func session(_ session: Session, current: SessionID) -> JSON {
        [
            "id": .string(session.id.rawValue), "current": .bool(session.id == current), "method": .string(session.method.rawValue),
            "created_at": .string(rfc3339(millis: session.createdAt)), "last_used_at": .string(rfc3339(millis: session.lastUsedAt)),
            "ip": .optional(session.ip), "user_agent": .optional(session.userAgent),
        ]
    }

    private static func uniqueProviders(_ identities: [Identity]) -> [String] {
        var seen = Set<String>()
        return identities.map(\.provider).filter { seen.insert($0).inserted }
    }
}
