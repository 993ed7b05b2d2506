-- Passkeys (issue 32, ADR 0028). Credential ids and COSE public keys are kept as base64url text
-- (no padding), the same in both dialects. A passkey belongs to a user of its own app.
CREATE TABLE passkeys (
    app_id          TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    id              TEXT NOT NULL,
    user_id         TEXT NOT NULL,
    credential_id   TEXT NOT NULL,
    public_key      TEXT NOT NULL,
    alg             BIGINT NOT NULL,
    sign_count      BIGINT NOT NULL,
    aaguid          TEXT NOT NULL,
    backup_eligible INTEGER NOT NULL,
    backed_up       INTEGER NOT NULL,
    transports      TEXT NOT NULL,
    name            TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    last_used_at    BIGINT,
    PRIMARY KEY (app_id, id),
    UNIQUE (app_id, credential_id),
    FOREIGN KEY (app_id, user_id) REFERENCES users (app_id, id) ON DELETE CASCADE
);
CREATE INDEX passkeys_user ON passkeys (app_id, user_id, created_at);

-- The opaque WebAuthn user handle of an account (user.id in creation options): random, never the
-- user id, so an authenticator holds nothing that names the account.
CREATE TABLE webauthn_user_handles (
    app_id     TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    user_id    TEXT NOT NULL,
    handle     TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (app_id, user_id),
    UNIQUE (app_id, handle),
    FOREIGN KEY (app_id, user_id) REFERENCES users (app_id, id) ON DELETE CASCADE
);

-- Challenges issued for a ceremony: stored as their SHA-256, bound to the app, a purpose
-- (register, sign_in, reauth, second_step) and, but for sign_in, a user; taken once.
CREATE TABLE webauthn_challenges (
    app_id     TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    hash       TEXT NOT NULL,
    purpose    TEXT NOT NULL,
    user_id    TEXT,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (app_id, hash)
);
CREATE INDEX webauthn_challenges_expiry ON webauthn_challenges (expires_at);
