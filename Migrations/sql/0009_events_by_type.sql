-- The audit log filtered by type (GET /v1/admin/events?type=), newest first, per app.
CREATE INDEX events_type ON events (app_id, type, created_at);
