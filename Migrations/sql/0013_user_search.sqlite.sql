-- Substring search of an app's users (GET /v1/admin/users?query=, docs/adr/0010-user-search-index.md):
-- an FTS5 index of the trigrams of email, first and last name, kept in step with users by the
-- triggers below. The store asks it for queries of 3 characters or more and re-checks every
-- candidate with the same LIKE as the scan, so both paths give the same users.
--
-- Contentless: the text stays in users only. users has no INTEGER PRIMARY KEY, so SQLite does not
-- promise that its rowids survive a VACUUM; the index is keyed by a row number of its own instead.
CREATE TABLE user_search_rows (
    row     INTEGER PRIMARY KEY,
    user_id TEXT NOT NULL UNIQUE
);
CREATE VIRTUAL TABLE user_search USING fts5(email, first_name, last_name, content = '', tokenize = 'trigram');

INSERT INTO user_search_rows (user_id) SELECT id FROM users ORDER BY app_id, created_at, id;
INSERT INTO user_search (rowid, email, first_name, last_name)
    SELECT user_search_rows.row, users.email, users.first_name, users.last_name
    FROM user_search_rows JOIN users ON users.id = user_search_rows.user_id;

CREATE TRIGGER users_search_insert AFTER INSERT ON users BEGIN
    INSERT INTO user_search_rows (user_id) VALUES (new.id);
    INSERT INTO user_search (rowid, email, first_name, last_name)
        SELECT row, new.email, new.first_name, new.last_name FROM user_search_rows WHERE user_id = new.id;
END;

-- A contentless index forgets a row only when told its old text exactly ('delete'). Columns may
-- become NULL (a deleted account's tombstone): NULL is indexed as no text, and deleted as such.
CREATE TRIGGER users_search_update AFTER UPDATE OF email, first_name, last_name ON users
WHEN old.email IS NOT new.email OR old.first_name IS NOT new.first_name OR old.last_name IS NOT new.last_name
BEGIN
    INSERT INTO user_search (user_search, rowid, email, first_name, last_name)
        SELECT 'delete', row, old.email, old.first_name, old.last_name FROM user_search_rows WHERE user_id = old.id;
    INSERT INTO user_search (rowid, email, first_name, last_name)
        SELECT row, new.email, new.first_name, new.last_name FROM user_search_rows WHERE user_id = new.id;
END;

CREATE TRIGGER users_search_delete AFTER DELETE ON users BEGIN
    INSERT INTO user_search (user_search, rowid, email, first_name, last_name)
        SELECT 'delete', row, old.email, old.first_name, old.last_name FROM user_search_rows WHERE user_id = old.id;
    DELETE FROM user_search_rows WHERE user_id = old.id;
END;
