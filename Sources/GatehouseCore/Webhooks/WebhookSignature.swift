import Foundation
import GatehouseCrypto

/// The Standard Webhooks signature: `v1,` and the standard base64 of HMAC-SHA256 over
/// `"<webhook-id>.<webhook-timestamp>.<body>"`, keyed with the secret's decoded bytes.
public enum WebhookSignature {
    /// The `webhook-signature` header value.
    public static func sign(key: [UInt8], id: String, timestamp: Int64, body: [UInt8]) -> String {
        let message = Array("\(id).\(timestamp).".utf8) + body
        return "v1," + Data(Digest.hmacSHA256(key: key, data: message)).base64EncodedString()
    }

    /// The header value for several keys (a secret change): one `v1,` signature per key, in
    /// order, separated by a space, as Standard Webhooks allows; a receiver accepts any that verifies.
    public static func sign(keys: [[UInt8]], id: String, timestamp: Int64, body: [UInt8]) -> String {
        keys.map { sign(key: $0, id: id, timestamp: timestamp, body: body) }.joined(separator: " ")
    }
}
