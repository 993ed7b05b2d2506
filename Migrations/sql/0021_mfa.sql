-- Second factors (API.md, "Second factors and passkeys"; docs/accounts.md). Every row is an app's.

-- Authenticator apps (RFC 6238). `secret` is the base32 secret sealed under the master key
-- (bound to the app and the factor's id); `last_used_step` is the 30-second step of the last
-- code accepted, so no code of it or an earlier step is accepted again. A factor counts once
-- `confirmed_at` is set. Erased with the account.
CREATE TABLE mfa_totp_factors (
    id             TEXT PRIMARY KEY,
    app_id         TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    user_id        TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name           TEXT,
    secret         TEXT NOT NULL,
    confirmed_at   BIGINT,
    last_used_step BIGINT,
    last_used_at   BIGINT,
    created_at     BIGINT NOT NULL
);
CREATE INDEX mfa_totp_factors_user ON mfa_totp_factors (app_id, user_id);

-- Recovery codes: hex SHA-256 of each (50 random bits, behind the guess limits), used once.
-- Erased with the account.
CREATE TABLE mfa_recovery_codes (
    app_id     TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    code_hash  TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    used_at    BIGINT,
    PRIMARY KEY (app_id, user_id, code_hash)
);

-- The second steps first factors left open: the hash of the `mfa_token`, the first factor's
-- method and whether it made the account, whether the token may enrol a factor (and what an
-- enrolment with it confirmed: an amr value), 5 minutes, used once. The maintenance job drops
-- expired ones; erased with the account.
CREATE TABLE mfa_challenges (
    token_hash   TEXT PRIMARY KEY,
    app_id       TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    user_id      TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    method       TEXT NOT NULL,
    is_new_user  INTEGER NOT NULL,
    enroll       INTEGER NOT NULL,
    satisfied_by TEXT,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    used_at      BIGINT
);
CREATE INDEX mfa_challenges_expires ON mfa_challenges (expires_at);
CREATE INDEX mfa_challenges_user ON mfa_challenges (app_id, user_id);

-- The session's `amr` when the sign-in said more than its method (space-separated, e.g.
-- `pwd otp mfa`); null: the method's own value, as before.
ALTER TABLE sessions ADD COLUMN amr TEXT;
