-- Files and profile photos (issue 13, ADR 0013). A file's row names its blob; the bytes are in a
-- blob store: the two tables below (GATEHOUSE_BLOB_STORE=database, the default) or a folder.
-- The only difference between the dialects is the type of blob_chunks.data.

-- (app_id, id) is unique already (id is the primary key); this index lets files refer to a user
-- of their own app only: a row of one app can never name another app's user.
CREATE UNIQUE INDEX users_app_id ON users (app_id, id);

CREATE TABLE files (
    app_id       TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    id           TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    name         TEXT NOT NULL,
    content_type TEXT NOT NULL,
    size         BIGINT NOT NULL,
    sha256       TEXT NOT NULL,
    visibility   TEXT NOT NULL,
    purpose      TEXT NOT NULL,
    blob_key     TEXT NOT NULL UNIQUE,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (app_id, id),
    FOREIGN KEY (app_id, user_id) REFERENCES users (app_id, id) ON DELETE CASCADE
);
CREATE INDEX files_user ON files (app_id, user_id, purpose, created_at, id);

-- Blobs in the database: a header row written last in the put's transaction, and the bytes in
-- chunks (256 KiB by default), so that neither a write nor a read holds a whole file in memory.
CREATE TABLE blobs (
    blob_key    TEXT PRIMARY KEY,
    size        BIGINT NOT NULL,
    chunk_bytes BIGINT NOT NULL,
    chunks      BIGINT NOT NULL
);
CREATE TABLE blob_chunks (
    blob_key TEXT NOT NULL,
    seq      BIGINT NOT NULL,
    data     BLOB NOT NULL,
    PRIMARY KEY (blob_key, seq)
);
