/// The store of account deletion (``AccountDeletion``): a unit of work's `tx.deletion`. A deletion
/// takes the user's row first (``AppScopedStore/lockUser(_:)``).
public protocol AccountDeletionStore: Sendable {
    /// Marks the account pending deletion; false when it is already pending, or gone.
    func schedule(_ id: UserID, _ pending: PendingDeletion, now: Int64) throws -> Bool
    /// Clears a pending deletion whose purge is not yet due (a sign-in restores the account);
    /// false when none was pending, or it is due.
    func cancel(_ id: UserID, now: Int64) throws -> Bool
    /// Erases the account, if it exists and (with `dueBy`) its deletion is pending and due by then:
    /// every personal column emptied, its identities, provider tokens and codes deleted, a
    /// tombstone left (``Store/purgeErasedAccounts(before:limit:)``) that no lookup returns; its
    /// sessions and audit events kept without `ip` and `user_agent`, the events' `data` without
    /// email addresses (``ErasedEventData``).
    /// Returns the provider tokens deleted, to revoke; nil when there was nothing to erase (another
    /// node did it).
    func erase(_ id: UserID, dueBy: Int64?, now: Int64) throws -> [StoredProviderToken]?
}
