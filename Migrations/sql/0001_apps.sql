-- Server-wide values that belong to no app (for example the sealed master-key check).
CREATE TABLE server_values (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- Apps (tenants), their admin secret keys and their token signing keys.
-- Times are epoch milliseconds (BIGINT); ids are TEXT; secrets are sealed text (see SecretSealer).

CREATE TABLE apps (
    id              TEXT PRIMARY KEY,
    app_key         TEXT NOT NULL UNIQUE,
    settings        TEXT NOT NULL,
    version         BIGINT NOT NULL,
    source          TEXT NOT NULL,
    source_checksum TEXT,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL
);

-- Origins listed by each app, so that CORS preflights (which carry no app key) are one indexed lookup.
CREATE TABLE app_origins (
    app_id TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    origin TEXT NOT NULL,
    PRIMARY KEY (app_id, origin)
);
CREATE INDEX app_origins_origin ON app_origins (origin);

CREATE TABLE app_secret_keys (
    id         TEXT PRIMARY KEY,
    app_id     TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    key_hash   TEXT NOT NULL UNIQUE,
    hint       TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT
);
CREATE INDEX app_secret_keys_app ON app_secret_keys (app_id);

CREATE TABLE signing_keys (
    kid         TEXT PRIMARY KEY,
    app_id      TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    algorithm   TEXT NOT NULL,
    private_key TEXT NOT NULL,
    public_jwk  TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('next', 'current', 'retired')),
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT
);
CREATE INDEX signing_keys_app ON signing_keys (app_id, state);
