-- Scratch data for pg-rotation.sql: one user and one session with its first refresh token
-- (number 0) per pgbench client. psql -v app=<app id> -v clients=<n>.
INSERT INTO users (id, app_id, email, created_at, updated_at)
    VALUES ('bench_usr', :'app', 'rotation@example.com', 0, 0);
INSERT INTO sessions (id, app_id, user_id, method, auth_time, created_at, last_used_at, expires_at)
    SELECT 'bench_ses_' || c, :'app', 'bench_usr', 'password', 0, 0, 0, 9000000000000
    FROM generate_series(0, :clients - 1) AS c;
INSERT INTO refresh_tokens (token_hash, app_id, session_id, created_at)
    SELECT encode(sha256(convert_to('bench-' || c || '-0', 'UTF8')), 'hex'), :'app', 'bench_ses_' || c, 0
    FROM generate_series(0, :clients - 1) AS c;
