import GatehouseCore
import GatehouseOutbound

/// The domain's ``AccessTokenProfiles`` over ``NaverClient`` and ``GitHubClient``, their errors
/// mapped to ``ProviderFailure`` the way the ID-token providers' are: a token the provider
/// refuses, or one of another app → `invalidToken` (no client-facing detail); a provider that
/// cannot be reached, answers unusably or refuses our credentials, or a GitHub app without a
/// client secret → `unreachable`, told to `onUnavailable` (for the log; the reason never holds a
/// token or secret).
public struct AccessTokenProfileReader: AccessTokenProfiles {
    public typealias UnavailableObserver = @Sendable (_ kind: AccessTokenProviderKind, _ reason: String) -> Void

    private let naver: NaverClient
    private let github: GitHubClient
    private let onUnavailable: UnavailableObserver?

    /// Creates a reader over the two clients (built with the configured base URLs).
    public init(naver: NaverClient, github: GitHubClient, onUnavailable: UnavailableObserver? = nil) {
        self.naver = naver
        self.github = github
        self.onUnavailable = onUnavailable
    }

    public func profile(kind: AccessTokenProviderKind, accessToken: String, clientIDs: [String], clientSecret: String?) throws(ProviderFailure) -> ExternalIdentity {
        let identity: ProviderIdentity
        do {
            switch kind {
            case .naver:
                identity = try naver.profile(accessToken: accessToken, audience: clientIDs.first ?? "")
            case .github:
                identity = try github.profile(accessToken: accessToken, clientIDs: clientIDs, clientSecret: clientSecret ?? "")
            }
        } catch {
            if let why = error.unreachableReason { onUnavailable?(kind, why) }
            throw error.failure
        }
        return identity.external
    }
}
