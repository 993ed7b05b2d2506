-- Apple's server-to-server notifications (API.md, "Apple, to the end"; docs/sign-in-with-apple.md).

-- Each notification is acted on once: a repeat of (app, sub, type, event_time) changes nothing.
-- The subject is kept as its SHA-256 (hex), so an erased account's Apple id does not stay here;
-- the maintenance job drops rows 30 days after they came.
CREATE TABLE apple_notifications (
    app_id         TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    subject_digest TEXT NOT NULL,
    type           TEXT NOT NULL,
    event_time     BIGINT NOT NULL,
    received_at    BIGINT NOT NULL,
    PRIMARY KEY (app_id, subject_digest, type, event_time)
);
CREATE INDEX apple_notifications_received ON apple_notifications (received_at);

-- Whether Apple's private relay forwards mail from an address (lowercased) to its user, as the
-- latest `email-disabled` / `email-enabled` (by `event_time`) said. The mail outbox does not send
-- to an address whose `forwarding` is 0. Erased with the account.
CREATE TABLE apple_relay_forwarding (
    app_id      TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    address     TEXT NOT NULL,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    forwarding  INTEGER NOT NULL,
    event_time  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (app_id, address)
);
CREATE INDEX apple_relay_forwarding_user ON apple_relay_forwarding (app_id, user_id);

-- Apple identities unlinked by `consent-revoked`: the same Apple account signing in again links
-- to the same account anew (and the row goes). Erased with the account.
CREATE TABLE apple_revoked_identities (
    app_id     TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    subject    TEXT NOT NULL,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    revoked_at BIGINT NOT NULL,
    PRIMARY KEY (app_id, subject)
);
CREATE INDEX apple_revoked_identities_user ON apple_revoked_identities (app_id, user_id);
