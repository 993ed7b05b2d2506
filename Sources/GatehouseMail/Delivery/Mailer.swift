/// Sends one message, blocking the calling thread until the server has taken it or refused it.
public protocol Mailer: Sendable {
    /// Delivers `message` to its recipient's mail server (or the log). Throws to say whether
    /// trying again later may help.
    func send(_ message: MailMessage) throws(MailDeliveryError)
}

/// Why a message was not delivered, sorted by what the sender should do. The reason names the
/// server (scheme, host, port) and its answer, never a username or password.
public enum MailDeliveryError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Try again later: the server was unreachable or slow, or answered 4xx.
    case transient(String)
    /// Try again later: the server works, but deferred this recipient (4xx to `RCPT TO`, say
    /// greylisting or a recipient domain that does not resolve now). Not the server's failure: it
    /// does not count against the server's circuit breaker, so that nobody can pause an app's
    /// mail by asking for codes to such addresses.
    case recipientDeferred(String)
    /// Trying again will not help: the server answered 5xx (unknown recipient, bad credentials),
    /// or the settings are wrong (a refused address, no STARTTLS, a malformed URL).
    case permanent(String)

    /// The reason, whichever the kind.
    public var reason: String {
        switch self {
        case .transient(let reason), .recipientDeferred(let reason), .permanent(let reason): reason
        }
    }

    public var isTransient: Bool {
        if case .permanent = self { return false }
        return true
    }

    /// The server itself failed (unreachable, slow, or a 4xx not about one recipient).
    public var blamesServer: Bool {
        if case .transient = self { return true }
        return false
    }

    public var description: String {
        "\(isTransient ? "transient" : "permanent"): \(reason)"
    }
}
