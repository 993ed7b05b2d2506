import GatehouseCrypto

/// Apple token revocation through the outbox, wherever a kept Apple token is dropped: at account
/// deletion (Apple requires an app that deletes an account to revoke the user's tokens, `POST
/// /auth/revoke`), when the user unlinks Apple, and when an address's proof takes an account over
/// from a squatter. The outbox makes it durable — queued in the dropping change's own transaction,
/// retried with back-off until Apple accepts, delivered by whichever node is alive.
public enum AppleRevocation {
    /// What an item asks for: a stored refresh token to revoke, or an authorization code (sent
    /// with the deletion) to redeem first and revoke what it yields.
    enum Request: Equatable {
        case token(String, clientID: String)
        /// `subjects`: the user's Apple accounts; a code of any other is not redeemed further.
        case code(String, clientIDs: [String], subjects: [String])
    }

    static let sealedField = "outbox/apple_revocation"

    /// The item that revokes a stored token (queued with the deletion that drops it).
    public static func revokeToken(
        _ token: StoredProviderToken, of user: UserID, app: AppID, sealer: SecretSealer
    ) throws -> NewOutboxItem {
        let plain = try sealer.open(token.sealedToken, app: app, field: StoredProviderToken.appleFieldName(user: user, clientID: token.clientID))
        // Keyed by the token too: a user who unlinks Apple, links it again and unlinks (or deletes
        // the account) has a second token to revoke, not a repeat of the first.
        let tokenDigest = Digest.hex(Digest.sha256(Array(plain.utf8))).prefix(32)
        return item(
            .token(plain, clientID: token.clientID), key: "apple_revocation:\(app.rawValue):\(user.rawValue):\(token.clientID):\(tokenDigest)", app: app,
            sealer: sealer)
    }

    /// Queues in `tx` the revocation of each of `tokens` (the user's stored Apple tokens, being
    /// dropped in the same unit of work: an account erased, Apple unlinked, a squatter's methods
    /// forgotten); what the audit event says of them: `queued` (with how many), `none` stored, or
    /// `not_configured` (the app has no Apple key, so nothing could be revoked; they are dropped).
    public static func queue(
        _ tokens: [StoredProviderToken], in tx: any AppScopedStore, app: AppContext, user: UserID, sealer: SecretSealer, now: Int64, log: any LogSink
    ) throws -> JSON {
        let tokens = tokens.filter { $0.provider == .apple }
        guard !tokens.isEmpty else { return ["status": "none", "count": 0] }
        guard app.settings.apple.credentials != nil else {
            log.warning("Apple tokens dropped without revocation: the app has no Apple key", ["app_id": .string(app.id.rawValue), "user_id": .string(user.rawValue)])
            return ["status": "not_configured", "count": .int(Int64(tokens.count))]
        }
        var queued = 0
        for token in tokens {
            do {
                if try tx.outbox.enqueue(try revokeToken(token, of: user, app: app.id, sealer: sealer), now: now) { queued += 1 }
            } catch is CryptoError {
                // Sealed under another master key: nothing can open it, so nothing can revoke it.
                log.warning("a stored Apple token cannot be opened; it is dropped unrevoked", ["app_id": .string(app.id.rawValue), "user_id": .string(user.rawValue)])
            }
        }
        return ["status": "queued", "count": .int(Int64(queued))]
    }

    /// The item that redeems `code` with the first of `clientIDs` Apple accepts it for and, if
    /// the code is of one of `subjects` (the user's Apple accounts), revokes the refresh token it
    /// yields. Keyed by the code: the same code queued twice is one item, another code another.
    public static func redeemAndRevoke(code: String, clientIDs: [String], subjects: [String], of user: UserID, app: AppID, sealer: SecretSealer) -> NewOutboxItem {
        let codeDigest = Digest.hex(Digest.sha256(Array(code.utf8))).prefix(32)
        return item(
            .code(code, clientIDs: clientIDs, subjects: subjects), key: "apple_revocation:\(app.rawValue):\(user.rawValue):code:\(codeDigest)", app: app,
            sealer: sealer)
    }

    /// How long a code item is worth retrying: Apple's codes live five minutes.
    static let codeLifetimeMillis: Int64 = 10 * 60_000

    static func item(_ request: Request, key: String, app: AppID, sealer: SecretSealer) -> NewOutboxItem {
        let json: JSON
        switch request {
        case .token(let token, let clientID): json = ["token": .string(token), "client_id": .string(clientID)]
        case .code(let code, let clientIDs, let subjects):
            json = ["authorization_code": .string(code), "client_ids": .array(clientIDs.map(JSON.string)), "subjects": .array(subjects.map(JSON.string))]
        }
        return NewOutboxItem(
            appID: app, kind: .appleRevocation, idempotencyKey: key, payload: sealer.seal(json.serializedString, app: app, field: sealedField), sealed: true)
    }

    static func request(of item: OutboxItem, sealer: SecretSealer) -> Request? {
        guard let app = item.appID, let opened = try? sealer.open(item.payload, app: app, field: sealedField),
            let json = try? JSON.parse(Array(opened.utf8))
        else { return nil }
        if let token = json["token"]?.stringValue, let clientID = json["client_id"]?.stringValue { return .token(token, clientID: clientID) }
        if let code = json["authorization_code"]?.stringValue, let ids = json["client_ids"]?.arrayValue, let subjects = json["subjects"]?.arrayValue {
            return .code(code, clientIDs: ids.compactMap(\.stringValue), subjects: subjects.compactMap(\.stringValue))
        }
        return nil
    }
}

extension OutboxKind {
    /// Revokes an Apple token of a deleted account (``AppleRevocation``).
    public static let appleRevocation = OutboxKind(rawValue: "apple_revocation")
}

/// Delivers ``AppleRevocation`` items with the app's current Apple key (a client secret signed
/// per attempt). Apple unreachable, or refusing our credentials, is retried — for 30 days, not the
/// outbox's usual 72 hours: a revocation is worth waiting for; Apple refusing the token or code
/// itself is final (dead-lettered, which the audit log records).
public struct AppleRevocationHandler: OutboxHandler {
    public let kind = OutboxKind.appleRevocation
    public let giveUpAfterMillis: Int64? = 30 * 86_400_000
    private let directory: AppDirectory
    private let sealer: SecretSealer
    private let providers: any IdentityProviders
    /// Where a code's token goes when Apple cannot take its revocation at once.
    private let outbox: any OutboxStore
    private let clock: any Clock
    /// The web flow's callback URL: Apple redeems a Services ID's code only with it.
    private let webCallbackURL: String
    /// Apple's host and port: every item's destination.
    private let appleDestination: String?

    public init(
        directory: AppDirectory, sealer: SecretSealer, providers: any IdentityProviders, outbox: any OutboxStore, clock: any Clock, webCallbackURL: String,
        appleURL: String? = nil
    ) {
        self.webCallbackURL = webCallbackURL
        self.appleDestination = appleURL.flatMap(OutboxDestination.of(url:))
        self.directory = directory
        self.sealer = sealer
        self.providers = providers
        self.outbox = outbox
        self.clock = clock
    }

    public func destination(of item: OutboxItem) -> String? { appleDestination }

    public func deliver(_ item: OutboxItem) -> OutboxDelivery {
        guard let appID = item.appID, let request = AppleRevocation.request(of: item, sealer: sealer) else {
            return .dead(reason: "the payload cannot be opened with this master key")
        }
        let app: AppContext?
        do { app = try directory.current(id: appID) } catch { return .retry(reason: "the app's settings cannot be read") }
        guard let app else { return .dead(reason: "the app no longer exists") }
        // Removed after the deletion was queued: retried, so that putting the key back delivers it.
        guard let credentials = app.settings.apple.credentials else { return .retry(reason: "the app has no Apple key (apple.team_id, key_id, private_key)") }
        switch request {
        case .token(let token, let clientID):
            return revoke(token, clientID: clientID, credentials: credentials)
        case .code(let code, let clientIDs, let subjects):
            return redeem(code, clientIDs: clientIDs, subjects: subjects, servicesID: app.settings.apple.servicesID, credentials: credentials, item: item, app: appID)
        }
    }

    private func revoke(_ token: String, clientID: String, credentials: AppleCredentials) -> OutboxDelivery {
        do {
            try providers.revokeAppleToken(token, clientID: clientID, credentials: credentials)
            return .delivered
        } catch {
            switch error {
            case .rejected, .invalidToken: return .dead(reason: "Apple refused to revoke the token for \(clientID)")
            case .unreachable: return .unreachable(reason: "Apple /auth/revoke cannot be reached")
            }
        }
    }

    /// A code is single-use: once Apple has redeemed it, its token is revoked here or, if Apple
    /// fails now, queued as an item of its own (a retry of this one could not redeem it again).
    private func redeem(
        _ code: String, clientIDs: [String], subjects: [String], servicesID: String?, credentials: AppleCredentials, item: OutboxItem, app: AppID
    ) -> OutboxDelivery {
        var unreachable = false
        for clientID in clientIDs {
            let exchanged: (idToken: String, refreshToken: String?)
            do {
                exchanged = try providers.exchangeAppleCode(
                    code, clientID: clientID, redirectURI: clientID == servicesID ? webCallbackURL : nil, credentials: credentials)
            } catch {
                switch error {
                case .rejected, .invalidToken: continue  // not this client id's code (or expired): try the next
                case .unreachable:
                    unreachable = true  // this client id may still be the code's: try the others, then retry
                    continue
                }
            }
            // The code must be of the user's own Apple account: another's token is not ours to revoke.
            guard let identity = try? providers.verifyApple(exchanged.idToken, audiences: [clientID], expectedNonceHash: nil),
                subjects.contains(where: { constantTimeEquals(Array($0.utf8), Array(identity.subject.utf8)) })
            else { return .dead(reason: "the authorization code is not of the user's Apple account") }
            guard let refreshToken = exchanged.refreshToken else { return .delivered }  // Apple gave nothing to revoke
            let outcome = revoke(refreshToken, clientID: clientID, credentials: credentials)
            guard case .unreachable = outcome else { return outcome }
            do {
                _ = try outbox.enqueue(
                    AppleRevocation.item(.token(refreshToken, clientID: clientID), key: item.idempotencyKey + ":token", app: app, sealer: sealer),
                    now: clock.nowMillis())
                return .delivered
            } catch {
                return .retry(reason: "the redeemed token's revocation could not be queued")
            }
        }
        if unreachable, clock.nowMillis() - item.createdAt < AppleRevocation.codeLifetimeMillis {
            return .unreachable(reason: "Apple /auth/token cannot be reached")
        }
        return .dead(reason: "Apple redeemed the authorization code for none of the app's client ids")
    }
}
