import Foundation

/// A session response's `data`.
struct SessionPayload: Decodable, Sendable {
    let accessToken: String
    let expiresIn: Double
    let refreshToken: String?
    let isNewUser: Bool
    let isRestored: Bool?
    let user: User

    enum CodingKeys: String, CodingKey {
        case user
        case accessToken = "access_token"
        case expiresIn = "expires_in"
        case refreshToken = "refresh_token"
        case isNewUser = "is_new_user"
        case isRestored = "is_restored"
    }
}

/// The client's session: the one place that reads and changes it, and the single flight of
/// refreshes. However many calls find the access token expired at once, one `POST
/// /v1/auth/refresh` is sent and every caller awaits the same task; a call rejected with
/// `auth/token-expired` refreshes only if no refresh has replaced its token meanwhile.
actor SessionManager {
    private let store: any SessionStore
    private let transport: Transport
    private let now: @Sendable () -> Date
    private let refreshMargin: TimeInterval
    private let graceWindow: TimeInterval
    private let events: EventHub

    private var session: StoredSession?
    private var loaded = false
    /// Bumped by every sign-in and sign-out, so a refresh that finishes after one is not applied.
    private var generation: UInt64 = 0
    private var inFlight: (id: UInt64, generation: UInt64, task: Task<StoredSession, any Error>)?
    private var nextRefreshID: UInt64 = 0

    init(store: any SessionStore, transport: Transport, now: @escaping @Sendable () -> Date, refreshMargin: TimeInterval, graceWindow: TimeInterval, events: EventHub) {
        self.store = store
        self.transport = transport
        self.now = now
        self.refreshMargin = refreshMargin
        self.graceWindow = graceWindow
        self.events = events
    }

    /// The session, read from the store the first time and whenever there is none here (another
    /// client on a shared store, an app extension, may have signed in since).
    func current() throws -> StoredSession? {
        if !loaded || session == nil {
            session = try store.load()
            loaded = true
            // Found in a shared store (another client signed in there): currentUser follows, quietly.
            if let user = session?.user, events.currentUser != user { events.setQuietly(user) }
        }
        return session
    }

    /// The session as the store has it now, for a change of one part of it (an access token, the
    /// user): another process sharing the store (an app extension) may have rotated the refresh
    /// token since this one last read it, and writing back an older copy would hand out a
    /// rotated token, which the server counts as reuse.
    private func latest() throws -> StoredSession? {
        guard let mine = try current() else { return nil }
        if let saved = try store.load(), saved.user.id == mine.user.id { session = saved }
        return session
    }

    /// Keeps the tokens of a sign-in and returns what to tell the caller.
    func install(_ payload: SessionPayload) throws -> SignInResult {
        let stored = makeStored(payload)
        try store.save(stored)
        session = stored
        loaded = true
        generation += 1
        inFlight = nil
        events.send(.signedIn(payload.user))
        return SignInResult(user: payload.user, isNewUser: payload.isNewUser, isRestored: payload.isRestored ?? false)
    }

    /// Forgets the session (here and in the store) and reports why.
    func end(_ reason: SignOutReason) {
        let hadSession = session != nil || (try? store.load()) != nil
        try? store.clear()
        session = nil
        loaded = true
        generation += 1
        inFlight = nil
        if hadSession { events.send(.signedOut(reason)) }
    }

    /// The `sid` claim of the stored access token (read, not verified: only to recognise this
    /// device's own session among the user's).
    func currentSessionID() -> String? {
        guard let token = (try? current())??.accessToken else { return nil }
        let parts = token.split(separator: ".")
        guard parts.count == 3 else { return nil }
        var payload = String(parts[1]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        payload += String(repeating: "=", count: (4 - payload.count % 4) % 4)
        guard let data = Data(base64Encoded: payload),
              let claims = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return nil }
        return claims["sid"] as? String
    }

    /// A reauthentication's new access token (the refresh token stays).
    func replaceAccessToken(_ token: String, expiresIn: Double) throws {
        guard var stored = try latest() else { throw GatehouseError.notSignedIn }
        stored.accessToken = token
        stored.accessTokenExpiresAt = now().addingTimeInterval(expiresIn)
        stored.accessTokenLifetime = expiresIn
        try store.save(stored)
        session = stored
        events.send(.tokenRefreshed)
    }

    /// Keeps the newest user object the server answered; when it differs from the stored one,
    /// reports ``AuthEvent/userUpdated(_:)`` unless `quietly` (a read never fires a listener).
    func updateUser(_ user: User, quietly: Bool = false) {
        guard var stored = (try? latest()) ?? nil, stored.user.id == user.id, stored.user != user else { return }
        stored.user = user
        try? store.save(stored)
        session = stored
        if quietly { events.setQuietly(user) } else { events.send(.userUpdated(user)) }
    }

    /// An access token good for a call now: the current one, or a refreshed one when it expires
    /// within the refresh margin.
    func validAccessToken() async throws -> String {
        guard let stored = try current() else { throw GatehouseError.notSignedIn }
        guard needsRefresh(stored) else { return stored.accessToken }
        return try await refresh(from: stored).accessToken
    }

    /// After a call with `rejected` answered `auth/token-expired`: the token that replaced it, or
    /// a refresh (joined with any in flight).
    func accessToken(afterRejecting rejected: String) async throws -> String {
        guard let stored = try current() else { throw GatehouseError.notSignedIn }
        if stored.accessToken != rejected { return stored.accessToken }
        return try await refresh(from: stored).accessToken
    }

    /// Refreshes now (joined with any refresh in flight).
    func refreshNow() async throws -> StoredSession {
        guard let stored = try current() else { throw GatehouseError.notSignedIn }
        return try await refresh(from: stored)
    }

    /// When the stored access token is due for a refresh (the margin before it expires), or `nil`
    /// without a session (or without a refresh token to refresh it with).
    func refreshDue() -> Date? {
        guard let stored = (try? current()) ?? nil, stored.refreshToken != nil else { return nil }
        return stored.accessTokenExpiresAt.addingTimeInterval(-min(refreshMargin, stored.accessTokenLifetime / 4))
    }

    /// Refreshes if the token is due (joining a refresh in flight); otherwise nothing.
    func refreshIfDue() async throws {
        guard let stored = try current(), needsRefresh(stored) else { return }
        _ = try await refresh(from: stored)
    }

    private func needsRefresh(_ stored: StoredSession) -> Bool {
        let margin = min(refreshMargin, stored.accessTokenLifetime / 4)
        return now() >= stored.accessTokenExpiresAt.addingTimeInterval(-margin)
    }

    private func refresh(from stored: StoredSession) async throws -> StoredSession {
        if let inFlight, inFlight.generation == generation { return try await inFlight.task.value }
        nextRefreshID += 1
        let id = nextRefreshID
        let started = generation
        let task = Task { try await self.performRefresh(from: stored, id: id, generation: started) }
        inFlight = (id, started, task)
        return try await task.value
    }

    private func performRefresh(from stored: StoredSession, id: UInt64, generation started: UInt64) async throws -> StoredSession {
        defer { if inFlight?.id == id { inFlight = nil } }
        var base = stored
        // Another process sharing the store (an app extension on a shared Keychain) may have
        // refreshed already: its refresh token is the live one, and its access token may do.
        if let saved = try? store.load(), saved.user.id == stored.user.id, saved.refreshToken != stored.refreshToken {
            session = saved
            if !needsRefresh(saved) { return saved }
            base = saved
        }
        guard let refreshToken = base.refreshToken else { throw GatehouseError.notSignedIn }
        let answer = try await sendRefresh(refreshToken)
        guard generation == started else {
            // Signed out or in again meanwhile: this refresh belongs to a session that is gone.
            guard let current = session else { throw GatehouseError.notSignedIn }
            return current
        }
        guard (200..<300).contains(answer.status) else {
            let problem = Transport.problem(answer)
            switch problem.code {
            case .refreshTokenReused, .invalidRefreshToken, .sessionRevoked: end(.sessionEnded(problem.code))
            default: break
            }
            throw GatehouseError.server(problem)
        }
        let payload = try Transport.decode(SessionPayload.self, from: answer)
        var refreshed = makeStored(payload)
        // A cookie-mode answer has no refresh token in its body: keep none rather than a stale one.
        if payload.refreshToken == nil { refreshed.refreshToken = nil }
        try store.save(refreshed)
        session = refreshed
        events.send(.tokenRefreshed)
        if refreshed.user != stored.user { events.send(.userUpdated(refreshed.user)) }
        return refreshed
    }

    /// Sends the refresh; when the answer is lost (the connection broke after sending), sends
    /// the same token again while the server's grace window still covers it, so a rotation the
    /// server already made answers the same new pair instead of counting as reuse (which would
    /// end the session). Past the window it gives up and keeps the session for a later try.
    private func sendRefresh(_ refreshToken: String) async throws -> HTTPAnswer {
        var attempt = 0
        while true {
            // Monotonic seconds (ContinuousClock needs iOS 16 / macOS 13).
            let sentAt = ProcessInfo.processInfo.systemUptime
            do {
                return try await transport.send("POST", "/v1/auth/refresh", body: .json(["refresh_token": .string(refreshToken)]))
            } catch GatehouseError.transport(let text) {
                attempt += 1
                let pause = 0.25 * Double(attempt)
                let elapsed = ProcessInfo.processInfo.systemUptime - sentAt
                guard attempt < 3, elapsed + pause < graceWindow / 2 else { throw GatehouseError.transport(text) }
                try await Task.sleep(nanoseconds: UInt64(pause * 1_000_000_000))
            }
        }
    }

    private func makeStored(_ payload: SessionPayload) -> StoredSession {
        StoredSession(
            accessToken: payload.accessToken, refreshToken: payload.refreshToken,
            accessTokenExpiresAt: now().addingTimeInterval(payload.expiresIn), accessTokenLifetime: payload.expiresIn,
            user: payload.user)
    }
}
