-- Dead letters kept to be retried (API.md, "Apple, to the end"): a dead item keeps its sealed
-- payload 30 days (the maintenance job erases it then), and a tenant admin or the platform
-- operator lists dead items and queues one again (`GET /v1/admin/outbox?state=dead`,
-- `POST /v1/admin/outbox/{id}/retry`, `gatehouse outbox list|retry`).
-- When an item was last queued again by hand: its give-up window counts from then, not from its
-- creation. NULL: never retried.
ALTER TABLE outbox ADD COLUMN retried_at BIGINT;
-- Dead items, newest first: the platform's list and the maintenance job (by dead_at) ...
CREATE INDEX IF NOT EXISTS outbox_dead ON outbox (dead_at, id) WHERE dead_at IS NOT NULL;
-- ... and one app's list.
CREATE INDEX IF NOT EXISTS outbox_dead_app ON outbox (app_id, dead_at, id) WHERE dead_at IS NOT NULL;
-- The payloads the maintenance job has still to erase (dead, sealed, not erased yet): an erased
-- one leaves the index, so a round never walks the dead items it erased before.
CREATE INDEX IF NOT EXISTS outbox_dead_sealed ON outbox (dead_at) WHERE dead_at IS NOT NULL AND sealed = 1 AND payload <> '';
