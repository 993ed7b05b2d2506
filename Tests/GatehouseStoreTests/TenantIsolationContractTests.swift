import Foundation
import GatehouseCore
import GatehouseMigrations
import GatehouseSQL
import GatehouseTesting
import Testing

/// The two-app contract of `Store.app(_:)`: what is written through app A's scope, app B's scope
/// neither reads, finds, changes nor deletes. One small check per store reachable from an app's
/// scope (the scope itself — its app record, keys and unit of work — then users, identities,
/// provider tokens, sessions, login codes, emailed codes, the audit log, deletion, files, rate
/// limits and the outbox), each on a fresh migrated database, on both databases. A store split
/// out of `AppScopedStore` keeps its check: point the check at the new store.
@Suite struct TenantIsolationContractTests {
    /// Apps A and B on a migrated database. Each has a user at the same address who signs in with
    /// a password and holds a session; A's user also has a Google identity.
    final class TwoApps {
        static let now: Int64 = 1_700_000_000_000
        static let email = "same@example.com"
        let store: SQLStore
        let a: any AppScopedStore
        let b: any AppScopedStore
        let userA: User
        let userB: User
        let sessionA: Session
        /// The hash of A's session's refresh token.
        let refreshA = "refresh-hash-of-a"
        /// A's secret key hash, and its current signing key.
        let secretHashA = "secret-hash-of-a"
        let kidA = "kid-of-a"

        init(_ database: any SQLDatabase) throws {
            try Migrator(
                database: database,
                migrations: Migrator.load(from: BundledMigrations.directory, dialect: database.dialect, checksum: testChecksum)
            ).migrate()
            store = SQLStore(database: database)
            let now = Self.now
            for (name, secretHash, kid) in [("a", secretHashA, kidA), ("b", "secret-hash-of-b", "kid-of-b")] {
                try store.apps.insert(
                    AppRecord(id: AppID(unchecked: "app_\(name)"), appKey: "pk_\(name)", settingsJSON: #"{"name":"\#(name)"}"#, source: "api", createdAt: now, updatedAt: now),
                    allowedOrigins: ["https://\(name).example"],
                    secretKey: SecretKeyRecord(id: "sk_\(name)", keyHash: secretHash, hint: "sk_\(name)", createdAt: now),
                    signingKeys: [Self.signingKey(kid, .current), Self.signingKey(kid + "-next", .next)])
            }
            a = store.app(AppID(unchecked: "app_a"))
            b = store.app(AppID(unchecked: "app_b"))
            userA = try Self.addUser(to: a, hash: "hash-a")
            userB = try Self.addUser(to: b, hash: "hash-b")
            try a.identities.addIdentity(userA.id, Identity(provider: .google, subject: "google-sub-a", email: Self.email, createdAt: now))
            sessionA = Session(
                id: .generate(), userID: userA.id, method: .password, authTime: now, createdAt: now, lastUsedAt: now, expiresAt: now + 86_400_000, ip: nil,
                userAgent: nil)
            try a.sessions.insertSession(
                sessionA, refreshTokenHash: refreshA,
                event: Event(type: .userSignedIn, userID: userA.id, sessionID: sessionA.id, ip: nil, userAgent: nil, createdAt: now), passwordHash: nil)
        }

        static func signingKey(_ kid: String, _ state: SigningKeyState) -> SigningKeyRecord {
            SigningKeyRecord(kid: kid, algorithm: .es256, sealedPrivateKey: "sealed", publicJWK: "{}", state: state, createdAt: now)
        }

        static func addUser(to app: any AppScopedStore, hash: String) throws -> User {
            let user = User(id: .generate(), email: email, emailVerified: false, firstName: nil, lastName: nil, createdAt: now, updatedAt: now, lastSignInAt: nil)
            try app.users.insertUser(
                user, passwordHash: hash, identity: Identity(provider: .password, subject: email, email: email, createdAt: now),
                event: Event(type: .userSignedUp, userID: user.id, sessionID: nil, ip: nil, userAgent: nil, createdAt: now))
            return user
        }

        /// A's user, identities and password hash as they are now: a check compares them before and after B's calls.
        func stateOfA() throws -> [String] {
            let (user, identities) = try #require(try a.users.userWithIdentities(userA.id))
            return ["\(user)", "\(identities.sorted { $0.provider.rawValue < $1.provider.rawValue })", "\(try a.passwords.passwordHash(userA.id) ?? "-")"]
        }
    }

    /// One store's check, named for the test's report.
    struct Check: Sendable, CustomTestStringConvertible {
        let name: String
        let run: @Sendable (TwoApps) throws -> Void
        var testDescription: String { name }
    }

    static let checks: [Check] = [
        Check(name: "app record", run: appRecord),
        Check(name: "signing and secret keys", run: keys),
        Check(name: "unit of work", run: unitOfWork),
        Check(name: "users", run: users),
        Check(name: "anonymous users", run: anonymousUsers),
        Check(name: "identities", run: identities),
        Check(name: "provider tokens", run: providerTokens),
        Check(name: "Apple notifications", run: appleAccounts),
        Check(name: "sessions", run: sessions),
        Check(name: "login codes", run: loginCodes),
        Check(name: "email codes", run: emailCodes),
        Check(name: "audit log", run: auditLog),
        Check(name: "deletion", run: deletion),
        Check(name: "files", run: files),
        Check(name: "rate limits", run: rateLimits),
        Check(name: "outbox", run: outbox),
    ]

    @Test(arguments: TestDatabase.kinds, checks)
    func nothingWrittenInOneAppIsVisibleThroughAnothersScope(kind: TestDatabaseKind, check: Check) throws {
        try withDatabase(kind) { test in try check.run(TwoApps(test.database)) }
    }

    // MARK: - The checks

    /// `updateSettings`, `setDisabled` and `keepSourceChecksum` change B's record only.
    static func appRecord(_ f: TwoApps) throws {
        let before = try #require(try f.store.apps.find(id: f.a.appID))
        let updated = try f.b.settings.updateSettings(
            json: #"{"name":"b2"}"#, allowedOrigins: ["https://b2.example"], sourceChecksum: "b-file", expectedVersion: nil, now: TwoApps.now + 1)
        #expect(updated?.id == f.b.appID)
        // An expected version that is A's, not B's, changes nothing of A either.
        _ = try f.b.settings.updateSettings(json: #"{"name":"b3"}"#, allowedOrigins: [], sourceChecksum: nil, expectedVersion: before.version + 7, now: TwoApps.now + 2)
        _ = try f.b.settings.setDisabled(at: TwoApps.now + 3, now: TwoApps.now + 3)
        try f.b.settings.keepSourceChecksum("b-file-2")
        #expect(try f.store.apps.find(id: f.a.appID) == before)
        #expect(try f.store.apps.version(of: f.a.appID) == before.version)
    }

    /// B's keys are B's: its list, rotation and new secret key leave A's keys as they were.
    static func keys(_ f: TwoApps) throws {
        let now = TwoApps.now + 1
        let keysOfA = try f.a.settings.signingKeys(now: now)
        #expect(Set(keysOfA.map(\.kid)) == [f.kidA, f.kidA + "-next"])
        #expect(Set(try f.b.settings.signingKeys(now: now).map(\.kid)).isDisjoint(with: keysOfA.map(\.kid)))
        _ = try f.b.settings.rotateSigningKeys(
            SigningKeyRotation(newNext: TwoApps.signingKey("kid-of-b-2", .next), retiredExpiresAt: now, revokePrevious: true, minimumIntervalMillis: 0, maxRetired: 0),
            now: now)
        try f.b.settings.addSecretKey(SecretKeyRecord(id: "sk_b2", keyHash: "secret-hash-of-b-2", hint: "sk_b2", createdAt: now), othersExpireAt: now)
        #expect(try f.a.settings.signingKeys(now: now) == keysOfA)
        #expect(try f.store.apps.find(secretKeyHash: f.secretHashA, now: now + 1)?.id == f.a.appID)
    }

    /// A unit of work of B is B's scope: it reads nothing of A.
    static func unitOfWork(_ f: TwoApps) throws {
        let (scope, found) = try f.b.transaction { tx in (tx.appID, try tx.users.user(f.userA.id)) }
        #expect(scope == f.b.appID)
        #expect(found == nil)
    }

    /// A's user: no lookup of B finds them, no change of B touches them.
    static func users(_ f: TwoApps) throws {
        let before = try f.stateOfA()
        let id = f.userA.id, email = TwoApps.email, now = TwoApps.now + 1
        #expect(try f.b.users.user(id) == nil)
        #expect(try f.b.users.userWithIdentities(id) == nil)
        #expect(try f.b.passwords.passwordHash(id) == nil)
        #expect(try f.b.users.user(email: email)?.id == f.userB.id)
        #expect(try f.b.passwords.passwordUser(email: email)?.0.id == f.userB.id)
        #expect(try f.b.users.users(matching: nil, after: nil, limit: 100).map(\.0.id) == [f.userB.id])
        #expect(try f.b.users.users(matching: id.rawValue, after: nil, limit: 100).isEmpty)
        #expect(try f.b.users.emailInUse(email, except: f.userB.id) == false)
        #expect(try f.b.transaction { tx in try tx.users.lockUser(id) } == nil)

        #expect(try f.b.users.markEmailVerified(id, email: email, now: now) == nil)
        #expect(try f.b.users.changeEmail(id, from: email, to: "moved@example.com", now: now) == nil)
        #expect(try f.b.users.setBan(id, Ban(sanctionCode: "x", reason: nil, suspendedUntil: nil), now: now) == nil)
        #expect(try f.b.users.updateProfile(id, firstName: "Mallory", lastName: nil, photoURL: nil, now: now) == nil)
        #expect(try f.b.users.setLocale(id, "ja", now: now) == nil)
        #expect(try f.b.users.setCustomData(id, displayName: "Mallory", appMetadata: UserMetadata(unchecked: ["role": "owner"]), userMetadata: .empty, now: now) == nil)
        #expect(try f.b.passwords.setPasswordHash(id, hash: "hash-of-b", replacing: "hash-a", addIdentity: nil, now: now) == false)
        try f.b.users.fillNames(id, firstName: "Mallory", lastName: "B", now: now)
        #expect(try f.b.identities.forgetSignInMethods(id, now: now).isEmpty)
        #expect(try f.stateOfA() == before)
    }

    /// A's anonymous user: B neither lists, sees, upgrades nor marks it seen; the expiry's list of
    /// apps names A only.
    static func anonymousUsers(_ f: TwoApps) throws {
        let now = TwoApps.now
        let guest = User(id: .generate(), email: nil, emailVerified: false, firstName: nil, lastName: nil, createdAt: now, updatedAt: now, lastSignInAt: now, isAnonymous: true)
        try f.a.users.insertUser(guest, passwordHash: nil, identity: nil, event: Event(type: .userSignedUp, userID: guest.id, sessionID: nil, ip: nil, userAgent: nil, createdAt: now))
        #expect(try f.store.appsWithAnonymousUsers() == [f.a.appID])
        let later = now + 10 * 86_400_000
        #expect(try f.b.users.anonymousUsers(unseenBefore: later, limit: 100).isEmpty)
        #expect(try f.b.users.anonymousLastSeen(guest.id) == nil)
        #expect(try f.b.users.users(matching: nil, anonymous: true, after: nil, limit: 100).isEmpty)
        try f.b.users.markAnonymousSeen(guest.id, now: later, before: later)
        #expect(try f.b.users.upgradeAnonymous(guest.id, email: "mallory@example.com", emailVerified: true, now: later) == nil)
        #expect(try f.a.users.anonymousLastSeen(guest.id) == now)
        #expect(try f.a.users.anonymousUsers(unseenBefore: later, limit: 100) == [guest.id])
        #expect(try f.a.users.users(matching: nil, anonymous: true, after: nil, limit: 100).map(\.0.id) == [guest.id])
        #expect(try f.a.users.users(matching: nil, anonymous: false, after: nil, limit: 100).map(\.0.id) == [f.userA.id])
        #expect(try f.a.users.user(guest.id)?.isAnonymous == true && f.a.users.user(guest.id)?.email == nil)
        // A's own upgrade works, once.
        #expect(try f.a.users.upgradeAnonymous(guest.id, email: nil, emailVerified: false, now: later)?.isAnonymous == false)
        #expect(try f.a.users.upgradeAnonymous(guest.id, email: nil, emailVerified: false, now: later) == nil)
        #expect(try f.store.appsWithAnonymousUsers().isEmpty)
    }

    /// A's identities: B neither finds, removes nor is refused by them (B may link the same one).
    static func identities(_ f: TwoApps) throws {
        let before = try f.stateOfA()
        #expect(try f.b.identities.all(of: f.userA.id).isEmpty)
        #expect(try f.b.identities.user(provider: .google, subject: "google-sub-a") == nil)
        #expect(try f.b.identities.removeIdentity(f.userA.id, provider: .google, now: TwoApps.now + 1) == false)
        try f.b.identities.addIdentity(f.userB.id, Identity(provider: .google, subject: "google-sub-a", email: nil, createdAt: TwoApps.now + 1))
        #expect(try f.b.identities.user(provider: .google, subject: "google-sub-a")?.id == f.userB.id)
        #expect(try f.a.identities.user(provider: .google, subject: "google-sub-a")?.id == f.userA.id)
        #expect(try f.stateOfA() == before)
    }

    /// A's kept provider tokens: B neither reads them nor adds to A's user.
    static func providerTokens(_ f: TwoApps) throws {
        try f.a.identities.saveProviderToken(f.userA.id, provider: .apple, clientID: "com.example.a", sealedToken: "sealed-a", now: TwoApps.now)
        #expect(try f.b.identities.providerTokens(f.userA.id).isEmpty)
        #expect(try f.b.identities.saveProviderToken(f.userA.id, provider: .apple, clientID: "com.example.b", sealedToken: "sealed-b", now: TwoApps.now) == false)
        #expect(try f.a.identities.providerTokens(f.userA.id).map(\.sealedToken) == ["sealed-a"])
        // B can neither take nor, by forgetting its user's methods, drop A's.
        #expect(try f.b.identities.takeProviderTokens(f.userA.id, provider: .apple).isEmpty)
        #expect(try f.b.identities.forgetSignInMethods(f.userA.id, now: TwoApps.now).tokens.isEmpty)
        #expect(try f.a.identities.providerTokens(f.userA.id).map(\.sealedToken) == ["sealed-a"])
        #expect(try f.a.identities.takeProviderTokens(f.userA.id, provider: .apple).map(\.sealedToken) == ["sealed-a"])
        #expect(try f.a.identities.providerTokens(f.userA.id).isEmpty)
    }

    /// What A keeps of Apple's notifications: B neither reads nor changes A's relay forwarding,
    /// revoked identities, notification records or Apple sessions.
    static func appleAccounts(_ f: TwoApps) throws {
        let now = TwoApps.now + 1, relay = "a1@privaterelay.appleid.com"
        try f.a.identities.addIdentity(f.userA.id, Identity(provider: .apple, subject: "apple-sub-a", email: relay, createdAt: now))
        #expect(try f.a.appleAccounts.setRelayForwarding(relay, user: f.userA.id, forwarding: false, eventTime: 10, now: now))
        #expect(try f.a.appleAccounts.recordAppleNotification(subjectDigest: "digest-a", type: "email-disabled", eventTime: 10, now: now))
        #expect(try f.b.appleAccounts.isRelayForwardingOff(relay) == false)
        #expect(try f.b.appleAccounts.setRelayForwarding(relay, user: f.userB.id, forwarding: true, eventTime: 20, now: now) == false, "B's own row, on as by default")
        #expect(try f.a.appleAccounts.isRelayForwardingOff(relay))
        #expect(try f.b.appleAccounts.recordAppleNotification(subjectDigest: "digest-a", type: "email-disabled", eventTime: 10, now: now), "B's own record")
        #expect(try f.b.appleAccounts.revokeAppleIdentity(f.userA.id, subject: "apple-sub-a", remember: true, now: now) == false)
        #expect(try f.b.appleAccounts.endSessions(of: f.userA.id, startedWith: .password, reason: .revoked, now: now).isEmpty)
        #expect(try f.a.identities.user(provider: .apple, subject: "apple-sub-a")?.id == f.userA.id)
        #expect(try f.a.appleAccounts.revokeAppleIdentity(f.userA.id, subject: "apple-sub-a", remember: true, now: now))
        #expect(try f.b.appleAccounts.revokedAppleIdentityOwner(subject: "apple-sub-a") == nil)
        #expect(try f.b.appleAccounts.takeRevokedAppleIdentity(subject: "apple-sub-a") == nil)
        #expect(try f.a.appleAccounts.revokedAppleIdentityOwner(subject: "apple-sub-a") == f.userA.id)
        #expect(try f.a.sessions.session(f.sessionA.id)?.endedAt == nil)
    }

    /// A's session: B neither reads, ends, rotates nor touches it, nor opens one for A's user.
    static func sessions(_ f: TwoApps) throws {
        let id = f.sessionA.id, user = f.userA.id, now = TwoApps.now + 1
        #expect(try f.b.sessions.session(id) == nil)
        #expect(try f.b.sessions.activeSessions(user, now: now, usedSince: 0).isEmpty)
        #expect(try f.b.sessions.endSession(id, user: user, reason: .revoked, now: now) == false)
        #expect(try f.b.sessions.endSessions(of: user, keeping: nil, reason: .revoked, now: now).isEmpty)
        try f.b.sessions.setAuthTime(id, now: now)
        let outcome = try f.b.sessions.rotateRefreshToken(
            presentedHash: f.refreshA, successorHash: "successor-by-b", graceMillis: 0, usedSince: 0, origin: RequestOrigin(ip: nil, userAgent: nil), now: now
        ) { _ in [] }
        #expect(outcome == .invalid)
        let intruder = Session(
            id: .generate(), userID: user, method: .password, authTime: now, createdAt: now, lastUsedAt: now, expiresAt: now + 60_000, ip: nil, userAgent: nil)
        #expect(throws: SessionRefusal.self) {
            try f.b.sessions.insertSession(
                intruder, refreshTokenHash: "refresh-by-b", event: Event(type: .userSignedIn, userID: user, sessionID: intruder.id, ip: nil, userAgent: nil, createdAt: now),
                passwordHash: nil)
        }

        #expect(try f.a.sessions.session(id) == f.sessionA)
        #expect(try f.a.sessions.activeSessions(user, now: now, usedSince: 0).map(\.id) == [id])
        guard case .rotated(let session) = try f.a.sessions.rotateRefreshToken(
            presentedHash: f.refreshA, successorHash: "successor-by-a", graceMillis: 0, usedSince: 0, origin: RequestOrigin(ip: nil, userAgent: nil), now: now,
            reuseEvents: { _ in [] })
        else { Issue.record("A's refresh token no longer rotates in A"); return }
        #expect(session.id == id)
    }

    /// A's login code: B cannot take it; A still can.
    static func loginCodes(_ f: TwoApps) throws {
        let now = TwoApps.now
        try f.a.identities.insertLoginCode(LoginCode(codeHash: "login-code-a", userID: f.userA.id, method: .external, provider: "acme", isNewUser: false, codeChallenge: nil, createdAt: now, expiresAt: now + 60_000))
        #expect(try f.b.identities.takeLoginCode(hash: "login-code-a", now: now + 1) == nil)
        #expect(try f.a.identities.takeLoginCode(hash: "login-code-a", now: now + 1)?.provider == "acme")
    }

    /// A's emailed-code row: B's lock does not find it and B's purge does not delete it.
    static func emailCodes(_ f: TwoApps) throws {
        let subject = "subject-of-an-address"
        try f.a.transaction { tx in
            var record = try #require(try tx.emailCodes.lock(purpose: .signIn, subject: subject, create: true))
            record.codeHash = "code-hash-a"
            record.expiresAt = TwoApps.now + 600_000
            record.lastSentAt = TwoApps.now
            try tx.emailCodes.save(record)
        }
        try f.b.transaction { tx in
            #expect(try tx.emailCodes.lock(purpose: .signIn, subject: subject, create: false) == nil)
            try tx.emailCodes.purge(before: .max)
        }
        let kept = try f.a.transaction { tx in try tx.emailCodes.lock(purpose: .signIn, subject: subject, create: false) }
        #expect(kept?.codeHash == "code-hash-a")
    }

    /// A's events are not in B's audit log, by user or at all.
    static func auditLog(_ f: TwoApps) throws {
        let event = Event(type: .userUpdated, userID: f.userA.id, sessionID: nil, ip: nil, userAgent: nil, createdAt: TwoApps.now + 1)
        try f.a.auditLog.record(event)
        let all = try f.b.auditLog.events(EventQuery(limit: 1_000))
        #expect(!all.isEmpty)  // B's own sign-up
        #expect(all.allSatisfy { $0.userID != f.userA.id })
        #expect(try f.b.auditLog.events(EventQuery(userID: f.userA.id, limit: 1_000)).isEmpty)
        #expect(try f.a.auditLog.events(EventQuery(type: .userUpdated, limit: 10)).map(\.id) == [event.id])
    }

    /// B can neither schedule, cancel nor erase the deletion of A's user.
    static func deletion(_ f: TwoApps) throws {
        let now = TwoApps.now + 1
        let before = try f.stateOfA()
        #expect(try f.b.deletion.schedule(f.userA.id, PendingDeletion(requestedAt: now, purgeAt: now + 1), now: now) == false)
        #expect(try f.b.deletion.erase(f.userA.id, dueBy: nil, now: now) == nil)
        #expect(try f.stateOfA() == before)
        #expect(try f.a.deletion.schedule(f.userA.id, PendingDeletion(requestedAt: now, purgeAt: now + 1), now: now))
        #expect(try f.b.deletion.cancel(f.userA.id, now: now) == false)
        #expect(try f.a.users.user(f.userA.id)?.pendingDeletion != nil)
    }

    /// A's public file: B neither lists, reads, counts, changes nor deletes it.
    static func files(_ f: TwoApps) throws {
        let id = FileID.generate(), user = f.userA.id
        let file = StoredFile(
            id: id, userID: user, name: "a.txt", contentType: "text/plain", size: 3, sha256: "abc", visibility: .public, purpose: .file, createdAt: TwoApps.now,
            blobKey: StoredFile.blobKey(app: f.a.appID, file: id))
        try f.a.files.insert(file)
        #expect(try f.b.files.file(id, of: user) == nil)
        #expect(try f.b.files.publicFile(id) == nil)
        #expect(try f.b.files.files(of: user, after: nil, limit: 100).isEmpty)
        let usage = try f.b.files.usage(of: user, excludingPhotos: false)
        #expect(usage.count == 0 && usage.bytes == 0)
        #expect(try f.b.files.setVisibility(id, of: user, .private) == nil)
        #expect(try f.b.files.delete(id, of: user) == nil)
        #expect(try f.b.files.deletePhotos(of: user, except: nil).isEmpty)
        #expect(try f.b.files.deleteAll(of: user).isEmpty)
        #expect(try f.a.files.publicFile(id) == file)
    }

    /// A's counters: B reads, resets and purges its own only.
    static func rateLimits(_ f: TwoApps) throws {
        let window = TwoApps.now
        _ = try f.a.rateLimits.hit(bucket: "signin_ip:203.0.113.7", windowStart: window)
        #expect(try f.a.rateLimits.hit(bucket: "signin_ip:203.0.113.7", windowStart: window) == 2)
        #expect(try f.b.rateLimits.hits(bucket: "signin_ip:203.0.113.7", windowStart: window) == 0)
        #expect(try f.b.rateLimits.hit(bucket: "signin_ip:203.0.113.7", windowStart: window) == 1)
        try f.b.rateLimits.reset(bucket: "signin_ip:203.0.113.7")
        try f.b.rateLimits.purge(before: .max)
        #expect(try f.a.rateLimits.hits(bucket: "signin_ip:203.0.113.7", windowStart: window) == 2)
    }

    /// An item A queued: B cannot withdraw it; A can.
    static func outbox(_ f: TwoApps) throws {
        let item = NewOutboxItem(appID: f.a.appID, kind: .webhook, idempotencyKey: "webhook/app_a/1", payload: "{}", sealed: false)
        #expect(try f.a.outbox.enqueue(item, now: TwoApps.now))
        // B's scope queues nothing of A's, and withdraws nothing of A's.
        #expect(throws: InternalError.self) { try f.b.outbox.enqueue(NewOutboxItem(appID: f.a.appID, kind: .webhook, idempotencyKey: "webhook/app_a/2", payload: "{}", sealed: false), now: TwoApps.now) }
        // Nor names or lists A's webhook deliveries (the admin's list, ADR 0035).
        let id = try #require(try f.a.outbox.itemID(idempotencyKey: item.idempotencyKey))
        #expect(try f.b.outbox.itemID(idempotencyKey: item.idempotencyKey) == nil)
        #expect(try f.a.outbox.webhookDeliveries(state: nil, eventType: nil, after: nil, limit: 10).map(\.id) == [id])
        #expect(try f.b.outbox.webhookDeliveries(state: nil, eventType: nil, after: nil, limit: 10).isEmpty)
        #expect(try f.b.outbox.webhookDeliveries(state: .queued, eventType: nil, after: nil, limit: 10).isEmpty)
        #expect(try f.b.outbox.withdraw(idempotencyKey: item.idempotencyKey) == false)
        #expect(try f.a.outbox.withdraw(idempotencyKey: item.idempotencyKey))
    }
}
