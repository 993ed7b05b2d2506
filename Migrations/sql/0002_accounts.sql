-- Users, their sign-in identities, sessions with rotating refresh tokens, audit events, and
-- rate-limit counters. Every table carries app_id and every query binds it.

CREATE TABLE users (
    id              TEXT PRIMARY KEY,
    app_id          TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    email           TEXT,
    email_verified  INTEGER NOT NULL DEFAULT 0,
    first_name      TEXT,
    last_name       TEXT,
    photo_url       TEXT,
    password_hash   TEXT,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    last_sign_in_at BIGINT
);
CREATE INDEX users_app ON users (app_id, created_at);

-- One row per way to sign in. For passwords the subject is the (lowercased) email, so one email
-- has at most one password account per app.
CREATE TABLE identities (
    app_id     TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    provider   TEXT NOT NULL,
    subject    TEXT NOT NULL,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    email      TEXT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (app_id, provider, subject)
);
CREATE INDEX identities_user ON identities (app_id, user_id);

CREATE TABLE sessions (
    id           TEXT PRIMARY KEY,
    app_id       TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    user_id      TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    method       TEXT NOT NULL,
    auth_time    BIGINT NOT NULL,
    created_at   BIGINT NOT NULL,
    last_used_at BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    ended_at     BIGINT,
    end_reason   TEXT,
    ip           TEXT,
    user_agent   TEXT
);
CREATE INDEX sessions_user ON sessions (app_id, user_id);
CREATE INDEX sessions_ended ON sessions (ended_at);

-- Every refresh token a session was given, stored as SHA-256. The current one has rotated_at NULL;
-- presenting a rotated one outside the grace window is reuse.
CREATE TABLE refresh_tokens (
    token_hash TEXT PRIMARY KEY,
    app_id     TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL,
    rotated_at BIGINT
);
CREATE INDEX refresh_tokens_session ON refresh_tokens (session_id);

CREATE TABLE events (
    id         TEXT PRIMARY KEY,
    app_id     TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    type       TEXT NOT NULL,
    user_id    TEXT,
    session_id TEXT,
    ip         TEXT,
    user_agent TEXT,
    data       TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX events_app ON events (app_id, created_at);
CREATE INDEX events_user ON events (app_id, user_id, created_at);

-- Fixed-window counters shared by every node (key = app, limiter and subject, e.g. the client IP).
CREATE TABLE rate_limits (
    app_id       TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    bucket       TEXT NOT NULL,
    window_start BIGINT NOT NULL,
    hits         BIGINT NOT NULL,
    PRIMARY KEY (app_id, bucket)
);
