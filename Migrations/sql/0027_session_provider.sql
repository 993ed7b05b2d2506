-- A session opened through a provider the app defines (method `external`) names that provider's
-- id, as a Google session says `google`: the sessions list shows it (API.md "More providers").
ALTER TABLE sessions ADD COLUMN provider TEXT;
-- And a second step after such a sign-in keeps it for the session it opens.
ALTER TABLE mfa_challenges ADD COLUMN provider TEXT;
