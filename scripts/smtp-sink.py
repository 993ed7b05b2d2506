# A real SMTP server on a loopback port, for tests (Sources/GatehouseTesting/SMTPSink.swift runs
# it) and for the bench (bench/run runs it directly): Debian's python3-aiosmtpd, not an SMTP
# implementation of our own (scripts/install-deps installs it).
#
#   /usr/bin/python3 scripts/smtp-sink.py DIRECTORY [USER:PASSWORD]
#
# It listens on 127.0.0.1 on a free port and writes the port to DIRECTORY/port. Every message it
# accepts is stored as DIRECTORY/NNNN.eml (the data) and NNNN.json (the envelope), each written
# under a temporary name and renamed; DIRECTORY/connections counts the TCP connections accepted.
# DIRECTORY/mode, read at each command, says what to do (missing: accept):
#   accept              store the message and answer 250
#   refuse-temporarily  451 4.3.0 to every RCPT TO
#   refuse-permanently  550 5.1.1 to every RCPT TO
#   hang                accept new TCP connections and never say a word (no greeting)
#   slow:N              like accept, but wait N milliseconds after the data before answering
#                       250 (a slow mail server; other connections are served meanwhile)
# With USER:PASSWORD it requires AUTH (PLAIN or LOGIN, allowed without TLS on loopback).
#
# When its standard input is a pipe (the test process's), it exits once that pipe closes: the
# test process is gone. Otherwise (bench/run, stdin /dev/null) it runs until it is killed.
import os
import stat

# Descriptors inherited from the test process (another program's output pipe, opened at the
# same moment on another thread) would keep that program's reader waiting for an EOF as
# long as the sink lives: keep only stdin, stdout and stderr.
os.closerange(3, 65536)
import asyncio, json, sys
from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword

directory = sys.argv[1]
credentials = sys.argv[2] if len(sys.argv) > 2 else None
counts = {"connections": 0, "messages": 0}


def write(name, data):
    temporary = os.path.join(directory, "." + name + ".tmp")
    with open(temporary, "wb") as f:
        f.write(data)
    os.rename(temporary, os.path.join(directory, name))


def mode():
    try:
        with open(os.path.join(directory, "mode")) as f:
            return f.read().strip()
    except FileNotFoundError:
        return "accept"


def slow_millis(current):
    """N for the mode slow:N, else 0."""
    if current.startswith("slow:"):
        try:
            return max(0, int(current[5:]))
        except ValueError:
            return 0
    return 0


def text(value):
    if isinstance(value, LoginPassword):
        value = value.login
    return value.decode() if isinstance(value, bytes) else value


class Handler:
    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        current = mode()
        if current == "refuse-temporarily":
            return "451 4.3.0 Try again later (test sink)"
        if current == "refuse-permanently":
            return "550 5.1.1 No such mailbox (test sink)"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        delay = slow_millis(mode())
        if delay:
            await asyncio.sleep(delay / 1000)
        counts["messages"] += 1
        name = "%04d" % counts["messages"]
        write(name + ".eml", envelope.original_content or envelope.content)
        auth = text(getattr(session, "auth_data", None)) if getattr(session, "authenticated", False) else None
        write(name + ".json", json.dumps({"mail_from": envelope.mail_from, "rcpt_tos": envelope.rcpt_tos, "auth": auth}).encode())
        return "250 2.0.0 Stored (test sink)"


def authenticator(server, session, envelope, mechanism, auth_data):
    if not isinstance(auth_data, LoginPassword):
        return AuthResult(success=False, handled=False)
    user, password = credentials.split(":", 1)
    ok = auth_data.login == user.encode() and auth_data.password == password.encode()
    # handled=False: aiosmtpd answers (235 or 535); with True it waits for us to, forever.
    return AuthResult(success=ok, handled=False, auth_data=auth_data.login if ok else None)


class Hang(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport  # held open, never answered


def connection():
    counts["connections"] += 1
    write("connections", str(counts["connections"]).encode())
    if mode() == "hang":
        return Hang()
    if credentials:
        return SMTP(Handler(), hostname="sink.test", auth_required=True, auth_require_tls=False, authenticator=authenticator)
    return SMTP(Handler(), hostname="sink.test")


async def main():
    loop = asyncio.get_running_loop()
    server = await loop.create_server(connection, "127.0.0.1", 0)
    stopped = loop.create_future()

    def parent_gone():
        if not os.read(sys.stdin.fileno(), 4096) and not stopped.done():
            stopped.set_result(None)

    try:
        watch = stat.S_ISFIFO(os.fstat(sys.stdin.fileno()).st_mode)
    except OSError:
        watch = False
    if watch:
        loop.add_reader(sys.stdin.fileno(), parent_gone)
    write("port", str(server.sockets[0].getsockname()[1]).encode())
    await stopped


asyncio.run(main())
