extension AppSettings {
    /// The `rate_limits` section.
    public struct RateLimits: Sendable, Equatable {
        public var authPerMinutePerIP: Int64 = 10
        /// The Apple web flow's `authorize` and callback, per IP (each `authorize` stores a flow).
        public var webFlowPerMinutePerIP: Int64 = 30
        /// The highest either may be set to: each sign-in costs an argon2id hash or a provider
        /// check on CPU that every app shares.
        public static let maxPerMinutePerIP: Int64 = 1000
        /// Mail the app may queue in a fixed hour (codes and notices); past it, mail is not queued.
        /// `GATEHOUSE_MAX_MAIL_PER_HOUR` bounds what an admin may set (``PlatformCaps``).
        public var mailPerHour: Int64 = 500
        /// The most `mail_per_hour` can ever be read as, whatever the platform's maximum.
        public static let mailPerHourCeiling: Int64 = 1_000_000
        /// Uploads (`POST /v1/files`, `POST /v1/me/photo`) one user may make an hour, refused or
        /// not; over it 429 `auth/too-many-requests`. At most the platform's (``PlatformCaps``).
        public var uploadsPerHourPerUser: Int64 = 60
    }
}

extension AppSettings.RateLimits {
    static func decode(_ f: inout FieldReader, _ context: SettingsDecoding) -> Self {
        var limits = Self()
        // Stored before the ceiling (up to 10000): still read, as the ceiling, so that such an
        // app keeps working and its admin can still change it.
        let storedCeiling: Int64 = context.storedBefore ? 10000 : Self.maxPerMinutePerIP
        if let v = f.int("auth_per_minute_per_ip", 1...storedCeiling) { limits.authPerMinutePerIP = min(v, Self.maxPerMinutePerIP) }
        if let v = f.int("web_flow_per_minute_per_ip", 1...Self.maxPerMinutePerIP) { limits.webFlowPerMinutePerIP = v }
        if let v = f.int("mail_per_hour", 1...Self.mailPerHourCeiling) { limits.mailPerHour = v }
        let uploadCeiling = context.caps.uploadsPerHourPerUser
        if let v = f.int("uploads_per_hour_per_user", 1...context.ceiling(uploadCeiling)) { limits.uploadsPerHourPerUser = min(v, uploadCeiling) }
        return limits
    }

    var json: JSON {
        [
            "auth_per_minute_per_ip": .int(authPerMinutePerIP), "web_flow_per_minute_per_ip": .int(webFlowPerMinutePerIP),
            "mail_per_hour": .int(mailPerHour),
            "uploads_per_hour_per_user": .int(uploadsPerHourPerUser),
        ]
    }
}
