-- Custom data on the user (API.md, "Moving users in and out", 2026-12-05). `app_metadata`: a JSON
-- object only the app's admin sets (`PATCH /v1/admin/users/{id}`), carried in the access token as
-- claim `app_metadata`; `user_metadata`: a JSON object the user sets (`PATCH /v1/me`), in the user
-- object and never in a token. Each is stored as its JSON text (at most 4 KiB serialized, checked by
-- the server), `{}` when empty, and read only whole. `display_name`: at most 100 characters, the
-- name rule; NULL: none.
ALTER TABLE users ADD COLUMN app_metadata TEXT NOT NULL DEFAULT '{}';
ALTER TABLE users ADD COLUMN user_metadata TEXT NOT NULL DEFAULT '{}';
ALTER TABLE users ADD COLUMN display_name TEXT;
