# A real SMTP server on a loopback port, for tests (Sources/GatehouseTesting/SMTPSink.swift runs
# it) and for the bench (bench/run runs it directly): Debian's python3-aiosmtpd, not an SMTP
# implementation of our own (scripts/install-deps installs it).
#
#   /usr/bin/python3 scripts/smtp-sink.py DIRECTORY [USER:PASSWORD] [--smtputf8]
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
# SMTPUTF8 (RFC 6531): with --smtputf8 the EHLO answer offers it, and a MAIL FROM or RCPT TO
# with a non-ASCII address is refused (553 5.6.7) unless MAIL FROM carried the SMTPUTF8
# parameter. Without it (the default) aiosmtpd refuses any non-ASCII command argument (500
# "strict ASCII mode"), as a server that does not speak SMTPUTF8 does. Either way a message whose
# header holds bytes outside ASCII is refused (550 5.6.7) unless its MAIL FROM said SMTPUTF8.
# NNNN.json records the MAIL FROM parameters as received ("mail_options") and whether the
# message came with SMTPUTF8 ("smtputf8").
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
flags = [a for a in sys.argv[2:] if a.startswith("--")]
positional = [a for a in sys.argv[2:] if not a.startswith("--")]
credentials = positional[0] if positional else None
offers_smtputf8 = "--smtputf8" in flags
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


def is_ascii(address):
    return all(ord(c) < 128 for c in address)


class Handler:
    async def handle_MAIL(self, server, session, envelope, address, mail_options):
        if not is_ascii(address) and "SMTPUTF8" not in mail_options:
            return "553 5.6.7 A non-ASCII address needs SMTPUTF8 (test sink)"
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return "250 OK"

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        current = mode()
        if current == "refuse-temporarily":
            return "451 4.3.0 Try again later (test sink)"
        if current == "refuse-permanently":
            return "550 5.1.1 No such mailbox (test sink)"
        if not is_ascii(address) and not envelope.smtp_utf8:
            return "553 5.6.7 A non-ASCII address needs SMTPUTF8 (test sink)"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        delay = slow_millis(mode())
        if delay:
            await asyncio.sleep(delay / 1000)
        content = envelope.original_content or envelope.content
        head = content.split(b"\r\n\r\n", 1)[0]
        if not envelope.smtp_utf8 and any(b > 127 for b in head):
            return "550 5.6.7 Header bytes outside ASCII need SMTPUTF8 (test sink)"
        counts["messages"] += 1
        name = "%04d" % counts["messages"]
        write(name + ".eml", content)
        auth = text(getattr(session, "auth_data", None)) if getattr(session, "authenticated", False) else None
        write(name + ".json", json.dumps({
            "mail_from": envelope.mail_from, "rcpt_tos": envelope.rcpt_tos, "auth": auth,
            "mail_options": envelope.mail_options, "smtputf8": bool(envelope.smtp_utf8),
        }).encode())
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
        return SMTP(Handler(), hostname="sink.test", enable_SMTPUTF8=offers_smtputf8,
                    auth_required=True, auth_require_tls=False, authenticator=authenticator)
    return SMTP(Handler(), hostname="sink.test", enable_SMTPUTF8=offers_smtputf8)


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
