-- Anonymous users (API.md, "Moving users in and out", 2026-12-05). `POST /v1/auth/anonymous`
-- makes an account with no sign-in method: is_anonymous = 1 until a password, a confirmed email
-- or a provider is linked to it (the same row: the user id stays), then 0 for good.
-- last_seen_at is kept for anonymous accounts only: set at the anonymous sign-in, moved by a
-- refresh (at most once an hour), NULL once upgraded. The maintenance of each app erases the
-- anonymous accounts not seen for its `anonymous_ttl_days`, oldest first, from the index below
-- (its condition written as the queries write it, so SQLite uses it too).
ALTER TABLE users ADD COLUMN is_anonymous INTEGER NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN last_seen_at BIGINT;
CREATE INDEX users_anonymous_seen ON users (app_id, last_seen_at) WHERE is_anonymous = 1 AND deleted_at IS NULL;
