import GatehouseCore

/// `GET /v1/me`'s body, kept per account. Rendering a user (the JSON object, its two dates, the
/// serialisation with sorted keys) was about an eighth of that request's CPU, and a client asks
/// for the same account again and again. A body is used only for the very user and identities
/// it was rendered from, compared field by field: a changed account is rendered afresh, so a
/// body is never stale. A body is dropped when the account cache drops the account (a change on
/// any node, a deletion), so a deleted account's data does not stay here. Bounded: at most 4,096
/// bodies (about 1 KiB each with what they were rendered from).
final class RenderedAccounts: UserChangeObserver, Sendable {
    private struct Key: Hashable {
        let app: AppID
        let user: UserID
    }

    private struct Entry {
        let user: User
        let identities: [Identity]
        let body: [UInt8]
    }

    private final class Shard: Sendable {
        let entries = ReadWriteLock<[Key: Entry]>([:])
    }

    private let shards: [Shard] = (0..<16).map { _ in Shard() }
    private let shardCapacity = 256

    func userChanged(app: AppID, user: UserID) {
        shard(user).entries.write { _ = $0.removeValue(forKey: Key(app: app, user: user)) }
    }

    private func shard(_ user: UserID) -> Shard {
        shards[Int(UInt(bitPattern: user.hashValue) % UInt(shards.count))]
    }

    /// The body rendered from `user` and `identities`: the one kept for them, or `render()`'s (then kept).
    func body(app: AppID, user: User, identities: [Identity], render: () -> [UInt8]) -> [UInt8] {
        let key = Key(app: app, user: user.id)
        let shard = shard(user.id)
        if let kept = shard.entries.read({ $0[key] }), kept.user == user, kept.identities == identities {
            return kept.body
        }
        let body = render()
        shard.entries.write { entries in
            if entries.count >= shardCapacity, entries[key] == nil { entries.remove(at: entries.startIndex) }
            entries[key] = Entry(user: user, identities: identities, body: body)
        }
        return body
    }
}
