/// What every sign-in checks first, whatever its method: that the app offers the method, and that
/// the client's address is within the app's `auth` limit. Given to each sign-in service.
public struct SignInGate: Sendable {
    let limiter: RateLimiter

    public init(clock: any Clock) { self.limiter = RateLimiter(clock: clock) }

    /// The app's `auth_per_minute_per_ip`, counted for the client's address (429 past it).
    func limitAuth(_ app: AppContext, _ data: any AppScopedStore, _ origin: RequestOrigin) throws {
        try limiter.hit(data, bucket: "auth", subject: rateLimitSubject(ip: origin.ip), limit: app.settings.rateLimits.authPerMinutePerIP)
    }

    /// 403 `auth/sign-in-method-disabled` unless the app offers `method`.
    func requireMethod(_ method: SignInMethod, _ app: AppContext) throws {
        guard app.settings.signInMethods.contains(method) else {
            throw GatehouseError(.signInMethodDisabled, "This app does not offer \(method.rawValue) sign-in.")
        }
    }
}
