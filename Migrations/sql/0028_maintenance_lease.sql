-- The maintenance round's turn on PostgreSQL (ADR 0034): one row, held by the round under way
-- until it gives it back or its lease (in milliseconds since the epoch, by the database's clock)
-- runs out. It replaces a session-level advisory lock, which a transaction pooler (PgBouncer in
-- transaction mode) would take on one server connection and release on another. SQLite does
-- not use it: one process owns the file.
CREATE TABLE maintenance_lease (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
