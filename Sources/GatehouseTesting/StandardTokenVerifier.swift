import Foundation
import GatehouseCore

/// Verifies an access token the way an app's backend would, with joserfc (PyPI, in the venv that
/// `scripts/jose-venv` prepares) and none of Gatehouse's code: fetches the discovery document at
/// `<issuer>/.well-known/openid-configuration`, checks it as RFC 8414 authorization-server metadata
/// and that RFC 8414's own location (`<origin>/.well-known/oauth-authorization-server<issuer path>`)
/// serves the same,
/// fetches its `jwks_uri`, verifies the signature with the key of the token's `kid` and an
/// algorithm the metadata names, then RFC 9068 §4: `typ` is `at+jwt`, the required claims
/// (`iss`, `exp`, `aud`, `sub`, `client_id`, `iat`, `jti`) are present and well formed, `iss` is the
/// metadata's issuer, `aud` the expected audience, and `exp` has not passed (no leeway).
///
/// The issuer's URLs are on the server's public origin (`https://…`); requests to that origin are
/// sent to `connectTo` (the test server's loopback address), as a TLS proxy in front of Gatehouse
/// would forward them. No other URL is fetched.
public enum StandardTokenVerifier {
    public struct Outcome: Sendable {
        /// `nil` when every check passed, else what failed first (`metadata: …`, `jwks: …`, `token: …`).
        public let failure: String?
        public let metadata: JSON
        public let header: JSON
        public let claims: JSON
    }

    /// The venv's python: `$GATEHOUSE_JOSE_ROOT/venv/bin/python` (default `/tmp/gatehouse-jose`), as
    /// `scripts/jose-venv` makes it.
    public static var python: String {
        (ProcessInfo.processInfo.environment["GATEHOUSE_JOSE_ROOT"] ?? "/tmp/gatehouse-jose") + "/venv/bin/python"
    }

    public static func verify(token: String, issuer: String, audience: String, publicOrigin: String, connectTo: String) throws -> Outcome {
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw TestHTTPClient.Failure(
                description: "no joserfc venv at \(python): run scripts/jose-venv (scripts/test does) before these tests")
        }
        let output = try ExternalProgram.run(python, ["-c", script, issuer, audience, publicOrigin, connectTo], stdin: Array(token.utf8))
        let json = try JSON.parse(Array(output.utf8))
        return Outcome(
            failure: json["ok"] == .bool(true) ? nil : (json["error"]?.stringValue ?? output),
            metadata: json["metadata"] ?? .null, header: json["header"] ?? .null, claims: json["claims"] ?? .null)
    }

    static let script = #"""
        import json, sys, urllib.request
        from urllib.parse import urlsplit
        from joserfc import jwt
        from joserfc.jwk import KeySet

        issuer, audience, public_origin, connect_to = sys.argv[1:5]
        token = sys.stdin.read().strip()
        result = {"ok": False, "metadata": None, "header": None, "claims": None}

        class Failed(Exception):
            pass

        def fetch(url, media_types):
            if not url.startswith(public_origin + "/"):
                raise Failed(f"{url} is not on the issuer's origin {public_origin}")
            request = urllib.request.Request(connect_to + url[len(public_origin):], headers={"Accept": "application/json"})
            with urllib.request.urlopen(request, timeout=10) as response:
                if response.status != 200:
                    raise Failed(f"GET {url} answered {response.status}")
                media_type = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
                if media_type not in media_types:
                    raise Failed(f"GET {url} answered Content-Type {media_type!r}, not one of {media_types}")
                return json.load(response)

        def https_url(name, value, bare=False):
            parts = urlsplit(value) if isinstance(value, str) else None
            if parts is None or parts.scheme != "https" or not parts.netloc:
                raise Failed(f"{name} must be an https URL, not {value!r}")
            if bare and (parts.query or parts.fragment):
                raise Failed(f"{name} must have no query or fragment: {value!r}")

        def string_list(name, value):
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise Failed(f"{name} must be an array of strings, not {value!r}")

        def check_rfc8414(md):
            # §2: issuer REQUIRED, https, no query or fragment; §3.3: identical to the issuer the
            # metadata location was derived from.
            if "issuer" not in md:
                raise Failed("issuer is missing")
            https_url("issuer", md["issuer"], bare=True)
            if md["issuer"] != issuer:
                raise Failed(f"issuer {md['issuer']!r} is not the issuer the document was fetched for ({issuer!r})")
            # response_types_supported REQUIRED (an array; empty when there is no authorization endpoint).
            if "response_types_supported" not in md:
                raise Failed("response_types_supported is missing")
            string_list("response_types_supported", md["response_types_supported"])
            for name, value in md.items():
                if name.endswith("_supported") and isinstance(value, list):
                    string_list(name, value)
                if name.endswith("_endpoint") or name.endswith("_uri"):
                    https_url(name, value)
            # grant_types_supported defaults to ["authorization_code", "implicit"] when absent.
            grants = md.get("grant_types_supported", ["authorization_code", "implicit"])
            # authorization_endpoint REQUIRED unless no grant type that uses it is supported; a
            # response type is a parameter of that endpoint, so one listed needs it too.
            if ({"authorization_code", "implicit"} & set(grants) or md["response_types_supported"]) and "authorization_endpoint" not in md:
                raise Failed("authorization_endpoint is missing, yet a grant or response type that needs it is supported")
            # token_endpoint REQUIRED unless only the implicit grant is supported (no grant that
            # uses the token endpoint).
            if [g for g in grants if g != "implicit"] and "token_endpoint" not in md:
                raise Failed(f"token_endpoint is missing, yet grants {grants} need it")
            # jwks_uri is OPTIONAL in RFC 8414, but RFC 9068 §4 verification needs it.
            if "jwks_uri" not in md:
                raise Failed("jwks_uri is missing")

        def check_rfc9068(header, claims, md):
            # §4: typ is at+jwt (or application/at+jwt), compared as a media type.
            typ = str(header.get("typ", "")).lower()
            if typ not in ("at+jwt", "application/at+jwt"):
                raise Failed(f"typ is {header.get('typ')!r}, not at+jwt")
            # §2.2: required claims.
            for name in ("iss", "exp", "aud", "sub", "client_id", "iat", "jti"):
                if name not in claims:
                    raise Failed(f"required claim {name} is missing")
            for name in ("sub", "client_id", "jti"):
                if not isinstance(claims[name], str) or not claims[name]:
                    raise Failed(f"{name} must be a non-empty string, not {claims[name]!r}")
            for name in ("exp", "iat"):
                if not isinstance(claims[name], int) or isinstance(claims[name], bool):
                    raise Failed(f"{name} must be a NumericDate, not {claims[name]!r}")
            # §4: iss equals the metadata's issuer; aud names this resource; exp not passed. The
            # registry checks values, exp (and iat, nbf when present) against now, no leeway.
            registry = jwt.JWTClaimsRegistry(
                leeway=0, iss={"essential": True, "value": md["issuer"]}, aud={"essential": True, "value": audience},
                sub={"essential": True}, exp={"essential": True}, iat={"essential": True},
                jti={"essential": True}, client_id={"essential": True})
            registry.validate(claims)
            if claims["exp"] <= claims["iat"]:
                raise Failed("exp is not after iat")

        stage = "metadata"
        try:
            md = fetch(issuer + "/.well-known/openid-configuration", ["application/json"])
            result["metadata"] = md
            if not isinstance(md, dict):
                raise Failed("the document is not a JSON object")
            check_rfc8414(md)
            # RFC 8414 §3.1: the same metadata at the issuer's own well-known location, the
            # well-known segment inserted between its host and its path.
            parts = urlsplit(issuer)
            located = fetch(f"{parts.scheme}://{parts.netloc}/.well-known/oauth-authorization-server{parts.path}", ["application/json"])
            if located != md:
                raise Failed(f"the metadata at RFC 8414's location differs: {located!r}")
            algorithms = md.get("access_token_signing_alg_values_supported")
            string_list("access_token_signing_alg_values_supported", algorithms)
            if not algorithms or any(a == "none" or a.startswith("HS") for a in algorithms):
                raise Failed(f"access_token_signing_alg_values_supported {algorithms!r} names no asymmetric algorithm")
            stage = "jwks"
            keys = KeySet.import_key_set(fetch(md["jwks_uri"], ["application/jwk-set+json", "application/json"]))
            stage = "token"
            # joserfc picks the key by the header's kid and refuses any algorithm not listed.
            decoded = jwt.decode(token, keys, algorithms=algorithms)
            result["header"], result["claims"] = decoded.header, decoded.claims
            if decoded.header.get("alg") not in algorithms:
                raise Failed(f"alg {decoded.header.get('alg')!r} is not in the metadata's {algorithms}")
            check_rfc9068(decoded.header, decoded.claims, md)
            result["ok"] = True
        except Exception as e:
            result["error"] = f"{stage}: {type(e).__name__}: {e}"
        print(json.dumps(result))
        """#
}
