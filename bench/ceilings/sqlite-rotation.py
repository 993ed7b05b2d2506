#!/usr/bin/env python3
"""SQLite ceiling for refresh-token rotation.

    sqlite-rotation.py DB_FILE APP_ID SECONDS [PROCESSES]

Runs PROCESSES (default 2) worker processes against DB_FILE (an already migrated Gatehouse
database holding app APP_ID), each in WAL mode with synchronous=FULL, foreign_keys=ON and a
5 s busy timeout like the server's connections, doing the statements of one refresh rotation
(rotateRefreshToken in Sources/GatehouseSQL/Sessions/SQLSessions.swift, the .rotated path: SELECT the
token with its session, UPDATE to claim it, INSERT the successor, UPDATE the session) in
BEGIN IMMEDIATE ... COMMIT transactions, for SECONDS seconds. Each worker walks chains on its
own sessions; every claim must hit exactly one row. Prints "tx_per_s=N transactions=N
seconds=N processes=N misses=N cpu_us_per_tx=N" and exits 1 when a claim missed. cpu_us_per_tx
is the workers' CPU (user + system, fsyncs' kernel work included) over the transactions.
Python's per-statement overhead is included, so the rate is a floor for what SQLite itself can
do and the CPU per transaction a ceiling.
"""
import hashlib
import multiprocessing
import sqlite3
import sys
import time

CHAINS_PER_WORKER = 8


def token_hash(worker, chain, n):
    return hashlib.sha256(f"bench-{worker}-{chain}-{n}".encode()).hexdigest()


def connect(path):
    db = sqlite3.connect(path, isolation_level=None, timeout=5.0)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA foreign_keys = ON")
    db.execute("PRAGMA synchronous = FULL")
    return db


def setup(path, app, workers):
    db = connect(path)
    db.execute("BEGIN IMMEDIATE")
    db.execute("INSERT INTO users (id, app_id, email, created_at, updated_at) VALUES ('bench_usr', ?, 'rotation@example.com', 0, 0)", (app,))
    for w in range(workers):
        for c in range(CHAINS_PER_WORKER):
            sid = f"bench_ses_{w}_{c}"
            db.execute(
                "INSERT INTO sessions (id, app_id, user_id, method, auth_time, created_at, last_used_at, expires_at) "
                "VALUES (?, ?, 'bench_usr', 'password', 0, 0, 0, 9000000000000)", (sid, app))
            db.execute("INSERT INTO refresh_tokens (token_hash, app_id, session_id, created_at) VALUES (?, ?, ?, 0)",
                       (token_hash(w, c, 0), app, sid))
    db.execute("COMMIT")
    db.close()


def worker(path, app, w, seconds, start, results):
    db = connect(path)
    n = [0] * CHAINS_PER_WORKER
    done = misses = 0
    start.wait()
    c0 = time.process_time()
    t0 = time.monotonic()
    deadline = t0 + seconds
    c = 0
    while time.monotonic() < deadline:
        sid = f"bench_ses_{w}_{c}"
        presented, successor = token_hash(w, c, n[c]), token_hash(w, c, n[c] + 1)
        now = time.time_ns() // 1_000_000
        db.execute("BEGIN IMMEDIATE")
        row = db.execute(
            "SELECT refresh_tokens.rotated_at AS token_rotated_at, sessions.* FROM refresh_tokens "
            "JOIN sessions ON sessions.id = refresh_tokens.session_id "
            "WHERE refresh_tokens.token_hash = ? AND refresh_tokens.app_id = ? AND sessions.app_id = ?",
            (presented, app, app)).fetchone()
        claimed = db.execute(
            "UPDATE refresh_tokens SET rotated_at = ? WHERE token_hash = ? AND app_id = ? AND rotated_at IS NULL",
            (now, presented, app)).rowcount
        if row is None or claimed != 1:
            misses += 1
            db.execute("ROLLBACK")
            break
        db.execute("INSERT INTO refresh_tokens (token_hash, app_id, session_id, created_at) VALUES (?, ?, ?, ?)",
                   (successor, app, sid, now))
        db.execute("UPDATE sessions SET last_used_at = ?, ip = ?, user_agent = ? WHERE app_id = ? AND id = ?",
                   (now, "127.0.0.1", "python", app, sid))
        db.execute("COMMIT")
        n[c] += 1
        done += 1
        c = (c + 1) % CHAINS_PER_WORKER
    results.put((done, time.monotonic() - t0, misses, time.process_time() - c0))
    db.close()


def main():
    path, app, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    workers = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    setup(path, app, workers)
    start = multiprocessing.Event()
    results = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=worker, args=(path, app, w, seconds, start, results)) for w in range(workers)]
    for p in procs:
        p.start()
    time.sleep(0.2)
    start.set()
    got = [results.get() for _ in procs]
    for p in procs:
        p.join()
    total = sum(g[0] for g in got)
    elapsed = max(g[1] for g in got)
    misses = sum(g[2] for g in got)
    cpu = sum(g[3] for g in got)
    print(f"tx_per_s={total / elapsed:.0f} transactions={total} seconds={elapsed:.2f} processes={workers} misses={misses} "
          f"cpu_us_per_tx={1e6 * cpu / max(total, 1):.0f}")
    sys.exit(1 if misses else 0)


if __name__ == "__main__":
    main()
