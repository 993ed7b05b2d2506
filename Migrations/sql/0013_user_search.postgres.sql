-- Substring search of an app's users (GET /v1/admin/users?query=, docs/adr/0010-user-search-index.md):
-- GIN trigram indexes (pg_trgm) on the lowercased email, first and last name. The store's query
-- is the scan's own `lower(column) LIKE '%…%'`, which these indexes answer; the planner chooses
-- between them and the newest-first walk of users_app (queries under 3 characters have no
-- trigram, and a substring most users share is found sooner by the walk).
--
-- pg_trgm is a trusted extension (PostgreSQL 13+): the database's owner may create it. It goes
-- into schema public, not the first schema of the search_path, so that dropping an app schema
-- never drops it; where it exists already, in whatever schema, it is used from there.
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
    EXECUTE format('CREATE INDEX IF NOT EXISTS users_search_email ON users USING gin (lower(email) %I.gin_trgm_ops)', trgm_schema);
    EXECUTE format('CREATE INDEX IF NOT EXISTS users_search_first_name ON users USING gin (lower(first_name) %I.gin_trgm_ops)', trgm_schema);
    EXECUTE format('CREATE INDEX IF NOT EXISTS users_search_last_name ON users USING gin (lower(last_name) %I.gin_trgm_ops)', trgm_schema);
END
$$;
