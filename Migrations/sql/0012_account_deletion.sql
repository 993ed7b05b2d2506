-- Account deletion (API.md, "Deleting the account"). With an app's deletion_grace_days, an
-- account is first pending deletion: deletion_due_at says when the purge job takes it, and a
-- sign-in before then clears both columns (the account is restored).
ALTER TABLE users ADD COLUMN deletion_requested_at BIGINT;
ALTER TABLE users ADD COLUMN deletion_due_at BIGINT;
-- A deleted account leaves a tombstone: its row with every personal column emptied and deleted_at
-- set, its identities, provider tokens and codes gone. The row keeps its ended sessions for as long
-- as an access token lives, so that every node's revocation and account-cache polls still see the
-- end; the purge job deletes it after that.
ALTER TABLE users ADD COLUMN deleted_at BIGINT;
CREATE INDEX users_deletion_due ON users (deletion_due_at) WHERE deletion_due_at IS NOT NULL;
CREATE INDEX users_deleted ON users (deleted_at) WHERE deleted_at IS NOT NULL;
