/// What the domain counts for the operator's metrics. The composition root plugs in its metrics
/// registry; tests and tools may count nothing. Core knows no metrics format and no HTTP.
public protocol DomainMetrics: Sendable {
    /// A sign-in (or a sign-up, which signs in) by `method` ended: `succeeded` when it opened a session.
    func signIn(_ method: SignInMethod, succeeded: Bool)
    /// A rotated refresh token was presented again past its grace window, and its session ended.
    func refreshTokenReused()
    /// A mail of `app` was not queued: the app had sent its `rate_limits.mail_per_hour` this hour.
    func mailCapped(app: AppID)
}

/// Counts nothing.
public struct NoDomainMetrics: DomainMetrics {
    public init() {}
    public func signIn(_ method: SignInMethod, succeeded: Bool) {}
    public func refreshTokenReused() {}
    public func mailCapped(app: AppID) {}
}

extension DomainMetrics {
    /// Runs a sign-in and counts how it ended: any error (a wrong password or code, a refused
    /// token, a rate limit, an invalid field) counts as a failure. A right first factor that
    /// leaves a second step (`auth/mfa-required`) counts nothing: the second step counts it.
    func countingSignIn<T>(_ method: SignInMethod, _ body: () throws -> T) throws -> T {
        do {
            let result = try body()
            signIn(method, succeeded: true)
            return result
        } catch let error as GatehouseError where error.code == .mfaRequired {
            throw error
        } catch {
            signIn(method, succeeded: false)
            throw error
        }
    }
}
