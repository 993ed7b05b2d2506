-- Provider sign-in: stored provider tokens (sealed, for revocation), Apple web-flow state and
-- the one-time login codes that hand a web sign-in to the page.

CREATE TABLE provider_tokens (
    app_id        TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    provider      TEXT NOT NULL,
    client_id     TEXT NOT NULL,
    refresh_token TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    PRIMARY KEY (app_id, user_id, provider, client_id)
);

-- One row per started web flow; `id` is the hash of the state sent to Apple, `binding_hash` the
-- hash of the browser-binding cookie. Single use: `used_at` is set when the callback takes it.
CREATE TABLE web_flows (
    id             TEXT PRIMARY KEY,
    app_id         TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    binding_hash   TEXT NOT NULL,
    nonce          TEXT NOT NULL,
    redirect_uri   TEXT NOT NULL,
    client_state   TEXT,
    code_challenge TEXT,
    created_at     BIGINT NOT NULL,
    expires_at     BIGINT NOT NULL,
    used_at        BIGINT
);

CREATE TABLE login_codes (
    code_hash      TEXT PRIMARY KEY,
    app_id         TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    user_id        TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    method         TEXT NOT NULL,
    is_new_user    INTEGER NOT NULL,
    code_challenge TEXT,
    created_at     BIGINT NOT NULL,
    expires_at     BIGINT NOT NULL,
    used_at        BIGINT
);
