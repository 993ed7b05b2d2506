-- Bans (API.md, "Bans"): a banned user's sessions end and every sign-in answers 403
-- auth/user-disabled; a suspension (suspended_until) ends by itself.
ALTER TABLE users ADD COLUMN ban_sanction_code TEXT;
ALTER TABLE users ADD COLUMN ban_reason TEXT;
ALTER TABLE users ADD COLUMN ban_suspended_until BIGINT;
