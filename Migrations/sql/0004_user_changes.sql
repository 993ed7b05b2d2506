-- When a user's account (profile, sign-in time, password, identities) last changed, so that every
-- node can poll for the accounts it must drop from its cache (AccountCache). Internal: not the
-- `updated_at` of the API, which only profile changes move.

ALTER TABLE users ADD COLUMN changed_at BIGINT NOT NULL DEFAULT 0;
CREATE INDEX users_changed ON users (changed_at);
