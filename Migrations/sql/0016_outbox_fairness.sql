-- A fair outbox (API.md, "Tenants share one server safely"): items know where they go, so that a
-- destination that keeps failing is paused without pausing anything else, and claims are made
-- one app after another.

-- host:port of the item's destination (a webhook's URL, an SMTP server, Apple), once known: set
-- when it is queued, or by the first delivery that resolves it.
ALTER TABLE outbox ADD COLUMN destination TEXT;

-- The circuit breaker of each app's destinations, shared by every node: `failures` deliveries in
-- a row failed or timed out; from the fifth on, the destination is paused until `paused_until`
-- (back-off doubling with each further failure) and the app's items for it are not claimed. Keyed
-- by app as well: a tenant cannot pause another tenant's deliveries by failing on purpose at the
-- same host. A success removes the row. `app_id` is '' for an item of no app.
CREATE TABLE outbox_destinations (
    app_id       TEXT NOT NULL,
    destination  TEXT NOT NULL,
    failures     INTEGER NOT NULL,
    paused_until BIGINT,
    updated_at   BIGINT NOT NULL,
    PRIMARY KEY (app_id, destination)
);
-- The maintenance job removes rows no failure has touched for 30 days.
CREATE INDEX outbox_destinations_updated ON outbox_destinations (updated_at);

-- Claims walk the due items of one kind app by app (round robin), oldest first within an app.
CREATE INDEX outbox_fair_claim ON outbox (kind, app_id, next_attempt_at) WHERE delivered_at IS NULL AND dead_at IS NULL;
