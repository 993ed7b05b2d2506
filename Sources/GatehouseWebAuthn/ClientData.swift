import Foundation
import GatehouseCrypto

/// The parts of `clientDataJSON` (WebAuthn §5.8.1) a relying party checks. Its hash is what the
/// authenticator signed; the members are read with Foundation's JSON decoder.
public struct ClientData: Sendable, Equatable {
    /// `webauthn.create` or `webauthn.get`.
    public let type: String
    /// The challenge as the browser encoded it: base64url without padding.
    public let challenge: String
    public let origin: String
    public let crossOrigin: Bool
    /// SHA-256 of the JSON exactly as received.
    public let hash: [UInt8]

    private struct Members: Decodable {
        var type: String
        var challenge: String
        var origin: String
        var crossOrigin: Bool?
    }

    public init(_ json: [UInt8]) throws(WebAuthnError) {
        guard json.count <= 16 * 1024, let members = try? JSONDecoder().decode(Members.self, from: Data(json)) else {
            throw WebAuthnError("clientDataJSON is not a JSON object with type, challenge and origin.", malformed: true)
        }
        type = members.type
        challenge = members.challenge
        origin = members.origin
        crossOrigin = members.crossOrigin ?? false
        hash = Digest.sha256(json)
    }
}
