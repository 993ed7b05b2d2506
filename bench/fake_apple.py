#!/usr/bin/python3
"""A fake Apple for bench/run: the keys Gatehouse fetches, and identity tokens signed with them.

    /usr/bin/python3 bench/fake_apple.py STATE_DIR AUDIENCE [WARM RUN THREADS]

Generates an RSA-2048 key, listens on 127.0.0.1 on a free port and serves
  GET /auth/keys  the public key as a JWKS (kid, RS256, use sig), Cache-Control: max-age=3600
  GET /stats      {"key_fetches": N}: how many times /auth/keys was fetched (for the bench)
Before it listens it writes into STATE_DIR:
  token   one identity token: iss https://appleid.apple.com, aud AUDIENCE, a fixed sub, an email,
          email_verified "true" (Apple sends a string), iat now, exp now + 2 h, nonce = lowercase hex
          SHA-256 of the raw nonce, header kid
  nonce   the raw nonce the client sends Gatehouse
  check.json  a request body ({"identity_token", "nonce"}) of another token, for the bench's check
  warm-1.jsonl, run-1.jsonl … run-THREADS.jsonl
          WARM and RUN request bodies, one per line, split among the wrk threads: every token
          carries a nonce of its own, since Gatehouse accepts a token with a nonce once
and, once listening, `port`. Runs until killed (SIGTERM). Needs Debian's python3-jwt and
python3-cryptography (hence /usr/bin/python3).
"""

import hashlib
import http.server
import json
import os
import sys
import threading
import time

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

ISSUER = "https://appleid.apple.com"
SUBJECT = "000123.benchbenchbenchbenchbench.0001"
EMAIL = "apple-bench@privaterelay.appleid.com"
RAW_NONCE = "gatehouse-bench-raw-nonce-0123456789abcdef"
KID = "bench-apple-key-1"
TOKEN_LIFETIME = 2 * 3600


def b64url_uint(n):
    return jwt.utils.base64url_encode(n.to_bytes((n.bit_length() + 7) // 8, "big")).decode()


def write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    state_dir, audience = sys.argv[1], sys.argv[2]
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    numbers = key.public_key().public_numbers()
    jwks = json.dumps({"keys": [{
        "kty": "RSA", "kid": KID, "use": "sig", "alg": "RS256",
        "n": b64url_uint(numbers.n), "e": b64url_uint(numbers.e),
    }]}).encode()

    now = int(time.time())

    def token(raw_nonce):
        return jwt.encode({
            "iss": ISSUER, "aud": audience, "sub": SUBJECT, "email": EMAIL, "email_verified": "true",
            "is_private_email": "true", "iat": now, "exp": now + TOKEN_LIFETIME,
            "nonce": hashlib.sha256(raw_nonce.encode()).hexdigest(), "nonce_supported": True,
            "auth_time": now,
        }, key, algorithm="RS256", headers={"kid": KID})

    def body(i):
        raw = "%s-%d" % (RAW_NONCE, i)
        return json.dumps({"identity_token": token(raw), "nonce": raw})

    write(os.path.join(state_dir, "token"), token(RAW_NONCE))
    write(os.path.join(state_dir, "nonce"), RAW_NONCE)
    warm, run, threads = (int(a) for a in sys.argv[3:6]) if len(sys.argv) > 5 else (0, 0, 1)
    write(os.path.join(state_dir, "check.json"), body(0))
    write(os.path.join(state_dir, "warm-1.jsonl"), "".join(body(1 + i) + "\n" for i in range(warm)))
    for t in range(threads):
        lines = (body(1 + warm + i) + "\n" for i in range(t, run, threads))
        write(os.path.join(state_dir, "run-%d.jsonl" % (t + 1)), "".join(lines))

    fetches = 0
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            nonlocal fetches
            if self.path == "/auth/keys":
                with lock:
                    fetches += 1
                self.answer(200, jwks, {"Cache-Control": "max-age=3600"})
            elif self.path == "/stats":
                with lock:
                    body = json.dumps({"key_fetches": fetches}).encode()
                self.answer(200, body, {"Cache-Control": "no-store"})
            else:
                self.answer(404, b'{"error":"not found"}', {})

        def answer(self, status, body, headers):
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format, *args):
            sys.stderr.write("fake-apple: %s\n" % (format % args))

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    write(os.path.join(state_dir, "port"), str(server.server_address[1]))
    server.serve_forever()


if __name__ == "__main__":
    main()
