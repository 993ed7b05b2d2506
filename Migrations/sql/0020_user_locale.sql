-- Mail in the user's language (API.md, 2026-12-05): a user's `locale`, a BCP 47 language tag in
-- its conventional case (`ja`, `ko-KR`, `zh-Hant-TW`, at most 35 characters), set at sign-up or
-- with `PATCH /v1/me`. NULL: the user chose none, and their mail follows the app's `email.locale`,
-- else the request's Accept-Language, else English.
ALTER TABLE users ADD COLUMN locale TEXT;
