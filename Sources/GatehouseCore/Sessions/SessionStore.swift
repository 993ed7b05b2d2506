/// The app's sessions and their refresh tokens. Every query binds the app.
public protocol SessionStore: Sendable {
    /// Starts a session, in one transaction: the session with its first refresh token, the
    /// user's last sign-in set to the session's start, and `event` (its sign-in) recorded.
    ///
    /// Only for an account that, once the transaction holds its row, is neither deleted nor
    /// pending deletion, is not banned at `session.createdAt`, and still has the password hash
    /// `passwordHash` (a password sign-in passes the hash it checked; other sign-ins nil). Else
    /// it throws ``SessionRefusal`` and stores nothing. A deletion, a ban and a password change
    /// take the user's row before they end the sessions, so a sign-in that raced one has either
    /// committed first, and had its session ended, or is refused here.
    func insertSession(_ session: Session, refreshTokenHash: String, event: Event, passwordHash: String?) throws
    func session(_ id: SessionID) throws -> Session?
    /// Sessions of the user that have not ended, not expired and were last used at or after
    /// `usedSince` (the app's idle timeout; 0 when it has none), newest first.
    func activeSessions(_ user: UserID, now: Int64, usedSince: Int64) throws -> [Session]
    /// Ends one session of the user; false when it was not theirs or had already ended.
    func endSession(_ id: SessionID, user: UserID, reason: SessionEndReason, now: Int64) throws -> Bool
    /// Ends the user's sessions except `keeping`; returns the ids ended.
    func endSessions(of user: UserID, keeping: SessionID?, reason: SessionEndReason, now: Int64) throws -> [SessionID]
    /// Refresh-token rotation in one transaction (see `RefreshOutcome`). A session last used
    /// before `usedSince` (idle) is not live: its token rotates to nothing (`.invalid`).
    /// A reuse that ends the session now records `reuseEvents(session)` in the same transaction;
    /// the common case stays one statement on PostgreSQL (no unit of work around it).
    func rotateRefreshToken(
        presentedHash: String, successorHash: String, graceMillis: Int64, usedSince: Int64, origin: RequestOrigin, now: Int64,
        reuseEvents: (Session) -> [Event]
    ) throws -> RefreshOutcome
    func setAuthTime(_ id: SessionID, now: Int64) throws
}
