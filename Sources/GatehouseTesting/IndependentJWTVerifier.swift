import Foundation
import GatehouseCore

/// Verifies a JWT with PyJWT (Debian's python3-jwt), not with Gatehouse's own code: fetches the
/// JWKS over HTTP, picks the key by `kid`, checks signature, `iss`, `aud` and `exp`.
public enum IndependentJWTVerifier {
    static let script = """
        import json, sys, jwt
        jwks_url, token, audience, issuer, algorithm = sys.argv[1:6]
        try:
            key = jwt.PyJWKClient(jwks_url, cache_keys=False).get_signing_key_from_jwt(token)
            claims = jwt.decode(token, key.key, algorithms=[algorithm], audience=audience, issuer=issuer,
                                options={"require": ["exp", "iat", "iss", "aud", "sub"]})
            print(json.dumps({"ok": True, "claims": claims}))
        except Exception as e:
            print(json.dumps({"ok": False, "error": type(e).__name__ + ": " + str(e)}))
        """

    public enum Outcome: Equatable, Sendable {
        case valid(claims: JSON)
        case rejected(String)
    }

    public static func verify(token: String, jwksURL: String, audience: String, issuer: String, algorithm: String) throws -> Outcome {
        let output = try ExternalProgram.run(ExternalProgram.python, ["-c", script, jwksURL, token, audience, issuer, algorithm])
        let json = try JSON.parse(Array(output.utf8))
        if json["ok"] == .bool(true), let claims = json["claims"] { return .valid(claims: claims) }
        return .rejected(json["error"]?.stringValue ?? output)
    }
}
