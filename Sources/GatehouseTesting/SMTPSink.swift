import Foundation

/// A real SMTP server on a loopback port for tests: scripts/smtp-sink.py on Debian's
/// python3-aiosmtpd (scripts/install-deps --test), run as a child process, not an SMTP
/// implementation of our own. It stores every message it accepts (envelope and raw data) as
/// files, counts the connections it accepts, and obeys a ``Mode`` that tests switch while it
/// runs: accept, refuse with 451 or 550 at `RCPT`, hang (accept the TCP connection and never say
/// a word), or accept slowly. With `credentials` it requires AUTH (PLAIN or LOGIN, allowed
/// without TLS on loopback) and accepts only that user.
///
/// SMTPUTF8 (RFC 6531): with `offersSMTPUTF8` the EHLO answer offers it and a non-ASCII address
/// in `MAIL FROM` or `RCPT TO` is refused (553 5.6.7) unless `MAIL FROM` carried the `SMTPUTF8`
/// parameter; without it (the default) any non-ASCII command argument is refused (500), as by a
/// server that does not speak SMTPUTF8. Either way a message with bytes outside ASCII in its header
/// is refused (550 5.6.7) unless sent with SMTPUTF8.
///
/// The server exits when ``stop()`` is called, when the sink is released, or when the test
/// process dies (it watches its standard input).
public final class SMTPSink: @unchecked Sendable {  // the process is touched only under `lock`
    /// What the sink does with the next connections and messages.
    public enum Mode: Sendable, Equatable {
        case accept
        /// `451 4.3.0` to every `RCPT TO`.
        case refuseTemporarily
        /// `550 5.1.1` to every `RCPT TO`.
        case refusePermanently
        /// New connections are accepted and never answered (no greeting).
        case hang
        /// Accepts, but waits `milliseconds` after each message's data before its `250` (a slow
        /// mail server; other connections are served meanwhile).
        case slow(milliseconds: Int)

        /// What the `mode` file says (scripts/smtp-sink.py).
        public var text: String {
            switch self {
            case .accept: "accept"
            case .refuseTemporarily: "refuse-temporarily"
            case .refusePermanently: "refuse-permanently"
            case .hang: "hang"
            case .slow(let milliseconds): "slow:\(max(0, milliseconds))"
            }
        }
    }

    /// One message the sink accepted.
    public struct Message: Sendable {
        /// The envelope sender (`MAIL FROM`), without angle brackets.
        public let mailFrom: String
        /// The envelope recipients (`RCPT TO`), as received.
        public let recipients: [String]
        /// The parameters of `MAIL FROM` as received, upper-cased (`SMTPUTF8`, `SIZE=…`).
        public let mailOptions: [String]
        /// Whether the message came with SMTPUTF8.
        public let smtputf8: Bool
        /// The user that authenticated, if the sink required AUTH.
        public let authenticatedAs: String?
        /// The message as received (after SMTP's dot-unstuffing).
        public let raw: [UInt8]

        /// The unfolded header fields, in order (a minimal parse: use ``IndependentMailParser``
        /// to check a message).
        public var headers: [(name: String, value: String)] {
            let text = String(decoding: raw, as: UTF8.self)
            let head = text.components(separatedBy: "\r\n\r\n").first ?? ""
            var fields: [(name: String, value: String)] = []
            for line in head.components(separatedBy: "\r\n") {
                if line.hasPrefix(" ") || line.hasPrefix("\t"), let last = fields.popLast() {
                    fields.append((last.name, last.value + line))
                } else if let colon = line.firstIndex(of: ":") {
                    fields.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
                }
            }
            return fields
        }

        /// The first value of the header `name` (any case).
        public func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }
    }

    /// The port the sink listens on, on 127.0.0.1.
    public let port: UInt16
    /// Where the sink keeps its files (`port`, `mode`, `connections`, `NNNN.eml`, `NNNN.json`, `sink.log`).
    public let directory: URL
    private let lock = NSLock()
    /// The server's process id, 0 once stopped. Spawned with posix_spawn, not Foundation's
    /// Process: Foundation's child monitor on Linux blocked in wait4 on this long-lived child
    /// while another child's exit was pending, and every waitUntilExit in the test process hung.
    private var pid: pid_t
    /// The write end of the server's standard input: when the test process dies it closes, and
    /// the server exits.
    private let input: Int32

    /// Whether the sink offers SMTPUTF8 in its EHLO answer.
    public let offersSMTPUTF8: Bool

    /// Starts the sink and waits (up to 10 s) until it listens.
    public init(credentials: (username: String, password: String)? = nil, offersSMTPUTF8: Bool = false) throws {
        self.offersSMTPUTF8 = offersSMTPUTF8
        directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("gatehouse-smtp-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let log = directory.appendingPathComponent("sink.log")
        var arguments = [ExternalProgram.python, Self.script, directory.path]
        if let credentials { arguments.append("\(credentials.username):\(credentials.password)") }
        if offersSMTPUTF8 { arguments.append("--smtputf8") }

        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else { throw TestHTTPClient.Failure(description: "pipe failed (errno \(errno))") }
        // Close-on-exec, so no other child inherits them (dup2 gives the server a copy without it).
        for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipeEnds[0], 0)
        posix_spawn_file_actions_addopen(&actions, 1, log.path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // The test process's threads block signals; the server starts with none blocked and the
        // usual dispositions, so that it can be stopped.
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGPIPE, SIGHUP] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var child: pid_t = 0
        let cArguments = arguments.map { strdup($0) } + [nil]
        defer { cArguments.forEach { free($0) } }
        let spawned = posix_spawn(&child, ExternalProgram.python, &actions, &attributes, cArguments, environ)
        close(pipeEnds[0])
        guard spawned == 0 else {
            close(pipeEnds[1])
            throw TestHTTPClient.Failure(description: "cannot start \(ExternalProgram.python) (error \(spawned))")
        }
        pid = child
        input = pipeEnds[1]

        let portFile = directory.appendingPathComponent("port")
        let deadline = Date().addingTimeInterval(10)
        var found: UInt16?
        while found == nil {
            if let text = try? String(contentsOf: portFile, encoding: .utf8), let value = UInt16(text) {
                found = value
            } else if Date() > deadline || waitpid(child, nil, WNOHANG) != 0 {
                kill(child, SIGKILL)
                waitpid(child, nil, 0)
                close(pipeEnds[1])
                let output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
                throw TestHTTPClient.Failure(description: "the SMTP sink (python3-aiosmtpd) did not start: \(output)")
            } else {
                Thread.sleep(forTimeInterval: 0.02)
            }
        }
        port = found!
    }

    deinit { stop() }

    /// `smtp://127.0.0.1:<port>`.
    public var url: String { "smtp://127.0.0.1:\(port)" }

    /// Switches what the sink does from the next command on.
    public func setMode(_ mode: Mode) throws {
        let temporary = directory.appendingPathComponent(".mode.tmp")
        try Data(mode.text.utf8).write(to: temporary)
        guard rename(temporary.path, directory.appendingPathComponent("mode").path) == 0 else {
            throw TestHTTPClient.Failure(description: "cannot set the SMTP sink's mode (errno \(errno))")
        }
    }

    /// How many TCP connections the sink has accepted.
    public var connectionCount: Int {
        (try? String(contentsOf: directory.appendingPathComponent("connections"), encoding: .utf8)).flatMap { Int($0) } ?? 0
    }

    /// The messages accepted so far, oldest first.
    public func messages() throws -> [Message] {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".json") && !$0.hasPrefix(".") }.sorted()
        return try names.map { name in
            let envelope = try JSONDecoder().decode(Envelope.self, from: Data(contentsOf: directory.appendingPathComponent(name)))
            let raw = try Data(contentsOf: directory.appendingPathComponent(name.replacingOccurrences(of: ".json", with: ".eml")))
            return Message(
                mailFrom: envelope.mail_from, recipients: envelope.rcpt_tos, mailOptions: envelope.mail_options, smtputf8: envelope.smtputf8,
                authenticatedAs: envelope.auth, raw: Array(raw))
        }
    }

    /// What the sink wrote to its standard error (aiosmtpd's log), for failure messages.
    public var log: String {
        (try? String(contentsOf: directory.appendingPathComponent("sink.log"), encoding: .utf8)) ?? ""
    }

    /// Stops the server (connections it holds are closed) and waits for it to exit. Files stay
    /// until the sink is released.
    public func stop() {
        lock.lock()
        defer { lock.unlock() }
        guard pid != 0 else { return }
        kill(pid, SIGKILL)
        while waitpid(pid, nil, 0) == -1 && errno == EINTR {}
        pid = 0
        close(input)
    }

    private struct Envelope: Decodable {
        let mail_from: String
        let rcpt_tos: [String]
        let auth: String?
        let mail_options: [String]
        let smtputf8: Bool
    }

    /// scripts/smtp-sink.py, which the bench also runs on its own.
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scripts/smtp-sink.py").path
}
