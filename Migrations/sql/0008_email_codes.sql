-- Emailed codes (issue 11): one live code per app, purpose and address, and that address's send
-- windows for the purpose. The address is kept only as an HMAC (the subject), the code only as an
-- HMAC under a key derived from the master key.
CREATE TABLE email_codes (
    app_id       TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    purpose      TEXT NOT NULL,
    subject      TEXT NOT NULL,
    user_id      TEXT,
    code_hash    TEXT,
    failures     INTEGER NOT NULL DEFAULT 0,
    expires_at   BIGINT NOT NULL DEFAULT 0,
    last_sent_at BIGINT NOT NULL DEFAULT 0,
    window_start BIGINT NOT NULL DEFAULT 0,
    window_sends INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (app_id, purpose, subject)
);
-- The purge: rows whose windows and code have all ended.
CREATE INDEX email_codes_last_sent ON email_codes (app_id, last_sent_at);
