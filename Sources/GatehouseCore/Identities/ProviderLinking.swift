/// Linking and unlinking sign-in methods, and reauthenticating with a provider token.
extension ProviderSignInService {
    /// Links Apple, Google or a provider the app defines to the signed-in user (recent sign-in required, but of an anonymous
    /// user, which has no way to reauthenticate). Linked to an anonymous user, the provider
    /// upgrades it (``AnonymousUsers``): the same user id, and the provider's address as a
    /// provider sign-up would take it. A provider account that signs in to another user is 409
    /// `auth/credential-already-in-use`: the client signs in to that one instead, and what the
    /// anonymous account holds is not merged into it.
    public func link(app: AppContext, claims: AccessClaims, provider: Provider, proof: Proof, origin: RequestOrigin) throws -> [Identity] {
        let data = store.app(app.id)
        guard let user = try data.users.user(claims.userID) else { throw GatehouseError(.sessionRevoked, "This account no longer exists.") }
        try sessions.requireRecentLogin(app: app, claims: claims, user: user)
        try requireMethod(provider, app)
        let (identity, appleCode) = try verify(app: app, provider: provider, proof: proof)
        if let owner = try data.identities.user(provider: provider.identity, subject: identity.subject) {
            if owner.id == claims.userID { return try data.identities.all(of: claims.userID) }
            throw GatehouseError(.credentialAlreadyInUse, "This \(provider.rawValue) account signs in to another user of this app.")
        }
        if try data.identities.all(of: claims.userID).contains(where: { $0.provider == provider.identity }) {
            throw GatehouseError(.credentialAlreadyInUse, "Another \(provider.rawValue) account is linked already; unlink it first.")
        }
        let appleRefreshToken = try releasingNonceIfUnavailable(identity) { try redeemAppleCode(appleCode, app: app, identity: identity) }
        let now = clock.nowMillis()
        return try units.run(data) { tx in
            // First, as every flow that gives an account an address takes it first (``EmailCodes/lockAddress(_:_:)``).
            let address = user.isAnonymous ? try upgradeAddress(app: app, tx, claims: claims, identity: identity) : nil
            try IdentityConflict.answering {
                try tx.identities.addIdentity(claims.userID, Identity(provider: provider.identity, subject: identity.subject, email: identity.email, createdAt: now))
            }
            // An Apple account whose consent was revoked, now linked here: no longer waiting to be relinked elsewhere.
            if provider == .apple { _ = try tx.appleAccounts.takeRevokedAppleIdentity(subject: identity.subject) }
            try keepAppleToken(app: app, tx, user: claims.userID, identity: identity, refreshToken: appleRefreshToken)
            try tx.auditLog.record(Event(type: .identityLinked, userID: claims.userID, sessionID: claims.sessionID, ip: origin.ip, userAgent: origin.userAgent, data: ["provider": .string(provider.rawValue)], createdAt: now))
            if user.isAnonymous {
                _ = try AnonymousUsers.upgrade(
                    tx, user: claims.userID, email: address, emailVerified: address != nil && identity.emailVerified, method: provider.rawValue,
                    sessionID: claims.sessionID, origin: origin, now: now)
            }
            return try tx.identities.all(of: claims.userID)
        }
    }

    /// The address an anonymous user linked to `identity` takes as it becomes permanent, as a
    /// provider sign-up takes it: kept unverified when the provider does not vouch for it; a
    /// vouched-for one (held for the rest of the unit) only when no other account has it
    /// (`email_collision: reject`), else none (the user may add one later).
    private func upgradeAddress(app: AppContext, _ tx: any AppScopedStore, claims: AccessClaims, identity: ExternalIdentity) throws -> String? {
        guard let email = identity.email.flatMap({ try? InputRules.email($0) }) else { return nil }
        guard identity.emailVerified else { return email }
        try emailCodes.lockAddress(tx, email)
        if app.settings.emailCollision == "reject", try tx.users.emailInUse(email, except: claims.userID) { return nil }
        return email
    }

    /// Unlinks a sign-in method (recent sign-in required); the last one cannot go. Unlinking Apple
    /// drops its kept refresh tokens and queues their revocation at Apple in the same unit.
    public func unlink(app: AppContext, claims: AccessClaims, provider: IdentityProvider, origin: RequestOrigin) throws -> [Identity] {
        try sessions.requireRecentLogin(app: app, claims: claims)
        let data = store.app(app.id)
        let identities = try data.identities.all(of: claims.userID)
        guard identities.contains(where: { $0.provider == provider }) else { throw GatehouseError(.notFound, "This sign-in method is not linked.") }
        guard identities.count > 1 else { throw GatehouseError(.lastSignInMethod, "This is the account's only way to sign in; add another first.") }
        let now = clock.nowMillis()
        return try units.run(data) { tx in
            // Checked again atomically: a concurrent unlink of the other method may have won.
            guard try tx.identities.removeIdentity(claims.userID, provider: provider, now: now) else {
                throw GatehouseError(.lastSignInMethod, "This is the account's only way to sign in; add another first.")
            }
            var data: [String: JSON] = ["provider": .string(provider.rawValue)]
            if provider == .apple {
                // The kept Apple tokens go with the identity, revoked at Apple through the outbox.
                let tokens = try tx.identities.takeProviderTokens(claims.userID, provider: .apple)
                data["apple_revocations"] = try AppleRevocation.queue(tokens, in: tx, app: app, user: claims.userID, sealer: sealer, now: now, log: log)
            }
            try tx.auditLog.record(Event(type: .identityUnlinked, userID: claims.userID, sessionID: claims.sessionID, ip: origin.ip, userAgent: origin.userAgent, data: .object(data), createdAt: now))
            return try tx.identities.all(of: claims.userID)
        }
    }

    /// Reauthentication with a provider token: it must be the signed-in user's own identity, bound
    /// to this request by its nonce, and issued within the app's `recent_login_seconds` (+ 60 s of
    /// clock skew): an old token proves an old sign-in, not a recent one.
    public func reauthenticate(app: AppContext, claims: AccessClaims, provider: Provider, proof: Proof, origin: RequestOrigin) throws -> (token: String, expiresIn: Int64) {
        let data = store.app(app.id)
        try limiter.hit(data, bucket: "auth", subject: rateLimitSubject(ip: origin.ip), limit: app.settings.rateLimits.authPerMinutePerIP)
        switch proof {
        case .apple(_, nil, _), .google(_, nil), .oidc(_, nil):
            throw GatehouseError.validation("nonce", "Required to reauthenticate: the raw nonce the token was requested with.")
        case .accessToken:
            // An access token says nothing of when the user signed in, nor is it bound to this request.
            throw GatehouseError.validation("access_token", "Reauthenticate with another method: an access token proves no recent sign-in.")
        case .apple, .google, .firebase, .oidc: break
        }
        try sessions.requireReauthenticationGuessesLeft(app, claims: claims)
        do {
            let (identity, _) = try verify(app: app, provider: provider, proof: proof)
            let oldest = clock.nowSeconds - app.settings.recentLoginSeconds - Self.freshnessLeewaySeconds
            guard identity.token.signedInAt >= oldest else {
                throw GatehouseError(
                    .invalidCredential, "This \(provider.rawValue) token was issued too long ago to count as a recent sign-in; get a new one.", status: 401)
            }
            guard let owner = try data.identities.user(provider: provider.identity, subject: identity.subject), owner.id == claims.userID else {
                throw GatehouseError(.invalidCredential, "This \(provider.rawValue) account is not the signed-in user's.", status: 401)
            }
        } catch let error as GatehouseError where error.code == .invalidCredential {
            try sessions.countFailedReauthentication(app, claims: claims)
            throw error
        }
        return try sessions.refreshAuthTime(app: app, claims: claims)
    }
}
