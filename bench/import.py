#!/usr/bin/env python3
"""The user import's rate and memory (bench/README.md, "Import"), through the release executable:
`gatehouse users import FILE --app APP` (the same domain code as POST /v1/admin/users/import, a
batch of 500 lines a transaction) on a file of generated lines, 10,000 and then 100,000, into a
fresh app. Prints a Markdown section: users/s against the ceiling of 2,000 users/s, and the peak
RSS of each run (it must not grow with the file).

    bench/import.py BINARY DATABASE_URL LABEL [LINES…]

DATABASE_URL is what GATEHOUSE_DATABASE_URL takes (sqlite:///path or postgres://…). The lines mix,
in turn: a bcrypt string, a firebase_scrypt hash (the app's firebase.hash_config), an argon2id PHC
string, and no password with a Google identity. Hashes are random bytes of the right shape: an
import stores them as they are and verifies them at the first sign-in, not here.
"""

import base64
import json
import os
import resource
import secrets
import subprocess
import sys
import tempfile
import time

CEILING = 2000  # users/s: the figure for hashes stored as imported
BCRYPT = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def b64(data, pad=True):
    text = base64.b64encode(data).decode()
    return text if pad else text.rstrip("=")


def line(run, index):
    email = f"user{index}.{run}@example.com"
    kind = index % 4
    if kind == 0:
        body = {"email": email, "password_hash": {"algorithm": "bcrypt", "hash": "$2b$10$" + "".join(secrets.choice(BCRYPT) for _ in range(53))}}
    elif kind == 1:
        body = {"email": email, "password_hash": {"algorithm": "firebase_scrypt", "hash": b64(secrets.token_bytes(64)), "salt": b64(secrets.token_bytes(12))}}
    elif kind == 2:
        phc = f"$argon2id$v=19$m=19456,t=2,p=1${b64(secrets.token_bytes(16), False)}${b64(secrets.token_bytes(32), False)}"
        body = {"email": email, "password_hash": {"algorithm": "argon2id", "hash": phc}}
    else:
        body = {"email": email, "email_verified": True, "identities": [{"provider": "google", "subject": f"g{index}{run}"}]}
    body["first_name"] = "Bench"
    body["app_metadata"] = {"plan": "imported", "n": index}
    return json.dumps(body, separators=(",", ":"))


def main():
    binary, url, label = sys.argv[1], sys.argv[2], sys.argv[3]
    sizes = [int(n) for n in sys.argv[4:]] or [10_000, 100_000]
    env = dict(os.environ)
    for name in list(env):
        if name.startswith("GATEHOUSE_"):
            del env[name]
    env.update({"GATEHOUSE_DATABASE_URL": url, "GATEHOUSE_MASTER_KEY": secrets.token_hex(32)})
    scratch = tempfile.mkdtemp(prefix="gatehouse-import-bench.")
    settings = os.path.join(scratch, "app.json")
    with open(settings, "w") as f:
        json.dump({"name": "Import bench", "firebase": {"hash_config": {
            "signer_key": b64(secrets.token_bytes(64)), "salt_separator": "Bw==", "rounds": 8, "mem_cost": 14}}}, f)
    created = json.loads(subprocess.run([binary, "apps", "create", "--settings", settings], env=env, check=True, capture_output=True, text=True).stdout)
    print(f"### {label}\n")
    print("| lines | imported | failed | seconds | users/s | ceiling | peak RSS |")
    print("|---|---|---|---|---|---|---|")
    failures = 0
    for run, size in enumerate(sizes):
        path = os.path.join(scratch, f"users-{size}.ndjson")
        with open(path, "w") as f:
            for index in range(size):
                f.write(line(f"r{run}", index) + "\n")
        # The child's own peak RSS: each run in a process of its own, measured by wait4.
        start = time.monotonic()
        process = subprocess.Popen([binary, "users", "import", path, "--app", created["app_id"]], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        out = process.stdout.read()
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.monotonic() - start
        if status != 0:
            print(f"bench: users import exited {status}", file=sys.stderr)
            sys.exit(1)
        report = json.loads(out)
        rate = report["imported"] / seconds
        verdict = "PASS" if rate >= CEILING and report["imported"] == size else "FAIL"
        failures += verdict == "FAIL"
        print(f"| {size:,} | {report['imported']:,} | {report['failed']} | {seconds:.2f} | {rate:,.0f} | {verdict} (≥ {CEILING:,}) | {usage.ru_maxrss / 1024:.1f} MiB |")
        os.remove(path)
    print()
    os.remove(settings)
    os.rmdir(scratch)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
