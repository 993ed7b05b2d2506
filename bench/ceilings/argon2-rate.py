#!/usr/bin/env python3
"""argon2id ceiling with the library the server links (libargon2.so.1).

    argon2-rate.py MEMORY_KIB ITERATIONS PARALLELISM SECONDS [PROCESSES]

Runs PROCESSES (default: the number of CPUs) processes that each call argon2id_hash_encoded
from libargon2 (through ctypes, as the server calls it through its C module) one after another
for SECONDS seconds, with a 16-byte random salt and a 32-byte hash as the server's encoded hashes
use. Prints "hashes_per_s=N hashes=N seconds=N processes=N ms_per_hash=N". The call overhead
of ctypes is microseconds against milliseconds of hashing.
"""
import ctypes
import ctypes.util
import multiprocessing
import os
import sys
import time


def load():
    name = ctypes.util.find_library("argon2") or "libargon2.so.1"
    lib = ctypes.CDLL(name)
    f = lib.argon2id_hash_encoded
    f.argtypes = [ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t,
                  ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    f.restype = ctypes.c_int
    return lib


def worker(m, t, p, seconds, start, results):
    lib = load()
    out = ctypes.create_string_buffer(256)
    password = b"bench-password-0123456789"
    n = 0
    start.wait()
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        salt = os.urandom(16)
        rc = lib.argon2id_hash_encoded(t, m, p, password, len(password), salt, len(salt), 32, out, len(out))
        if rc != 0:
            results.put((n, time.monotonic() - t0, rc))
            return
        n += 1
    results.put((n, time.monotonic() - t0, 0))


def main():
    m, t, p, seconds = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    procs = int(sys.argv[5]) if len(sys.argv) > 5 else os.cpu_count()
    load()
    start = multiprocessing.Event()
    results = multiprocessing.Queue()
    workers = [multiprocessing.Process(target=worker, args=(m, t, p, seconds, start, results)) for _ in range(procs)]
    for w in workers:
        w.start()
    time.sleep(0.2)
    start.set()
    got = [results.get() for _ in workers]
    for w in workers:
        w.join()
    errors = [rc for _, _, rc in got if rc]
    if errors:
        print(f"argon2id_hash_encoded failed: {errors[0]}", file=sys.stderr)
        sys.exit(1)
    rate = sum(n / e for n, e, _ in got)
    hashes = sum(n for n, _, _ in got)
    elapsed = max(e for _, e, _ in got)
    print(f"hashes_per_s={rate:.1f} hashes={hashes} seconds={elapsed:.2f} processes={procs} ms_per_hash={1000 * procs / rate:.1f}")


if __name__ == "__main__":
    main()
