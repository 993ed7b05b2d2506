#!/usr/bin/env python3
"""Admin user search at a million users (bench/README.md, "User search"): SQLite and PostgreSQL.

Loads BENCH_SEARCH_USERS (1,000,000) users into one app and a tenth as many into another,
straight into `users` (no argon2id: the search never reads a hash), builds the search index by
applying migration 0013 to the loaded table, then times the statements
`users(matching:after:limit:)` runs (Sources/GatehouseSQL/Users/SQLUsers.swift, copied here: keep in
step) against the scan the store ran before migration 0013, measured in the same run:

- SQLite: the store's path (the FTS5 candidates, then their users, or the newest-first walk),
  against the old statement (LIKE over the app's users), both through Python's sqlite3 on the
  same libsqlite3 the server links;
- PostgreSQL: the store's statement (the scan's own text) with the trigram indexes, against the
  same statement in a transaction that dropped them (rolled back), through psql; durable
  (fsync and synchronous_commit on, as bench/run).

Usage: bench/search.py [sqlite] [postgres]   (both by default)
"""
import os, random, shutil, sqlite3, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIGRATIONS = os.path.join(ROOT, "Migrations", "sql")
USERS = int(os.environ.get("BENCH_SEARCH_USERS", "1000000"))
OTHER = USERS // 10
RUNS = int(os.environ.get("BENCH_SEARCH_RUNS", "15"))
LIMIT = 51  # the API's default page (50) plus one: the store is asked for one more than a page
CANDIDATE_LIMIT = 2000  # SQLAppScopedStore.searchIndexCandidateLimit
APP, OTHER_APP = "app_benchsearch000000000000000", "app_benchother0000000000000000"
BASE32 = "abcdefghijklmnopqrstuvwxyz234567"
FIRST = ["olivia", "liam", "emma", "noah", "amelia", "oliver", "ava", "elijah", "sophia", "lucas", "mia", "levi",
         "isabella", "mateo", "evelyn", "ezra", "harper", "asher", "luna", "james", "camila", "leo", "gianna",
         "jack", "elizabeth", "luca", "eleanor", "henry", "ella", "hudson", "abigail", "grayson", "sofia", "ethan",
         "avery", "daniel", "scarlett", "michael", "emily", "sebastian", "aria", "mason", "penelope", "wyatt",
         "chloe", "jayden", "layla", "owen", "mila", "benjamin"] * 2
LAST = ["smith", "johnson", "williams", "brown", "jones", "garcia", "miller", "davis", "rodriguez", "martinez",
        "hernandez", "lopez", "gonzalez", "wilson", "anderson", "thomas", "taylor", "moore", "jackson", "martin",
        "lee", "perez", "thompson", "white", "harris", "sanchez", "clark", "ramirez", "lewis", "robinson",
        "walker", "young", "allen", "king", "wright", "scott", "torres", "nguyen", "hill", "flores", "green",
        "adams", "nelson", "baker", "hall", "rivera", "campbell", "mitchell", "carter", "roberts"] * 2


def log(*a):
    print("search:", *a, file=sys.stderr, flush=True)


def generate(path):
    """CSV of the users: app, id, email, first, last, created_at (newest last). Deterministic."""
    rnd = random.Random(12)
    start = 1_700_000_000_000
    with open(path, "w") as f:
        for app, count in ((APP, USERS), (OTHER_APP, OTHER)):
            for n in range(count):
                first, last = rnd.choice(FIRST), rnd.choice(LAST)
                tag = "".join(rnd.choice(BASE32) for _ in range(8))
                # Half at one big provider, the rest over 500 small domains.
                domain = "mail.example" if rnd.random() < 0.5 else f"d{rnd.randrange(500)}.example"
                uid = "usr_" + "".join(rnd.choice(BASE32) for _ in range(24))
                f.write(f"{app},{uid},{first}.{last}.{tag}@{domain},{first.title()},{last.title()},{start + n * 1000}\n")


def migration_files(dialect):
    """(version, file) of every migration for `dialect`: the override where there is one."""
    chosen = {}
    for name in sorted(os.listdir(MIGRATIONS)):
        if not name.endswith(".sql"):
            continue
        version = int(name.split("_", 1)[0])
        parts = name[:-4].rsplit(".", 1)
        if len(parts) == 2 and parts[1] in ("sqlite", "postgres"):
            if parts[1] == dialect:
                chosen[version] = name
        else:
            chosen.setdefault(version, name)
    return sorted(chosen.items())


def like(query):
    q = query.lower()
    return "%" + q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


CONTAINING = ("(lower(users.email) LIKE {p} ESCAPE '\\' OR lower(users.first_name) LIKE {p} ESCAPE '\\' "
              "OR lower(users.last_name) LIKE {p} ESCAPE '\\')")
KEYSET = "(users.created_at < {t} OR (users.created_at = {t} AND users.id < {i}))"
ORDER = " ORDER BY users.created_at DESC, users.id DESC LIMIT " + str(LIMIT)


def cases(sample):
    """(label, query, is_id, page) with the app's data in `sample` (a row of the CSV)."""
    tag = sample[2].split(".")[2].split("@")[0]
    return [
        ("rare substring (a 5-character piece of one user's email)", tag[1:6], False, 1),
        ("uncommon substring (one small domain, ~0.1 %)", "@d42.ex", False, 1),
        ("uncommon substring, page 2 (cursor)", "@d42.ex", False, 2),
        ("common substring (a first name, ~1 %)", "sophia", False, 1),
        ("very common substring (half the users)", "mail.ex", False, 1),
        ("very common substring, page 2 (cursor)", "mail.ex", False, 2),
        ("2-character query", tag[2:4], False, 1),
        ("2-character query nobody matches (the worst case: every user read)", "#!", False, 1),
        ("exact user id", sample[1], True, 1),
    ]


def stats(times):
    times = sorted(times)
    p95 = times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]
    return statistics.median(times), p95


# ---------------------------------------------------------------------------------------------
# SQLite


def bench_sqlite(csv_path, results):
    folder = tempfile.mkdtemp(prefix="gatehouse-search-")
    try:
        db = sqlite3.connect(os.path.join(folder, "gatehouse.db"), isolation_level=None)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA foreign_keys = ON")
        db.execute("PRAGMA synchronous = NORMAL")  # as the server's connections
        files = migration_files("sqlite")
        for version, name in files:
            if version == 13:
                break
            db.executescript(open(os.path.join(MIGRATIONS, name)).read())
        for app in (APP, OTHER_APP):
            db.execute("INSERT INTO apps (id, app_key, settings, version, source, created_at, updated_at) VALUES (?, ?, '{}', 1, 'admin', 0, 0)", (app, "key_" + app))
        t0 = time.time()
        db.execute("BEGIN")
        with open(csv_path) as f:
            batch = []
            for line in f:
                app, uid, email, first, last, created = line.rstrip("\n").split(",")
                batch.append((uid, app, email, first, last, int(created), int(created)))
                if len(batch) == 10000:
                    db.executemany("INSERT INTO users (id, app_id, email, first_name, last_name, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)", batch)
                    batch = []
            if batch:
                db.executemany("INSERT INTO users (id, app_id, email, first_name, last_name, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)", batch)
        db.execute("COMMIT")
        load = time.time() - t0
        t0 = time.time()
        name = dict(files)[13]
        db.executescript(open(os.path.join(MIGRATIONS, name)).read())
        index = time.time() - t0
        size = os.path.getsize(os.path.join(folder, "gatehouse.db"))
        log(f"sqlite: loaded {USERS + OTHER} users in {load:.0f} s, migration 0013 (backfill) {index:.0f} s, file {size / 2**20:.0f} MiB")
        results["sqlite:load"] = f"{load:.0f} s to load {USERS + OTHER:,} users, {index:.0f} s to apply migration 0013 to them, {size / 2**20:.0f} MiB database file"

        sample = db.execute("SELECT app_id, id, email FROM users WHERE app_id = ? ORDER BY created_at DESC LIMIT 1 OFFSET ?", (APP, USERS // 8)).fetchone()

        def statement(query, is_id, after, indexed):
            """The store's statements: (sql, params) to run in order; the last one's rows are the page."""
            where = ["users.app_id = ?"]
            params = [APP]
            if after:
                where.append(KEYSET.format(t="?", i="?"))
                params += [after[0], after[0], after[1]]
            if is_id:
                where.append("users.id = ?")
                params.append(query)
                return "SELECT users.* FROM users WHERE " + " AND ".join(where) + ORDER, params, False
            where.append(CONTAINING.format(p="?1000"))
            substring = query.lower()
            use_index = False
            if indexed and len(substring) >= 3:
                phrase = '"' + substring.replace('"', '""') + '"'
                candidates = [r[0] for r in db.execute("SELECT rowid FROM user_search WHERE user_search MATCH ? LIMIT ?", (phrase, CANDIDATE_LIMIT))]
                use_index = len(candidates) < CANDIDATE_LIMIT
            source = "users"
            if use_index:
                if not candidates:
                    return None, None, True
                source = "user_search_rows CROSS JOIN users ON users.id = user_search_rows.user_id"
                where.append("user_search_rows.row IN (SELECT value FROM json_each(?1001))")
            sql = "SELECT users.* FROM " + source + " WHERE " + " AND ".join(where) + ORDER
            # Numbered parameters for the pattern and the candidates: rebuild as positional.
            sql = sql.replace("?1000", "?").replace("?1001", "?")
            params = params + [like(query)] * 3 + (["[" + ",".join(map(str, candidates)) + "]"] if use_index else [])
            return sql, params, use_index

        created = [r[1] for r in db.execute("PRAGMA table_info(users)")].index("created_at")

        def page_rows(query, is_id, after, indexed):
            sql, params, used = statement(query, is_id, after, indexed)
            return (db.execute(sql, params).fetchall() if sql else []), used

        def cursor_for(query, is_id, page):
            """The cursor the API gives after `page - 1` pages: the 50th user of the last one."""
            after = None
            for _ in range(page - 1):
                rows, _ = page_rows(query, is_id, after, True)
                if len(rows) < LIMIT:
                    return None
                after = (rows[LIMIT - 2][created], rows[LIMIT - 2][0])
            return after

        for label, query, is_id, page in cases(sample):
            after = cursor_for(query, is_id, page)
            timings = {}
            answers = {}
            for indexed in (True, False):
                page_rows(query, is_id, after, indexed)  # warm
                times = []
                for _ in range(RUNS if indexed else max(5, RUNS // 3)):
                    t = time.perf_counter()
                    rows, used = page_rows(query, is_id, after, indexed)
                    times.append(1000 * (time.perf_counter() - t))
                timings[indexed] = stats(times)
                answers[indexed] = ([r[0] for r in rows], used)
            same = answers[True][0] == answers[False][0]
            path = "trigram table" if answers[True][1] else ("id" if is_id else "walk")
            results.setdefault("sqlite", []).append((label, query, len(answers[True][0]), path, timings[True], timings[False], same))
            log(f"sqlite: {label}: {timings[True][0]:.2f} ms ({path}) vs scan {timings[False][0]:.2f} ms, same={same}")
        db.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# PostgreSQL


def psql(url, script, capture=True):
    out = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", url], input=script, text=True,
                         capture_output=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    return out.stdout


def bench_postgres(csv_path, results):
    base = subprocess.run([os.path.join(ROOT, "scripts", "postgres-test-server")], capture_output=True, text=True, check=True).stdout.strip()
    name = f"gh_bench_search_{int(time.time())}_{os.getpid()}"
    psql(base, "ALTER SYSTEM SET fsync = on; ALTER SYSTEM SET synchronous_commit = on; SELECT pg_reload_conf();")
    psql(base, f"CREATE DATABASE {name}")
    url = base.rsplit("/", 1)[0] + "/" + name
    try:
        files = migration_files("postgres")
        for version, fname in files:
            if version == 13:
                break
            psql(url, "BEGIN;\n" + open(os.path.join(MIGRATIONS, fname)).read() + "\nCOMMIT;")
        psql(url, "".join(f"INSERT INTO apps (id, app_key, settings, version, source, created_at, updated_at) VALUES ('{a}', 'key_{a}', '{{}}', 1, 'admin', 0, 0);" for a in (APP, OTHER_APP)))
        t0 = time.time()
        psql(url, "CREATE TEMP TABLE load (app_id text, id text, email text, first_name text, last_name text, created_at bigint);\n"
                  f"\\copy load FROM '{csv_path}' WITH (FORMAT csv)\n"
                  "INSERT INTO users (id, app_id, email, first_name, last_name, created_at, updated_at) "
                  "SELECT id, app_id, email, first_name, last_name, created_at, created_at FROM load;")
        load = time.time() - t0
        t0 = time.time()
        psql(url, "BEGIN;\n" + open(os.path.join(MIGRATIONS, dict(files)[13])).read() + "\nCOMMIT;")
        index = time.time() - t0
        psql(url, "VACUUM ANALYZE users;")
        size = psql(url, "\\pset tuples_only on\nSELECT pg_size_pretty(sum(pg_relation_size(indexrelid))) FROM pg_index WHERE indexrelid::regclass::text LIKE 'users_search%';").strip()
        log(f"postgres: loaded in {load:.0f} s, migration 0013 (three GIN indexes) {index:.0f} s, indexes {size}")
        results["postgres:load"] = f"{load:.0f} s to load {USERS + OTHER:,} users (COPY), {index:.0f} s to apply migration 0013 to them (trigram indexes {size}), then VACUUM ANALYZE"
        sample = psql(url, f"\\pset tuples_only on\n\\pset format unaligned\n\\pset fieldsep ,\nSELECT app_id, id, email FROM users WHERE app_id = '{APP}' ORDER BY created_at DESC LIMIT 1 OFFSET {USERS // 8};").strip().split(",")

        def statement(query, is_id, after):
            where = [f"users.app_id = '{APP}'"]
            if after:
                where.append(KEYSET.format(t=after[0], i=f"'{after[1]}'"))
            if is_id:
                where.append(f"users.id = '{query}'")
            else:
                where.append(CONTAINING.format(p="'" + like(query).replace("'", "''") + "'"))
            return "SELECT users.* FROM users WHERE " + " AND ".join(where) + ORDER

        def cursor_for(query, is_id, page):
            after = None
            for _ in range(page - 1):
                rows = psql(url, "\\pset tuples_only on\n\\pset format unaligned\n\\pset fieldsep ,\n"
                                 + statement(query, is_id, after).replace("SELECT users.*", "SELECT users.created_at, users.id") + ";").strip().splitlines()
                if len(rows) < LIMIT - 1:
                    return None
                created, uid = rows[LIMIT - 2].split(",")
                after = (created, uid)
            return after

        for label, query, is_id, page in cases(sample):
            after = cursor_for(query, is_id, page)
            sql = statement(query, is_id, after)
            timings, answers, plans = {}, {}, {}
            for indexed in (True, False):
                runs = RUNS if indexed else max(5, RUNS // 3)
                drop = "" if indexed else "DROP INDEX users_search_email, users_search_first_name, users_search_last_name;\n"
                script = ("BEGIN;\n" + drop + "\\o /dev/null\n" + (sql + ";\n") * 2 + "\\timing on\n" + (sql + ";\n") * runs
                          + "\\timing off\n\\o\n\\pset tuples_only on\n\\pset format unaligned\n"
                          + sql.replace("SELECT users.*", "SELECT users.id") + ";\n"
                          + "EXPLAIN (COSTS OFF) " + sql + ";\nROLLBACK;\n")
                out = psql(url, script)
                times = [float(l.split()[1]) for l in out.splitlines() if l.startswith("Time: ")]
                rest = [l for l in out.splitlines() if not l.startswith("Time: ")]
                ids = [l for l in rest if l.startswith("usr_")]
                plans[indexed] = "bitmap (trigram)" if any("users_search" in l for l in rest) else ("index" if any("Index" in l for l in rest) else "seq scan")
                timings[indexed] = stats(times)
                answers[indexed] = ids
            same = answers[True] == answers[False]
            results.setdefault("postgres", []).append((label, query, len(answers[True]), plans[True], timings[True], timings[False], same))
            log(f"postgres: {label}: {timings[True][0]:.2f} ms ({plans[True]}) vs scan {timings[False][0]:.2f} ms ({plans[False]}), same={same}")
    finally:
        psql(base, f"DROP DATABASE IF EXISTS {name}")
        psql(base, "ALTER SYSTEM RESET fsync; ALTER SYSTEM RESET synchronous_commit; SELECT pg_reload_conf();")


def main():
    databases = sys.argv[1:] or ["sqlite", "postgres"]
    folder = tempfile.mkdtemp(prefix="gatehouse-search-data-")
    os.chmod(folder, 0o755)
    csv_path = os.path.join(folder, "users.csv")
    results = {}
    try:
        t0 = time.time()
        generate(csv_path)
        os.chmod(csv_path, 0o644)
        log(f"generated {USERS + OTHER:,} users in {time.time() - t0:.0f} s")
        for db in databases:
            (bench_sqlite if db == "sqlite" else bench_postgres)(csv_path, results)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"# User search, {USERS:,} users in one app and {OTHER:,} in another\n")
    print(f"Medians and p95 over {RUNS} runs (the scan: {max(5, RUNS // 3)}), ms per page of {LIMIT - 1}, after a warm-up; "
          "page 2 times the second page's statements alone, with the cursor of the first.\n")
    for db in databases:
        if db not in results:
            continue
        print(f"## {db}\n\n{results[db + ':load']}\n")
        print("| query | text | rows | path | indexed p50 / p95 | scan p50 / p95 | scan / indexed | same rows |")
        print("|---|---|---:|---|---:|---:|---:|---|")
        for label, query, rows, path, new, old, same in results[db]:
            print(f"| {label} | `{query}` | {rows} | {path} | {new[0]:.2f} / {new[1]:.2f} | {old[0]:.2f} / {old[1]:.2f} | {old[0] / new[0]:.1f}× | {'yes' if same else '**NO**'} |")
        print()


if __name__ == "__main__":
    main()
