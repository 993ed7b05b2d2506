"""Helpers for the mail part of bench/run (see bench/README.md, "Mail").

  mail.py queue BASE_URL APP_KEY COUNT TAG
      POSTs /v1/auth/email-code/send COUNT times, each with an address of its own
      (<TAG>-<n>@bench.example.com) and an X-Forwarded-For of its own among 10.200.x.y (the per-IP
      send limit), over 4 keep-alive connections. Prints "queued=… other=… seconds=…": queued
      counts the 202 answers, other every other status (each must be 202).
  mail.py count SINK_DIR
      How many messages the SMTP sink (scripts/smtp-sink.py) has stored.
  mail.py wait SINK_DIR COUNT TIMEOUT_SECONDS
      Waits until the sink has stored COUNT messages, or until TIMEOUT_SECONDS pass with no new
      message. Prints "messages=… span=… rate=…": span is the time from the first message stored
      to the last (the files' modification times), rate = (messages - 1) / span, the items the
      outbox delivered per second while it delivered.
"""

import http.client
import json
import os
import sys
import threading
import time


def queue(base, key, count, tag):
    host, port = base.replace("http://", "").split(":")
    results = {"queued": 0, "other": 0}
    lock = threading.Lock()
    lanes = 4

    def lane(index):
        connection = http.client.HTTPConnection(host, int(port), timeout=30)
        queued = other = 0
        for n in range(index, count, lanes):
            body = json.dumps({"email": "%s-%d@bench.example.com" % (tag, n)})
            headers = {
                "Content-Type": "application/json",
                "X-App-Key": key,
                "X-Forwarded-For": "10.200.%d.%d" % ((n // 256) % 256, n % 256),
            }
            connection.request("POST", "/v1/auth/email-code/send", body, headers)
            response = connection.getresponse()
            response.read()
            if response.status == 202:
                queued += 1
            else:
                other += 1
                if other <= 3:
                    print("answer %d to %s" % (response.status, body), file=sys.stderr)
        connection.close()
        with lock:
            results["queued"] += queued
            results["other"] += other

    start = time.monotonic()
    threads = [threading.Thread(target=lane, args=(i,)) for i in range(lanes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("queued=%d other=%d seconds=%.2f" % (results["queued"], results["other"], time.monotonic() - start))


def stored(directory):
    return [name for name in os.listdir(directory) if name.endswith(".json") and not name.startswith(".")]


def wait(directory, count, timeout):
    last_count, last_change = -1, time.monotonic()
    while True:
        n = len(stored(directory))
        if n >= count:
            break
        if n != last_count:
            last_count, last_change = n, time.monotonic()
        elif time.monotonic() - last_change > timeout:
            break
        time.sleep(0.2)
    times = sorted(os.stat(os.path.join(directory, name)).st_mtime_ns for name in stored(directory))
    span = (times[-1] - times[0]) / 1e9 if len(times) > 1 else 0
    rate = (len(times) - 1) / span if span > 0 else 0
    print("messages=%d span=%.3f rate=%.1f" % (len(times), span, rate))


if __name__ == "__main__":
    command = sys.argv[1]
    if command == "queue":
        queue(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    elif command == "count":
        print(len(stored(sys.argv[2])))
    elif command == "wait":
        wait(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    else:
        sys.exit("unknown command " + command)
