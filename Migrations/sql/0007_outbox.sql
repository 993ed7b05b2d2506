-- The outbox (DESIGN.md): side effects that must not be lost (mail now; Apple token revocations
-- and webhooks next), written in the transaction of the change that causes them and delivered by
-- workers on every node, with retries, leases and dead letters.
CREATE TABLE outbox (
    id              TEXT PRIMARY KEY,
    app_id          TEXT REFERENCES apps(id) ON DELETE CASCADE,
    kind            TEXT NOT NULL,
    -- Two items with one key are one item: a producer that runs twice queues once.
    idempotency_key TEXT NOT NULL UNIQUE,
    -- JSON; sealed with the secret sealer when it carries a secret, and then erased once the
    -- item is delivered or dead.
    payload         TEXT NOT NULL,
    sealed          INTEGER NOT NULL DEFAULT 0,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL,
    lease_until     BIGINT,
    leased_by       TEXT,
    last_error      TEXT,
    created_at      BIGINT NOT NULL,
    delivered_at    BIGINT,
    dead_at         BIGINT
);
-- Due items: neither delivered nor dead, by their next attempt.
CREATE INDEX outbox_due ON outbox (next_attempt_at) WHERE delivered_at IS NULL AND dead_at IS NULL;
