#!/usr/bin/env python3
"""Helpers of bench/run's Files part (bench/README.md, "Files").

    files.py prepare DIR
        Writes DIR/photo.png (a valid ~256 KiB PNG: an IHDR, zlib-compressed rows of
        pseudo-random bytes, IEND), DIR/photo-body.bin (multipart, part `photo`) and
        DIR/file-body.bin (multipart, part `file` and `visibility=public`), and prints the
        boundary and the PNG's size and SHA-256: "boundary=… png_bytes=… png_sha256=…".

    files.py rss BASE APP_KEY TOKEN PID [CLIENTS] [MIB]
        CLIENTS (64) uploads of MIB (5) MiB each to BASE/v1/files at once, each of its own
        content: all connect and send their headers, wait for each other, then send their bodies
        in 64 KiB writes. The server's VmRSS (/proc/PID/status) is sampled every 100 ms; its
        VmHWM is reset first (/proc/PID/clear_refs) and read at the end. Every answer must be 201
        with the size and SHA-256 of what was sent. Prints one line:
        "uploads=… ok=… bad=… idle_kib=… peak_kib=… hwm_kib=… seconds=… mib_per_s=… first_bad=…"
"""
import hashlib
import os
import random
import re
import socket
import struct
import sys
import threading
import time
import zlib

BOUNDARY = "gatehouse-bench-files-7d41c0"


def png(width=256, height=340, seed=13):
    """A real PNG, RGB 8-bit: rows of pseudo-random bytes (filter 0), so the zlib stream stays
    about as large as the raw pixels: 256 × 340 × 3 + 340 ≈ 255.6 KiB."""
    rng = random.Random(seed)
    raw = b"".join(b"\x00" + rng.randbytes(width * 3) for _ in range(height))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")


def part(name, filename, content_type, data):
    head = f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{name}\""
    if filename:
        head += f"; filename=\"{filename}\""
    head += "\r\n"
    if content_type:
        head += f"Content-Type: {content_type}\r\n"
    return head.encode() + b"\r\n" + data + b"\r\n"


def prepare(directory):
    image = png()
    with open(os.path.join(directory, "photo.png"), "wb") as f:
        f.write(image)
    with open(os.path.join(directory, "photo-body.bin"), "wb") as f:
        f.write(part("photo", "photo.png", "image/png", image) + f"--{BOUNDARY}--\r\n".encode())
    with open(os.path.join(directory, "file-body.bin"), "wb") as f:
        f.write(part("visibility", None, None, b"public") + part("file", "photo.png", "image/png", image)
                + f"--{BOUNDARY}--\r\n".encode())
    print(f"boundary={BOUNDARY} png_bytes={len(image)} png_sha256={hashlib.sha256(image).hexdigest()}")


def status_kib(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def rss(base, app_key, token, pid, clients=64, mib=5):
    host, port = base.split("//", 1)[1].rsplit(":", 1)
    port = int(port)
    size = mib * 1024 * 1024
    shared = os.urandom(size - 16)  # each upload: 16 bytes of its own, then these
    results = [None] * clients
    barrier = threading.Barrier(clients + 1)

    def upload(index):
        prefix = os.urandom(16)
        digest = hashlib.sha256(prefix)
        digest.update(shared)
        expected = digest.hexdigest()
        head = (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big-{index}.bin\"\r\n"
                "Content-Type: application/octet-stream\r\n\r\n").encode()
        tail = f"\r\n--{BOUNDARY}--\r\n".encode()
        length = len(head) + size + len(tail)
        try:
            s = socket.create_connection((host, port), timeout=300)
            s.sendall((f"POST /v1/files HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n"
                       f"X-App-Key: {app_key}\r\nAuthorization: Bearer {token}\r\n"
                       f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
                       f"Content-Length: {length}\r\n\r\n").encode())
            barrier.wait()
            s.sendall(head + prefix)
            view = memoryview(shared)
            for offset in range(0, len(shared), 65536):
                s.sendall(view[offset:offset + 65536])
            s.sendall(tail)
            answer = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                answer += chunk
            s.close()
            status = answer.split(b" ", 2)[1].decode()
            text = answer.partition(b"\r\n\r\n")[2].decode(errors="replace")
            sha = re.search(r'"sha256"\s*:\s*"([0-9a-f]{64})"', text)
            got_size = re.search(r'"size"\s*:\s*(\d+)', text)
            good = status == "201" and sha and sha.group(1) == expected and got_size and int(got_size.group(1)) == size
            results[index] = (bool(good), f"{status} {text[:200]}")
        except Exception as error:  # a failed upload
            results[index] = (False, repr(error))
            try:
                barrier.abort()
            except Exception:
                pass

    threads = [threading.Thread(target=upload, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    idle = status_kib(pid, "VmRSS")
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS
    except OSError:
        pass
    peak = [idle]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], status_kib(pid, "VmRSS"))
            time.sleep(0.1)

    sampler = threading.Thread(target=sample)
    sampler.start()
    started = time.monotonic()
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        pass
    for t in threads:
        t.join()
    seconds = time.monotonic() - started
    time.sleep(0.2)
    stop.set()
    sampler.join()
    hwm = status_kib(pid, "VmHWM")
    ok = sum(1 for r in results if r and r[0])
    bad = [r[1] for r in results if not (r and r[0])]
    first_bad = (bad[0] if bad else "").replace("\n", " ").replace(" ", "_")[:160]
    print(f"uploads={clients} ok={ok} bad={len(bad)} idle_kib={idle} peak_kib={peak[0]} hwm_kib={hwm} "
          f"seconds={seconds:.2f} mib_per_s={clients * mib / seconds:.1f} first_bad={first_bad}")
    return 0 if not bad else 1


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "prepare":
        prepare(sys.argv[2])
        return 0
    if len(sys.argv) >= 6 and sys.argv[1] == "rss":
        clients = int(sys.argv[6]) if len(sys.argv) > 6 else 64
        mib = int(sys.argv[7]) if len(sys.argv) > 7 else 5
        return rss(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), clients, mib)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
