import GatehouseCrypto

/// Emailed codes (API.md, "Choices"): 6 digits from the CSPRNG, alive 10 minutes, one live code
/// per address and purpose, stored only as an HMAC; the 5th wrong try burns the code; a second
/// send to an address within 60 s, or the 11th in an hour, is 429 whether or not the address has
/// an account. Failed checks also count per address across codes and purposes (``guessLimits``),
/// and an app's mail per hour is capped (`rate_limits.mail_per_hour`).
///
/// Each operation runs in the caller's unit of work, so a code row and its mail commit together.
public struct EmailCodes: Sendable {
    public static let lifetimeMillis: Int64 = 10 * 60_000
    public static let maxFailures = 5
    public static let resendMillis: Int64 = 60_000
    public static let windowMillis: Int64 = 3_600_000
    public static let sendsPerWindow = 10
    /// Failed code checks per (app, address), whatever the code or purpose, known address or not:
    /// at 10 in a fixed hour or 20 in a fixed day, every check of the address is 429
    /// `auth/too-many-attempts` until that window ends, the right code too. A new code every minute
    /// with 4 guesses each would otherwise try hundreds of codes an hour; this holds it to 10.
    /// Counted in the shared rate-limit table, so every node sees the same count.
    public static let guessLimits: [(bucket: String, failures: Int64, windowMillis: Int64)] = [
        ("code_guess_hour", 10, 3_600_000), ("code_guess_day", 20, 86_400_000),
    ]

    private let key: HMACKey
    private let composer: any EmailComposer
    private let clock: any Clock
    /// Runs a redemption's unit of work (which wakes the outbox for the mail it queued).
    private let units: UnitOfWork
    /// `GATEHOUSE_MAX_MAIL_PER_HOUR`: no app's cap is above it, whatever its settings say.
    private let maxMailPerHour: Int64
    private let metrics: any DomainMetrics

    /// - Parameter masterKey: for the key the HMACs use (``MasterKeyDerivation``).
    public init(
        masterKey: [UInt8], composer: any EmailComposer, clock: any Clock, units: UnitOfWork,
        maxMailPerHour: Int64 = 10_000, metrics: any DomainMetrics = NoDomainMetrics()
    ) {
        self.units = units
        self.maxMailPerHour = maxMailPerHour
        self.metrics = metrics
        self.key = HMACKey(MasterKeyDerivation.key(for: .emailCodes, from: masterKey))
        self.composer = composer
        self.clock = clock
    }

    /// The address as the table knows it: a keyed hash, so a dump tells neither the addresses nor,
    /// by hashing guesses, whether one was there.
    func subject(of address: String) -> String {
        Digest.hex(key.tag(Array("subject\u{0}\(address)".utf8)))
    }

    /// The row of a code. Codes of the signed-in user's own address (verification,
    /// reauthentication) are the user's: under `email_collision: separate` two accounts may share
    /// an address, and one's wrong tries must not burn the other's code. The send windows stay the
    /// address's whatever the row (``send``): no number of accounts mails one address more often.
    private func rowSubject(_ purpose: EmailPurpose, _ address: String, _ userID: UserID?) -> String {
        switch (purpose, userID) {
        case (.verification, let user?), (.reauthentication, let user?): subject(of: "\(address)\u{0}\(user.rawValue)")
        default: subject(of: address)
        }
    }

    /// Bound to app, purpose and address: a code is worth nothing anywhere else.
    private func hash(code: String, app: AppID, purpose: EmailPurpose, subject: String) -> String {
        Digest.hex(key.tag(Array("code\u{0}\(app.rawValue)\u{0}\(purpose.rawValue)\u{0}\(subject)\u{0}\(code)".utf8)))
    }

    /// Six uniform digits: 32 random bits, redrawn above the largest multiple of 10^6.
    static func newCode() -> String {
        let limit = UInt32.max - UInt32.max % 1_000_000
        while true {
            let bytes = SecureRandom.bytes(4)
            let value = bytes.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            if value < limit {
                let digits = String(value % 1_000_000)
                return String(repeating: "0", count: 6 - digits.count) + digits
            }
        }
    }

    /// Counts a send to `address` for `purpose` (429 `auth/too-many-requests` with `Retry-After`
    /// past the windows), replaces the live code with a new one and writes the mail that carries
    /// it; queues the mail only when `deliver` (false: no account to send to). Everything else is
    /// the same either way — the windows, a code row that answers wrong tries, expiry and burning
    /// alike, the mail rendered and sealed — so neither the answers nor the work tell whether the
    /// address has an account; only the outbox row is not written.
    public func send(
        _ tx: any AppScopedStore, app: AppContext, purpose: EmailPurpose, address: String, userID: UserID?, mail: EmailToSend, deliver: Bool
    ) throws {
        let now = clock.nowMillis()
        // The address's windows first (its row, then the code's own row: always in this order).
        let addressSubject = subject(of: address)
        var window = try lockRow(tx, purpose: purpose, subject: addressSubject)
        if window.lastSentAt + Self.resendMillis > now {
            throw Self.tooMany(retryAfterMillis: window.lastSentAt + Self.resendMillis - now)
        }
        if window.windowStart + Self.windowMillis <= now {
            window.windowStart = now
            window.windowSends = 0
        }
        if window.windowSends >= Self.sendsPerWindow {
            throw Self.tooMany(retryAfterMillis: window.windowStart + Self.windowMillis - now)
        }
        window.windowSends += 1
        window.lastSentAt = now
        let subject = rowSubject(purpose, address, userID)
        var record = window
        if subject != addressSubject {
            try tx.emailCodes.save(window)
            record = try lockRow(tx, purpose: purpose, subject: subject)
            // The code's row keeps its expiry for the purge, its windows unused.
            record.lastSentAt = now
        }
        var mail = mail
        let code = Self.newCode()
        mail.code = code
        mail.minutes = Int(Self.lifetimeMillis / 60_000)
        record.codeHash = hash(code: code, app: app.id, purpose: purpose, subject: subject)
        record.userID = userID
        record.failures = 0
        record.expiresAt = now + Self.lifetimeMillis
        let item = try composer.outboxItem(mail, app: app.id, idempotencyKey: "code/\(app.id.rawValue)/\(purpose.rawValue)/\(subject)/\(now)/\(window.windowSends)")
        if deliver, try underMailCap(tx, app: app, now: now) { _ = try tx.outbox.enqueue(item, now: now) }
        try tx.emailCodes.save(record)
        // Rows of addresses nobody sends to any more are dead weight: now and then, drop this app's.
        if SecureRandom.bytes(1)[0] < 4 { try tx.emailCodes.purge(before: now - Self.windowMillis) }
    }

    /// Holds the address until the unit of work ends (its sign-in code row, locked): the flows that
    /// give an account an address take it first and then check the address is free, so two at once
    /// (a sign-up and a code sign-in, two email changes) cannot both take it on PostgreSQL.
    /// (SQLite's transactions hold the one write lock already.)
    public func lockAddress(_ tx: any AppScopedStore, _ address: String) throws {
        _ = try lockRow(tx, purpose: .signIn, subject: subject(of: address))
    }

    /// The row, made if missing, locked. A row can vanish between the insert and the lock (another
    /// transaction's purge deleted it and committed while this one waited): then again, until one
    /// is held, or nothing would be locked at all.
    private func lockRow(_ tx: any AppScopedStore, purpose: EmailPurpose, subject: String) throws -> EmailCodeRecord {
        for _ in 0..<10 {
            if let record = try tx.emailCodes.lock(purpose: purpose, subject: subject, create: true) { return record }
        }
        throw GatehouseError(.unavailable, "The server is busy; retry shortly.", retryAfter: 1)
    }

    /// 400 for an address no mail can be written to; ask before looking the address up.
    public func requireMailable(_ address: String) throws { try composer.checkRecipient(address) }

    /// Queues a mail that carries no code (the notice to an old address), with the change it tells of.
    public func notify(_ tx: any AppScopedStore, app: AppContext, mail: EmailToSend, idempotencyKey: String) throws {
        let item = try composer.outboxItem(mail, app: app.id, idempotencyKey: idempotencyKey)
        let now = clock.nowMillis()
        guard try underMailCap(tx, app: app, now: now) else { return }
        _ = try tx.outbox.enqueue(item, now: now)
    }

    /// Counts one mail of the app in this fixed hour and says whether it may be queued: at most
    /// `rate_limits.mail_per_hour` (and the platform's maximum). One over is dropped in silence
    /// (the caller answers as it would have: a cap must not tell a stranger anything), counted in
    /// the metrics, and audited as `app.mail_capped` once in the hour.
    private func underMailCap(_ tx: any AppScopedStore, app: AppContext, now: Int64) throws -> Bool {
        let cap = min(app.settings.rateLimits.mailPerHour, maxMailPerHour)
        let hour = now - now % 3_600_000
        guard try tx.rateLimits.hit(bucket: "mail_hour", windowStart: hour) > cap else { return true }
        metrics.mailCapped(app: app.id)
        if try tx.rateLimits.hit(bucket: "mail_capped_event", windowStart: hour) == 1 {
            try tx.auditLog.record(Event(
                type: .appMailCapped, userID: nil, sessionID: nil, ip: nil, userAgent: nil, data: ["mail_per_hour": .int(cap)], createdAt: now))
        }
        return false
    }

    /// Checks `code` for `address` and `purpose` and, if right, uses it up and runs `then` in the
    /// same unit of work (a throw from `then` leaves the code unused). A wrong code is counted
    /// (committed, then answered 400 `auth/invalid-code`); the 5th burns it, and every later try
    /// is 429 `auth/too-many-attempts`. A code bound to an account (`userID`) is worth nothing to
    /// another.
    public func redeem<T>(
        _ data: any AppScopedStore, app: AppContext, purpose: EmailPurpose, address: String, code: String, userID: UserID?,
        then: (any AppScopedStore) throws -> T
    ) throws -> T {
        try InputRules.emailCode(code)
        let subject = rowSubject(purpose, address, userID)
        let presented = hash(code: code, app: app.id, purpose: purpose, subject: subject)
        let guesses = self.subject(of: address)
        let outcome: Result<T, GatehouseError> = try units.run(data) { tx in
            let now = clock.nowMillis()
            // Checks of one address wait for each other (its row, locked), so that concurrent wrong
            // codes cannot all pass the count before any of them has added to it.
            try lockAddress(tx, address)
            if let refusal = try guessRefusal(tx, guesses, now: now) { return .failure(refusal) }
            guard var record = try tx.emailCodes.lock(purpose: purpose, subject: subject, create: false), let stored = record.codeHash else {
                try countGuess(tx, guesses, now: now)
                return .failure(GatehouseError(.invalidCode, "The code is not valid."))
            }
            if record.failures >= Self.maxFailures {
                try countGuess(tx, guesses, now: now)
                return .failure(GatehouseError(.tooManyAttempts, "Too many wrong codes: ask for a new one."))
            }
            if record.expiresAt <= now {
                try countGuess(tx, guesses, now: now)
                return .failure(GatehouseError(.codeExpired, "The code has expired: ask for a new one."))
            }
            guard constantTimeEquals(Array(stored.utf8), Array(presented.utf8)), record.userID == userID else {
                record.failures += 1
                try tx.emailCodes.save(record)
                try countGuess(tx, guesses, now: now)
                return .failure(GatehouseError(.invalidCode, "The code is not valid."))
            }
            record.codeHash = nil
            record.failures = 0
            try tx.emailCodes.save(record)
            return .success(try then(tx))
        }
        return try outcome.get()
    }

    /// 429 `auth/too-many-attempts` while the address has used up a window of ``guessLimits``.
    private func guessRefusal(_ tx: any AppScopedStore, _ guesses: String, now: Int64) throws -> GatehouseError? {
        for limit in Self.guessLimits {
            let start = now - now % limit.windowMillis
            guard try tx.rateLimits.hits(bucket: "\(limit.bucket):\(guesses)", windowStart: start) >= limit.failures else { continue }
            let seconds = Int(max(1, (start + limit.windowMillis - now + 999) / 1000))
            return GatehouseError(.tooManyAttempts, "Too many wrong codes for this address; retry in \(seconds) s.", retryAfter: seconds)
        }
        return nil
    }

    /// Counts a failed check of the address in each window of ``guessLimits``.
    private func countGuess(_ tx: any AppScopedStore, _ guesses: String, now: Int64) throws {
        for limit in Self.guessLimits {
            _ = try tx.rateLimits.hit(bucket: "\(limit.bucket):\(guesses)", windowStart: now - now % limit.windowMillis)
        }
    }

    private static func tooMany(retryAfterMillis: Int64) -> GatehouseError {
        let seconds = Int(max(1, (retryAfterMillis + 999) / 1000))
        return GatehouseError(.tooManyRequests, "Too many codes sent to this address; retry in \(seconds) s.", retryAfter: seconds)
    }
}
