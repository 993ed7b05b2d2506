-- The admin's user search (GET /v1/admin/users?query=) matches the display name too. The trigram
-- index of migration 0013 is contentless, so a column cannot be added to it: it is made again with
-- the display name as a fourth column, filled from users, and its triggers follow the new column.
-- user_search_rows (the index's own row numbers) stays as it is.
DROP TRIGGER users_search_insert;
DROP TRIGGER users_search_update;
DROP TRIGGER users_search_delete;
DROP TABLE user_search;

CREATE VIRTUAL TABLE user_search USING fts5(email, first_name, last_name, display_name, content = '', tokenize = 'trigram');

INSERT INTO user_search (rowid, email, first_name, last_name, display_name)
    SELECT user_search_rows.row, users.email, users.first_name, users.last_name, users.display_name
    FROM user_search_rows JOIN users ON users.id = user_search_rows.user_id;

CREATE TRIGGER users_search_insert AFTER INSERT ON users BEGIN
    INSERT INTO user_search_rows (user_id) VALUES (new.id);
    INSERT INTO user_search (rowid, email, first_name, last_name, display_name)
        SELECT row, new.email, new.first_name, new.last_name, new.display_name FROM user_search_rows WHERE user_id = new.id;
END;

-- A contentless index forgets a row only when told its old text exactly ('delete'). Columns may
-- become NULL (a deleted account's tombstone): NULL is indexed as no text, and deleted as such.
CREATE TRIGGER users_search_update AFTER UPDATE OF email, first_name, last_name, display_name ON users
WHEN old.email IS NOT new.email OR old.first_name IS NOT new.first_name OR old.last_name IS NOT new.last_name
    OR old.display_name IS NOT new.display_name
BEGIN
    INSERT INTO user_search (user_search, rowid, email, first_name, last_name, display_name)
        SELECT 'delete', row, old.email, old.first_name, old.last_name, old.display_name FROM user_search_rows WHERE user_id = old.id;
    INSERT INTO user_search (rowid, email, first_name, last_name, display_name)
        SELECT row, new.email, new.first_name, new.last_name, new.display_name FROM user_search_rows WHERE user_id = new.id;
END;

CREATE TRIGGER users_search_delete AFTER DELETE ON users BEGIN
    INSERT INTO user_search (user_search, rowid, email, first_name, last_name, display_name)
        SELECT 'delete', row, old.email, old.first_name, old.last_name, old.display_name FROM user_search_rows WHERE user_id = old.id;
    DELETE FROM user_search_rows WHERE user_id = old.id;
END;
