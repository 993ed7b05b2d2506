-- Hardening after the outside audit (issue 10).

-- Expired web flows and login codes are deleted in small batches as new ones are stored.
CREATE INDEX web_flows_expiry ON web_flows (app_id, expires_at);
CREATE INDEX login_codes_expiry ON login_codes (app_id, expires_at);

-- Email collision checks look users up by email.
CREATE INDEX users_email ON users (app_id, email);

-- Provider token nonces already used: nonce_key = hex SHA-256 of issuer, subject and nonce; kept until
-- the token expires. Not per app: a token replayed to another app is a replay too.
CREATE TABLE provider_nonces (
    nonce_key  TEXT PRIMARY KEY,
    expires_at BIGINT NOT NULL
);
CREATE INDEX provider_nonces_expiry ON provider_nonces (expires_at);

-- The checksums of applied Tenants/ files were unsalted SHA-256 over settings with their secrets in
-- clear, so a weak secret could be recovered from a dump. They are keyed now (HMAC under a key
-- derived from the master key), which SQL cannot compute: forget them, and the next apply of each
-- file stores the keyed checksum (an unchanged file changes nothing else).
UPDATE apps SET source_checksum = NULL;
