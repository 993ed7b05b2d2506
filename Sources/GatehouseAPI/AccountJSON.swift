import GatehouseCore

/// The JSON shapes of accounts.
enum AccountJSON {
    /// The user object as a tenant admin sees it: with its `ban` (null when none holds) and its
    /// `pending_deletion` (null unless it waits out the app's grace period).
    static func adminUser(_ user: User, _ identities: [Identity], now: Int64) -> JSON {
        var fields = UserObject.json(user, identities).objectValue ?? [:]
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
        ["provider": .string(identity.provider.rawValue), "email": .optional(identity.email), "created_at": .string(rfc3339(millis: identity.createdAt))]
    }

    static func session(_ session: Session, current: SessionID) -> JSON {
        var fields = adminSession(session).objectValue ?? [:]
        fields["current"] = .bool(session.id == current)
        return .object(fields)
    }

    /// A session as the admin sees it: the user's own view without `current`.
    static func adminSession(_ session: Session) -> JSON {
        [
            "id": .string(session.id.rawValue), "method": .string(session.methodName),
            "created_at": .string(rfc3339(millis: session.createdAt)), "last_used_at": .string(rfc3339(millis: session.lastUsedAt)),
            "ip": .optional(session.ip), "user_agent": .optional(session.userAgent),
        ]
    }
}
