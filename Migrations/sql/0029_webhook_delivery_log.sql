-- What an admin's list of webhook deliveries shows (`GET /v1/admin/webhooks/deliveries`) once
-- the sealed payload is erased (at delivery): the event type and the endpoint's URL (both
-- already in clear in the app's settings; never the secret), and the HTTP status of the last
-- attempt that got an answer. NULL for other kinds, and for items queued before this migration.
ALTER TABLE outbox ADD COLUMN event_type TEXT;
ALTER TABLE outbox ADD COLUMN target_url TEXT;
ALTER TABLE outbox ADD COLUMN last_status INTEGER;
-- The app's webhook deliveries, newest first, a page at a time.
CREATE INDEX outbox_app_kind_created ON outbox (app_id, kind, created_at, id);
