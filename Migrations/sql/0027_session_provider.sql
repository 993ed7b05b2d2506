-- A session opened through a provider the app defines (method `external`) names that provider's
-- id, as a Google session says `google`: the sessions list shows it (API.md "More providers").
ALTER TABLE sessions ADD COLUMN provider TEXT;
