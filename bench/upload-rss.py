#!/usr/bin/env python3
"""Peak RSS of the HTTP layer during concurrent large uploads: streamed (multipart/form-data read by
libmicrohttpd's post processor into spool files) against buffered (the same body read into memory).

    swift build -c release --product upload-bench-server
    python3 bench/upload-rss.py [.build/release/upload-bench-server] [--clients 64] [--mib 5] [--rounds 3]

For each mode a fresh server (16 HTTP workers on 2 cores, as Gatehouse sizes them) takes `rounds`
waves of `clients` uploads of `mib` MiB each. All clients of a wave connect and send their headers,
wait for each other, then send their bodies in 64 KiB writes, so that the uploads are in flight
together. RSS is sampled from /proc every 5 ms, and VmHWM (the kernel's peak) read at the end. Every
answer must carry the size and SHA-256 of what was sent; the spool folder (TMPDIR of the server)
must be empty at the end. Prints a Markdown table.
"""
import argparse
import hashlib
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

BOUNDARY = "bench-upload-boundary-5c1d9e"


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def multipart(payload):
    head = (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.bin\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode()
    return head + payload + f"\r\n--{BOUNDARY}--\r\n".encode()


def upload(port, path, body, barrier, results, index):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=120)
        s.sendall((f"POST {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n"
                   f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
                   f"Content-Length: {len(body)}\r\n\r\n").encode())
        barrier.wait()
        view = memoryview(body)
        for offset in range(0, len(body), 65536):
            s.sendall(view[offset:offset + 65536])
        answer = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
        s.close()
        head, _, text = answer.partition(b"\r\n\r\n")
        results[index] = (head.split(b" ")[1].decode(), text.decode())
    except Exception as error:  # reported as a failed upload
        results[index] = ("error", repr(error))


def run(binary, mode, clients, mib, rounds):
    spool = tempfile.mkdtemp(prefix="gatehouse-bench-spool-")
    env = dict(os.environ, TMPDIR=spool)
    server = subprocess.Popen([binary, "0"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    port = int(server.stdout.readline().split()[1])
    time.sleep(0.3)
    idle = status_kib(server.pid, "VmRSS")
    peak = [idle]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], status_kib(server.pid, "VmRSS"))
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    payload = os.urandom(mib * 1024 * 1024)
    body = multipart(payload)
    if mode == "streamed":
        expected = f"{len(payload)} {hashlib.sha256(payload).hexdigest()}"
    else:
        expected = f"{len(body)} {hashlib.sha256(body).hexdigest()}"
    failures = 0
    started = time.monotonic()
    for _ in range(rounds):
        results = [None] * clients
        barrier = threading.Barrier(clients)
        threads = [threading.Thread(target=upload, args=(port, "/" + mode, body, barrier, results, i)) for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        failures += sum(1 for r in results if r != ("200", expected))
    elapsed = time.monotonic() - started
    stop.set()
    sampler.join()
    hwm = status_kib(server.pid, "VmHWM")
    server.stdin.close()
    server.wait(timeout=30)
    left = os.listdir(spool)
    os.rmdir(spool) if not left else None
    return {"mode": mode, "idle": idle / 1024, "peak": max(peak[0], hwm) / 1024, "sampled": peak[0] / 1024,
            "seconds": elapsed, "failures": failures, "left": len(left), "uploads": clients * rounds}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary", nargs="?", default=os.path.join(os.path.dirname(__file__), "..", ".build", "release", "upload-bench-server"))
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--mib", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modes", default="streamed,buffered")
    args = parser.parse_args()
    rows = [run(args.binary, mode, args.clients, args.mib, args.rounds) for mode in args.modes.split(",")]
    print(f"{args.rounds} waves of {args.clients} concurrent {args.mib} MiB uploads, {os.cpu_count()} cores\n")
    print("| mode | RSS idle | peak RSS (VmHWM) | peak − idle | per upload in flight | MiB/s | failed | spool files left |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        grown = r["peak"] - r["idle"]
        rate = r["uploads"] * args.mib / r["seconds"]
        print(f"| {r['mode']} | {r['idle']:.1f} MiB | {r['peak']:.1f} MiB | {grown:.1f} MiB | {grown / args.clients * 1024:.0f} KiB "
              f"| {rate:.0f} | {r['failures']} | {r['left']} |")
    sys.exit(1 if any(r["failures"] or r["left"] for r in rows) else 0)


if __name__ == "__main__":
    main()
