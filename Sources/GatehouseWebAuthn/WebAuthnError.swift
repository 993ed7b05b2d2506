/// A WebAuthn response that does not verify: the message says which check failed, in words a
/// developer can act on, and never repeats secret material.
public struct WebAuthnError: Error, Sendable, Equatable, CustomStringConvertible {
    public let message: String
    /// True when the response could not be read at all (malformed base64url, CBOR or JSON): the
    /// request is malformed rather than a credential that failed its checks.
    public let isMalformed: Bool

    public init(_ message: String, malformed: Bool = false) {
        self.message = message
        self.isMalformed = malformed
    }

    public var description: String { message }
}
