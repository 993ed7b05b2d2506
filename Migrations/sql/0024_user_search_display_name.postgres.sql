-- The admin's user search (GET /v1/admin/users?query=) matches the display name too: a trigram
-- index on lower(display_name), beside those of migration 0013 on the email and names, in the
-- schema pg_trgm lives in (made there by 0013).
DO $$
DECLARE
    trgm_schema text;
BEGIN
    SELECT n.nspname INTO trgm_schema
    FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'pg_trgm';
    IF trgm_schema IS NULL THEN
        CREATE EXTENSION pg_trgm SCHEMA public;
        trgm_schema := 'public';
    END IF;
    EXECUTE format('CREATE INDEX IF NOT EXISTS users_search_display_name ON users USING gin (lower(display_name) %I.gin_trgm_ops)', trgm_schema);
END
$$;
