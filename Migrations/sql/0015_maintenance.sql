-- The maintenance job (issue 14, ADR 0014) deletes, in small batches, every app's rows past their
-- time. Each of its statements finds its rows by time across all apps, so each time column it reads
-- gets an index of its own (the per-app indexes of 0006 and 0008 serve the deletes made per app).
-- Sessions that ended are found by sessions_ended (0002), provider nonces by provider_nonces_expiry
-- (0006), events by events_created (0010).
-- IF NOT EXISTS: an index built beforehand with CREATE INDEX CONCURRENTLY (docs/operations.md) is kept.
CREATE INDEX IF NOT EXISTS sessions_expiry ON sessions (expires_at);
CREATE INDEX IF NOT EXISTS web_flows_expires ON web_flows (expires_at);
CREATE INDEX IF NOT EXISTS login_codes_expires ON login_codes (expires_at);
CREATE INDEX IF NOT EXISTS email_codes_sent ON email_codes (last_sent_at);
CREATE INDEX IF NOT EXISTS rate_limits_window ON rate_limits (window_start);
-- Only delivered items: the due ones have outbox_due (0007).
CREATE INDEX IF NOT EXISTS outbox_delivered ON outbox (delivered_at) WHERE delivered_at IS NOT NULL;
