import Foundation

#if canImport(Observation)
import Observation
#endif
#if canImport(Combine)
import Combine
#endif

/// The task that follows a client's ``GatehouseClient/authEvents()`` for an observable session:
/// cancelled when the session goes away.
final class EventFollower: @unchecked Sendable {  // `task` is only touched under `lock`
    private let lock = NSLock()
    private var task: Task<Void, Never>?

    func start(_ task: Task<Void, Never>) { lock.locked { self.task = task } }
    func cancel() { lock.locked { task?.cancel() } }
    deinit { task?.cancel() }
}

/// What a signed-in user is after `event`, given the one before (a refresh keeps the client's).
@MainActor
func userAfter(_ event: AuthEvent, client: GatehouseClient, before: User?) -> User? {
    switch event {
    case .initialSession(let user): user
    case .signedIn(let user), .userUpdated(let user): user
    case .tokenRefreshed: client.currentUser ?? before
    case .signedOut: nil
    }
}

#if canImport(Observation)
/// The signed-in user of a ``GatehouseClient`` for SwiftUI (iOS 17, macOS 14 and later; see
/// ``GatehouseSessionObject`` for iOS 15 and 16): `user` and `isSignedIn` follow the client's
/// ``GatehouseClient/authEvents()`` on the main actor, starting from its ``GatehouseClient/currentUser``.
///
/// ```swift
/// @State private var session = GatehouseSession(client: gatehouse)
/// // in body: if let user = session.user { … } else { SignInView() }
/// ```
@available(iOS 17, macOS 14, tvOS 17, watchOS 10, visionOS 1, *)
@MainActor
@Observable
public final class GatehouseSession {
    /// The signed-in user, or `nil`.
    public private(set) var user: User?
    /// The last event heard (`nil` until the first).
    public private(set) var lastEvent: AuthEvent?
    /// Whether a user is signed in.
    public var isSignedIn: Bool { user != nil }

    @ObservationIgnored public let client: GatehouseClient
    @ObservationIgnored private let follower = EventFollower()

    public init(client: GatehouseClient) {
        self.client = client
        user = client.currentUser
        let events = client.authEvents()
        follower.start(Task { [weak self] in
            for await event in events {
                guard let self else { return }
                self.apply(event)
            }
        })
    }

    private func apply(_ event: AuthEvent) {
        user = userAfter(event, client: client, before: user)
        lastEvent = event
    }
}
#endif

#if canImport(Combine)
/// ``GatehouseSession`` as an `ObservableObject`, for iOS 15 and 16 (`@StateObject`,
/// `@ObservedObject`): `user` and `isSignedIn` follow the client's events on the main actor.
@MainActor
public final class GatehouseSessionObject: ObservableObject {
    @Published public private(set) var user: User?
    @Published public private(set) var lastEvent: AuthEvent?
    public var isSignedIn: Bool { user != nil }

    public let client: GatehouseClient
    private let follower = EventFollower()

    public init(client: GatehouseClient) {
        self.client = client
        user = client.currentUser
        let events = client.authEvents()
        follower.start(Task { [weak self] in
            for await event in events {
                guard let self else { return }
                self.apply(event)
            }
        })
    }

    private func apply(_ event: AuthEvent) {
        user = userAfter(event, client: client, before: user)
        lastEvent = event
    }
}
#endif
