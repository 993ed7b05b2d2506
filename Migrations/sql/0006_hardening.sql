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
-- derived from the master key), which SQL cannot compute. The old one moves aside: the next apply
-- of a Tenants folder compares the file against it once (so admin edits to an app whose file did
-- not change survive the upgrade), stores the keyed checksum and drops every old one.
ALTER TABLE apps ADD COLUMN legacy_source_checksum TEXT;
UPDATE apps SET legacy_source_checksum = source_checksum, source_checksum = NULL WHERE source_checksum IS NOT NULL;
