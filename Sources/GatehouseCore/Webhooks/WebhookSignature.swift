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
}
