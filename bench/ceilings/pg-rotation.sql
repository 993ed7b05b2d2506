-- pgbench script: one refresh-token rotation as Gatehouse's rotateRefreshToken does it
-- (Sources/GatehouseSQL/Sessions/SQLSessions.swift, the .rotated path): the SELECT of the presented token
-- with its session, the UPDATE that claims it, the INSERT of the successor, the UPDATE of the
-- session, in one read-committed transaction. Run with -M extended (parameters bound like
-- libpq's PQexecParams, as the server does) and -D app=<app id> -D n=0.
-- Client c owns session bench_ses_<c>; its token number n has hash sha256('bench-<c>-<n>'), so
-- each client walks its own chain and every claim must hit exactly one row.
\set next :n + 1
BEGIN;
SELECT refresh_tokens.rotated_at AS token_rotated_at, sessions.*
    FROM refresh_tokens JOIN sessions ON sessions.id = refresh_tokens.session_id
    WHERE refresh_tokens.token_hash = encode(sha256(convert_to('bench-' || :client_id::text || '-' || :n::text, 'UTF8')), 'hex')
      AND refresh_tokens.app_id = :app::text AND sessions.app_id = :app::text;
UPDATE refresh_tokens SET rotated_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint
    WHERE token_hash = encode(sha256(convert_to('bench-' || :client_id::text || '-' || :n::text, 'UTF8')), 'hex')
      AND app_id = :app::text AND rotated_at IS NULL;
INSERT INTO refresh_tokens (token_hash, app_id, session_id, created_at)
    VALUES (encode(sha256(convert_to('bench-' || :client_id::text || '-' || :next::text, 'UTF8')), 'hex'), :app::text,
            'bench_ses_' || :client_id::text, (extract(epoch FROM clock_timestamp()) * 1000)::bigint);
UPDATE sessions SET last_used_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint, ip = '127.0.0.1', user_agent = 'pgbench'
    WHERE app_id = :app::text AND id = 'bench_ses_' || :client_id::text;
COMMIT;
\set n :next
