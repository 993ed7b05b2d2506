-- When a session ended by the database's clock (ms since 1970), set by the statement that ends it.
-- Every node polls this column, against the database's clock too, for the sessions other nodes
-- ended (RevocationList): `ended_at` comes from the ending node's clock, and a node whose clock
-- lags could otherwise end a session that the others never see ended.

-- Nodes of the previous version, still running during an upgrade, end sessions without it: the
-- poll also reads those by `ended_at` (index sessions_ended), as they did.

ALTER TABLE sessions ADD COLUMN ended_db_at BIGINT;
UPDATE sessions SET ended_db_at = ended_at WHERE ended_at IS NOT NULL;
CREATE INDEX sessions_ended_db ON sessions (ended_db_at);
