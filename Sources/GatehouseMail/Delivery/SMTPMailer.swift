import CCurl
import Foundation
import GatehouseOutbound
import Synchronization

/// Sends mail over SMTP with libcurl: `smtp://host[:port]` (STARTTLS required, unless the host
/// is a loopback address or `localhost`) or `smtps://host[:port]` (TLS from the first byte),
/// with AUTH when a username is given.
///
/// Connections are reused: a send takes an idle easy handle from the mailer's pool (libcurl keeps
/// the handle's SMTP connection open after a message, TLS and AUTH done) and gives it back when
/// the message was accepted; after a failure the handle and its connection are dropped. Several
/// threads may send at once, each on a handle of its own. Sends are bounded: connected and greeted within `connectTimeout` (libcurl
/// counts the server's greeting as part of connecting), done within `timeout`.
/// Every socket is checked against ``addressPolicy`` after DNS resolution: tenant URLs get
/// ``OutboundAddressPolicy/forTenantURLs(allowPrivate:)`` and never go through a proxy.
///
/// Addresses outside ASCII (RFC 6531, as libcurl 7.88 does it, lib/smtp.c): libcurl writes the
/// envelope. It converts a non-ASCII domain to IDNA A-labels in `MAIL FROM` and `RCPT TO` whether
/// or not the server offers SMTPUTF8 (``UTF8Locale`` lets it), keeps the local part as it is, and
/// adds the `SMTPUTF8` parameter to `MAIL FROM` when the server offers it and an envelope address
/// is not ASCII as given. The message is rendered once that `MAIL FROM` is sent: with SMTPUTF8 its
/// address headers carry the addresses as they are (RFC 6532), without it their domains in
/// A-labels. An address with a non-ASCII local part cannot go without SMTPUTF8: when `MAIL FROM`
/// went without it, the send stops before `RCPT TO` (libcurl would send the raw address anyway)
/// and fails permanently.
public final class SMTPMailer: Mailer {
    /// The URL without credentials, e.g. `smtp://mail.example.com:587`.
    public let url: String
    /// Which addresses a send may connect to.
    public let addressPolicy: OutboundAddressPolicy
    /// Whether STARTTLS is required (everything but loopback hosts; `smtps` is TLS anyway).
    public let requiresTLS: Bool
    let connectTimeout: Duration
    let timeout: Duration
    private let username: String?
    private let password: String?
    /// Idle easy handles, each with the connection of its last send (at most ``maxIdleHandles``).
    private let idle = Mutex<[IdleHandle]>([])
    /// An easy handle no thread uses while it is in the pool.
    private struct IdleHandle: @unchecked Sendable { let raw: UnsafeMutableRawPointer }
    static let maxIdleHandles = 8

    private static let globalInit: Void = { _ = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()

    /// A mailer for `url` (`smtp://` or `smtps://`, host required, no path). Credentials come from
    /// `username`/`password`, or from the URL's user information (`smtp://user:pass@host`), which is
    /// then removed from ``url``. Throws ``MailDeliveryError/permanent(_:)`` for a URL it cannot use.
    public init(
        url: String, username: String? = nil, password: String? = nil,
        addressPolicy: OutboundAddressPolicy = .anyAddress,
        connectTimeout: Duration = .seconds(10), timeout: Duration = .seconds(30)
    ) throws(MailDeliveryError) {
        guard !url.utf8.contains(where: { $0 < 0x21 || $0 == 0x7F }),
            let components = URLComponents(string: url),
            let scheme = components.scheme?.lowercased(), scheme == "smtp" || scheme == "smtps",
            let host = components.host, !host.isEmpty,
            components.path.isEmpty || components.path == "/", components.query == nil, components.fragment == nil
        else {
            throw .permanent("the SMTP URL must be smtp://host[:port] or smtps://host[:port]")
        }
        var bare = URLComponents()
        bare.scheme = scheme
        bare.percentEncodedHost = components.percentEncodedHost
        bare.port = components.port
        guard let bareURL = bare.string else { throw .permanent("the SMTP URL must be smtp://host[:port] or smtps://host[:port]") }
        self.url = bareURL
        self.username = username ?? components.user
        self.password = password ?? components.password
        self.addressPolicy = addressPolicy
        self.requiresTLS = !Self.isLoopback(host: host)
        self.connectTimeout = connectTimeout
        self.timeout = timeout
        _ = Self.globalInit
    }

    /// `localhost`, `127.0.0.0/8` and `::1` by name: no TLS needed to reach them. (A name that
    /// merely resolves to loopback still needs TLS.)
    static func isLoopback(host: String) -> Bool {
        let h = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        if h == "localhost" || h == "::1" { return true }
        let octets = h.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
    }

    deinit {
        for handle in idle.withLock({ $0 }) { curl_easy_cleanup(handle.raw) }
    }

    /// An idle handle, its options cleared (its connection and caches kept), or a new one.
    private func takeHandle() -> UnsafeMutableRawPointer? {
        if let handle = idle.withLock({ $0.popLast() })?.raw {
            curl_easy_reset(handle)
            return handle
        }
        return curl_easy_init()
    }

    /// Seconds a handle waits for QUIT's reply when it closes its connection. libcurl waits for
    /// it outside `CURLOPT_TIMEOUT`, up to its own 120 s: a server that never answers QUIT would
    /// hold a delivery (and its outbox lease) that long after the mail was sent.
    static let closingResponseSeconds = 3

    /// Closes a handle and its connection, waiting at most ``closingResponseSeconds`` for the
    /// server's goodbye.
    private static func close(_ handle: UnsafeMutableRawPointer) {
        _ = gh_curl_setopt_long(handle, CURLOPT_SERVER_RESPONSE_TIMEOUT, closingResponseSeconds)
        curl_easy_cleanup(handle)
    }

    /// Keeps the handle (and its open connection) for the next send, or closes it.
    private func giveBack(_ handle: UnsafeMutableRawPointer) {
        // Pooled handles close with the short wait too (a mailer's deinit, a full pool).
        _ = gh_curl_setopt_long(handle, CURLOPT_SERVER_RESPONSE_TIMEOUT, Self.closingResponseSeconds)
        let kept = idle.withLock { handles in
            guard handles.count < Self.maxIdleHandles else { return false }
            handles.append(IdleHandle(raw: handle))
            return true
        }
        if !kept { Self.close(handle) }
    }

    public func send(_ message: MailMessage) throws(MailDeliveryError) {
        guard let handle = takeHandle() else { throw .transient("curl_easy_init failed") }
        var reusable = false
        defer { if reusable { giveBack(handle) } else { Self.close(handle) } }

        let conversation = Conversation(message: message)
        let unmanagedConversation = Unmanaged.passRetained(conversation)
        defer { unmanagedConversation.release() }
        let recipients = curl_slist_append(nil, "<\(message.to.address)>")
        defer { curl_slist_free_all(recipients) }
        let addressGuard = CurlAddressGuard(policy: addressPolicy)
        defer { withExtendedLifetime(addressGuard) {} }
        var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)

        let (code, response): (CURLcode, Int) = errorBuffer.withUnsafeMutableBufferPointer { errorText in
            var setup = CURLE_OK
            func set(_ code: CURLcode) { if setup == CURLE_OK { setup = code } }
            set(addressGuard.install(on: handle))
            set(gh_curl_setopt_string(handle, CURLOPT_URL, url))
            set(gh_curl_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "smtp,smtps"))
            set(gh_curl_setopt_long(handle, CURLOPT_NOSIGNAL, 1))
            set(gh_curl_setopt_long(handle, CURLOPT_USE_SSL, Int(requiresTLS ? CURLUSESSL_ALL.rawValue : CURLUSESSL_NONE.rawValue)))
            set(gh_curl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, Self.millis(connectTimeout)))
            set(gh_curl_setopt_long(handle, CURLOPT_TIMEOUT_MS, Self.millis(timeout)))
            // Each reply within the whole send's time (libcurl's own default is 120 s).
            set(gh_curl_setopt_long(handle, CURLOPT_SERVER_RESPONSE_TIMEOUT, max(1, Self.millis(timeout) / 1000)))
            set(gh_curl_setopt_string(handle, CURLOPT_MAIL_FROM, "<\(message.from.address)>"))
            set(gh_curl_setopt_ptr(handle, CURLOPT_MAIL_RCPT, recipients))
            if let username {
                set(gh_curl_setopt_string(handle, CURLOPT_USERNAME, username))
                set(gh_curl_setopt_string(handle, CURLOPT_PASSWORD, password ?? ""))
            }
            set(gh_curl_setopt_long(handle, CURLOPT_UPLOAD, 1))
            set(gh_curl_set_read_function(handle, readMessage))
            set(gh_curl_setopt_ptr(handle, CURLOPT_READDATA, unmanagedConversation.toOpaque()))
            // The commands libcurl sends reach the debug function (verbose on; nothing is written
            // anywhere): `MAIL FROM` says whether libcurl uses SMTPUTF8. The server's replies
            // reach the header function, which can stop the send before `RCPT TO`.
            set(gh_curl_set_debug_function(handle, watchCommands))
            set(gh_curl_setopt_ptr(handle, CURLOPT_DEBUGDATA, unmanagedConversation.toOpaque()))
            set(gh_curl_setopt_long(handle, CURLOPT_VERBOSE, 1))
            set(gh_curl_set_header_function(handle, watchReplies))
            set(gh_curl_setopt_ptr(handle, CURLOPT_HEADERDATA, unmanagedConversation.toOpaque()))
            set(gh_curl_setopt_ptr(handle, CURLOPT_ERRORBUFFER, errorText.baseAddress))
            guard setup == CURLE_OK else {
                _ = gh_curl_setopt_ptr(handle, CURLOPT_ERRORBUFFER, nil)
                return (setup, -1)
            }
            // libcurl converts the envelope's non-ASCII domains with libidn2, which needs a UTF-8 locale.
            let code = UTF8Locale.run { curl_easy_perform(handle) }
            var response = 0
            gh_curl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &response)
            _ = gh_curl_setopt_ptr(handle, CURLOPT_ERRORBUFFER, nil)  // the buffer is about to move
            return (code, response)
        }

        if response == -1 { throw .permanent("\(url): curl setup failed: \(Self.message(code))") }
        // A refused address fails the send only if no other address of the name took the mail.
        if code != CURLE_OK, let refused = addressGuard.refused {
            throw .permanent("\(url) resolved to an address (\(refused)) which this mailer may not reach")
        }
        if conversation.stoppedWithoutSMTPUTF8 {
            // The address itself stays out of the reason (it is read in admin listings and logs).
            let whose = message.to.needsSMTPUTF8 ? "the recipient's address" : message.from.needsSMTPUTF8 ? "the sender's address" : "the Reply-To address"
            let why = message.to.needsSMTPUTF8 || message.from.needsSMTPUTF8 ? "does not offer SMTPUTF8" : "did not take this mail with SMTPUTF8 (its envelope is ASCII)"
            throw .permanent("\(url) \(why), which \(whose) needs (its part before the @ is not ASCII)")
        }
        guard code != CURLE_OK else {
            reusable = true
            return
        }
        let detail = redacting(Self.text(errorBuffer) ?? Self.message(code))
        let reason = response > 0 ? "\(url) answered \(response): \(detail)" : "\(url): \(detail)"
        switch response {
        case 500...599: throw .permanent(reason)
        // libcurl says "RCPT failed: <code>" when the server refused a recipient.
        case 400...499 where detail.contains("RCPT failed"): throw .recipientDeferred(reason)
        case 400...499: throw .transient(reason)
        default: break
        }
        switch code {
        case CURLE_LOGIN_DENIED, CURLE_USE_SSL_FAILED, CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT,
            CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_REMOTE_ACCESS_DENIED:
            throw .permanent(reason)
        default:
            throw .transient(reason)
        }
    }

    /// The error text never quotes a credential; should a server echo one, it is blanked.
    private func redacting(_ text: String) -> String {
        var result = text
        for secret in [password, username].compactMap({ $0 }) where secret.count >= 3 {
            result = result.replacingOccurrences(of: secret, with: "[redacted]")
        }
        return result
    }

    private static func millis(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        return max(1, Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000))
    }

    private static func message(_ code: CURLcode) -> String {
        String(cString: curl_easy_strerror(code))
    }

    private static func text(_ buffer: [CChar]) -> String? {
        let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        let text = String(decoding: bytes.filter { $0 >= 0x20 && $0 != 0x7F }, as: UTF8.self)
        return text.isEmpty ? nil : text
    }
}

/// One send as libcurl's callbacks see it, on the thread inside `curl_easy_perform` only: what
/// the envelope said, and the message, rendered when libcurl first reads it (after `MAIL FROM`
/// and `RCPT TO`, so with SMTPUTF8 known).
private final class Conversation {
    let message: MailMessage
    /// `MAIL FROM` has been sent.
    var mailFromSent = false
    /// It carried the `SMTPUTF8` parameter.
    var smtputf8 = false
    /// The send was stopped: the message needs SMTPUTF8 and `MAIL FROM` went without it.
    var stoppedWithoutSMTPUTF8 = false
    var bytes: [UInt8]?
    var offset = 0
    init(message: MailMessage) { self.message = message }
}

private let readMessage: curl_read_callback = { buffer, size, count, context in
    guard let buffer, let context else { return 0 }
    let conversation = Unmanaged<Conversation>.fromOpaque(context).takeUnretainedValue()
    let bytes = conversation.bytes ?? conversation.message.rendered(smtputf8: conversation.smtputf8)
    conversation.bytes = bytes
    let n = min(size * count, bytes.count - conversation.offset)
    guard n > 0 else { return 0 }
    bytes.withUnsafeBufferPointer { source in
        UnsafeMutableRawPointer(buffer).copyMemory(from: source.baseAddress! + conversation.offset, byteCount: n)
    }
    conversation.offset += n
    return n
}

/// Notes whether libcurl's `MAIL FROM` carried `SMTPUTF8`. Every other command (and the data)
/// passes unread: none of it is kept or written.
private let watchCommands: curl_debug_callback = { _, type, data, size, context in
    guard type == CURLINFO_HEADER_OUT, let data, let context else { return 0 }
    let prefix = Array("MAIL FROM:".utf8)
    guard size >= prefix.count else { return 0 }
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    guard zip(bytes, prefix).allSatisfy({ $0 == $1 }) else { return 0 }
    let conversation = Unmanaged<Conversation>.fromOpaque(context).takeUnretainedValue()
    let line = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    conversation.mailFromSent = true
    conversation.smtputf8 = line.uppercased().hasSuffix(" SMTPUTF8")
    return 0
}

/// Each reply line of the server. Once `MAIL FROM` is sent without SMTPUTF8 for a message that
/// needs it, the first reply stops the send (a header function that takes less than it is
/// given makes libcurl fail with `CURLE_WRITE_ERROR`): no non-ASCII `RCPT TO` reaches a server
/// that did not offer SMTPUTF8.
private let watchReplies: gh_curl_write_callback = { _, size, count, context in
    guard let context else { return size * count }
    let conversation = Unmanaged<Conversation>.fromOpaque(context).takeUnretainedValue()
    if conversation.mailFromSent && !conversation.smtputf8 && conversation.message.requiresSMTPUTF8 {
        conversation.stoppedWithoutSMTPUTF8 = true
        return 0
    }
    return size * count
}
