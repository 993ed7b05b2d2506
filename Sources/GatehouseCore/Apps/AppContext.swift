import GatehouseCrypto
import Synchronization

/// One app as a node serves it: its record, decoded settings and ready-to-use signing key,
/// built once per app version and shared by every request (immutable but for three atomics, so
/// `Sendable`).
public final class AppContext: Sendable {
    public let record: AppRecord
    public let settings: AppSettings
    /// The key new tokens are signed with.
    public let signingKey: SigningKey
    public let signingKeyID: String
    /// Every published key (next, current, retired and unexpired), by kid, for verifying our own tokens.
    public let verificationKeys: [String: VerificationKey]
    /// The serialised JWKS document.
    public let jwks: [UInt8]
    /// When this node last confirmed the version with the database (ms). Moved in place when the
    /// version is unchanged: no write lock on the directory, which every request reads.
    private let checked: Atomic<Int64>
    var checkedAt: Int64 { checked.load(ordering: .relaxed) }
    func confirmed(at now: Int64) { checked.store(now, ordering: .relaxed) }
    /// Whether a request used this context since `checkedAt`: the cache thread checks such apps
    /// again before a request would have to (``AppDirectory/revalidateAhead(now:)``).
    let usedSinceCheck = Atomic<Bool>(false)
    /// Whether a version query for this context is under way (``AppDirectory``): then the other
    /// requests go on with it instead of all asking the database at once.
    let revalidating = Atomic<Bool>(false)
    /// When the first retired key leaves the JWKS (ms): the context must be rebuilt by then even
    /// though the app's version does not change.
    let keysExpireAt: Int64?

    public var id: AppID { record.id }
    /// Switched off by the platform operator (``AppRecord/disabledAt``): its key, secret keys,
    /// tokens, JWKS and metadata are refused until it is enabled again.
    public var isDisabled: Bool { record.disabledAt != nil }

    init(record: AppRecord, settings: AppSettings, keys: [SigningKeyRecord], sealer: SecretSealer, checkedAt: Int64) throws {
        self.record = record
        self.settings = settings
        self.checked = Atomic(checkedAt)
        guard let current = keys.first(where: { $0.state == .current }) else {
            throw InternalError("app \(record.id) has no current signing key")
        }
        let pem = try sealer.open(current.sealedPrivateKey, app: record.id, field: "signing_key/\(current.kid)")
        signingKey = try SigningKey(pem: pem, algorithm: current.algorithm)
        signingKeyID = current.kid
        var verification: [String: VerificationKey] = [:]
        var jwks: [JSON] = []
        // Newest first: the key about to be used, then the one in use, then the retired ones.
        let order: [SigningKeyState: Int] = [.next: 0, .current: 1, .retired: 2]
        for key in keys.sorted(by: { (order[$0.state]!, -$0.createdAt) < (order[$1.state]!, -$1.createdAt) }) {
            let jwkJSON = try JSON.parse(Array(key.publicJWK.utf8))
            jwks.append(jwkJSON)
            let jwk = try JWK(json: jwkJSON)
            verification[key.kid] = try VerificationKey(jwk: jwk)
        }
        verificationKeys = verification
        self.jwks = JSON.object(["keys": .array(jwks)]).serialized()
        keysExpireAt = keys.compactMap(\.expiresAt).min()
    }
}

/// A failure that is the server's fault; logged with its text, answered as a bare 500.
public struct InternalError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

extension JWK {
    /// Reads a JWK from its JSON object.
    init(json: JSON) throws {
        guard case .object(let o) = json, case .string(let kty)? = o["kty"] else { throw InternalError("stored JWK is not an object with kty") }
        self.init(kty: kty)
        kid = o["kid"]?.stringValue
        use = o["use"]?.stringValue
        alg = o["alg"]?.stringValue
        n = o["n"]?.stringValue
        e = o["e"]?.stringValue
        crv = o["crv"]?.stringValue
        x = o["x"]?.stringValue
        y = o["y"]?.stringValue
    }

    /// The JWK as a JSON object with only its present members.
    var json: JSON {
        var o: [String: JSON] = ["kty": .string(kty)]
        for (name, value) in [("kid", kid), ("use", use), ("alg", alg), ("n", n), ("e", e), ("crv", crv), ("x", x), ("y", y)] {
            if let value { o[name] = .string(value) }
        }
        return .object(o)
    }
}
