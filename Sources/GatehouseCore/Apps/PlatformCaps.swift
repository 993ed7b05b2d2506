extension AppSettings {
    /// The platform's maxima on what an app may set, from the server's environment and checked
    /// at start (``Configuration/platformCaps``), handed to whoever applies them: the settings'
    /// decoding (the upload caps), ``AppService`` (the mail cap an admin may set) and the mail
    /// flows (the mail cap at sending).
    ///
    /// An upload cap above its ceiling (`GATEHOUSE_MAX_UPLOADS_PER_HOUR_PER_USER`,
    /// `GATEHOUSE_MAX_FILES_PER_USER`, `GATEHOUSE_MAX_BYTES_PER_USER`) is refused when saved and
    /// lowered to it when read from storage. `rate_limits.mail_per_hour` above
    /// `GATEHOUSE_MAX_MAIL_PER_HOUR` is refused when changed to it and capped when mail is queued.
    public struct PlatformCaps: Sendable, Equatable {
        /// `GATEHOUSE_MAX_MAIL_PER_HOUR`: the highest `rate_limits.mail_per_hour` an app may set.
        public var mailPerHour: Int64 = 10_000
        public var uploadsPerHourPerUser: Int64 = 1000
        public var filesPerUser: Int64 = 10_000
        public var bytesPerUser: Int64 = 10 * 1024 * 1024 * 1024

        public init() {}

        /// The upload ceilings' variables and the bounds each may be set within.
        static var uploadVariables: [(name: String, range: ClosedRange<Int64>, keyPath: WritableKeyPath<PlatformCaps, Int64>)] { [
            ("GATEHOUSE_MAX_UPLOADS_PER_HOUR_PER_USER", 1...1_000_000, \.uploadsPerHourPerUser),
            ("GATEHOUSE_MAX_FILES_PER_USER", 1...100_000_000, \.filesPerUser),
            ("GATEHOUSE_MAX_BYTES_PER_USER", 1024...(1 << 50), \.bytesPerUser),
        ] }

        /// `caps` with the upload ceilings an environment sets, and the problems of the values that
        /// are not numbers in their bounds (those keep their value in `caps`). The mail cap is read
        /// with the other whole numbers of ``Configuration``.
        public static func read(_ environment: [String: String], over caps: PlatformCaps = PlatformCaps()) -> (caps: PlatformCaps, problems: [String]) {
            var caps = caps
            var problems: [String] = []
            for (name, range, keyPath) in uploadVariables {
                guard let text = environment[name], !text.isEmpty else { continue }
                if let value = Int64(text), range.contains(value) {
                    caps[keyPath: keyPath] = value
                } else {
                    problems.append("\(name) must be an integer from \(range.lowerBound) to \(range.upperBound).")
                }
            }
            return (caps, problems)
        }

        /// A setting above what this server allows (``mailPerHour``), unless it is the value the
        /// app had (`before`, or the default for a new app): lowering the maximum leaves apps
        /// working, capped at it when they send (``EmailCodes``), and their admins free to change
        /// other fields.
        func problem(with settings: AppSettings, before: AppSettings?) -> FieldError? {
            let mail = settings.rateLimits.mailPerHour
            guard mail > mailPerHour, mail != (before ?? AppSettings(name: "")).rateLimits.mailPerHour else { return nil }
            return FieldError("rate_limits.mail_per_hour", "Must be at most \(mailPerHour) on this server (GATEHOUSE_MAX_MAIL_PER_HOUR).")
        }
    }
}
