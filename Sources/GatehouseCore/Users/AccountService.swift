/// The signed-in user's account: reading it, changing the profile, listing its sign-in methods.
public final class AccountService: Sendable {
    private let store: any Store
    private let cache: AccountCache
    private let clock: any Clock
    /// Runs the service's units of work and applies what follows their commit.
    private let units: UnitOfWork

    /// - Parameter cache: the cache the store reports user changes to.
    public init(store: any Store, cache: AccountCache, units: UnitOfWork, clock: any Clock) {
        self.units = units
        self.store = store
        self.cache = cache
        self.clock = clock
    }

    // MARK: - The signed-in user

    public func me(app: AppContext, claims: AccessClaims) throws -> Account {
        guard let found = try cache.account(app: app.id, user: claims.userID, store: store) else {
            throw GatehouseError(.sessionRevoked, "This account no longer exists.")
        }
        return found
    }

    /// `PATCH /v1/me`: names (absent keeps, null or empty clears), the `locale` (absent keeps, null
    /// clears; a language tag, ``InputRules/locale(_:field:)``), `display_name` (absent keeps, null
    /// or empty clears; ``InputRules/displayName(_:field:)``), `user_metadata` (absent keeps; an
    /// object replaces the whole of it, null empties it; ``UserMetadata``) and, through Files, the photo
    /// (``FilesService/photoChange(app:user:session:fileID:origin:)``). Every field is checked
    /// before anything is written; the change, its `user.updated` event (naming the fields it
    /// changed) and the photo's files commit in one unit of work, the user's row locked (a photo
    /// not committed is abandoned). Nothing changed: no change and no event recorded (with a photo
    /// field the row is still locked, which marks it changed).
    public func updateProfile(
        app: AppContext, user id: UserID, session: SessionID?, firstName: String??, lastName: String??, locale: String?? = nil,
        displayName: String?? = nil, userMetadata: JSON?? = nil, photo: PhotoChange? = nil, origin: RequestOrigin
    ) throws -> (User, [Identity]) {
        var committed = false
        defer { if !committed { photo?.abandoned() } }
        func checked(_ change: String??, _ field: String) throws(GatehouseError) -> String?? {
            guard case .some(.some(let value)) = change else { return change }
            return .some(try InputRules.name(value, field: field))
        }
        var checks = FieldChecks()
        var first: String?? = nil
        var last: String?? = nil
        var language: String?? = nil
        var shown: String?? = nil
        var metadata: UserMetadata? = nil
        try checks.run { () throws(GatehouseError) in first = try checked(firstName, "first_name") }
        try checks.run { () throws(GatehouseError) in last = try checked(lastName, "last_name") }
        try checks.run { () throws(GatehouseError) in
            if case .some(.some(let value)) = locale { language = .some(try InputRules.locale(value)) } else { language = locale }
        }
        try checks.run { () throws(GatehouseError) in
            if case .some(.some(let value)) = displayName { shown = .some(try InputRules.displayName(value)) } else { shown = displayName }
        }
        try checks.run { () throws(GatehouseError) in
            if let userMetadata { metadata = try UserMetadata.checked(userMetadata, field: "user_metadata") }
        }
        try checks.finish()
        guard let (user, identities) = try cache.account(app: app.id, user: id, store: store).map({ ($0.user, $0.identities) }) else { throw Self.accountGone }
        if photo == nil, (first ?? user.firstName) == user.firstName, (last ?? user.lastName) == user.lastName, (language ?? user.locale) == user.locale,
            (shown ?? user.displayName) == user.displayName, (metadata ?? user.userMetadata) == user.userMetadata
        {
            return (user, identities)
        }
        let now = clock.nowMillis()
        let (updated, removed) = try units.run(store.app(app.id)) { tx -> (User, [BlobKey]) in
            guard let account = try tx.users.lockUser(id) else { throw Self.accountGone }
            let (photoURL, removed) = try photo?.apply(tx, id, now) ?? (account.photoURL, [])
            let firstName = first ?? account.firstName
            let lastName = last ?? account.lastName
            let userLocale = language ?? account.locale
            let shownName = shown ?? account.displayName
            let userMetadata = metadata ?? account.userMetadata
            let changed = [
                ("first_name", account.firstName != firstName), ("last_name", account.lastName != lastName), ("photo_url", account.photoURL != photoURL),
                ("locale", account.locale != userLocale), ("display_name", account.displayName != shownName),
                ("user_metadata", account.userMetadata != userMetadata),
            ].filter(\.1).map { JSON.string($0.0) }
            guard !changed.isEmpty else { return (account, removed) }
            var updated = account
            if account.firstName != firstName || account.lastName != lastName || account.photoURL != photoURL {
                guard let profile = try tx.users.updateProfile(id, firstName: firstName, lastName: lastName, photoURL: photoURL, now: now) else { throw Self.accountGone }
                updated = profile
            }
            if account.locale != userLocale {
                guard let withLocale = try tx.users.setLocale(id, userLocale, now: now) else { throw Self.accountGone }
                updated = withLocale
            }
            if account.displayName != shownName || account.userMetadata != userMetadata {
                guard let withCustomData = try tx.users.setCustomData(
                    id, displayName: shownName, appMetadata: account.appMetadata, userMetadata: userMetadata, now: now)
                else { throw Self.accountGone }
                updated = withCustomData
            }
            try tx.auditLog.record(Event(
                type: .userUpdated, userID: id, sessionID: session, ip: origin.ip, userAgent: origin.userAgent, data: ["fields": .array(changed)],
                createdAt: now))
            return (updated, removed)
        }
        committed = true
        photo?.committed(removed)
        // A profile change leaves the identities as they were.
        return (updated, identities)
    }

    static let accountGone = GatehouseError(.sessionRevoked, "This account no longer exists.")

    public func identities(app: AppContext, claims: AccessClaims) throws -> [Identity] {
        try store.app(app.id).identities.all(of: claims.userID)
    }
}
