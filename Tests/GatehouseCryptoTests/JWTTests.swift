import Foundation
import GatehouseCrypto
import Testing

@Suite struct JWTTests {
    let payload = Array(#"{"sub":"user-1","iss":"https://id.example"}"#.utf8)

    @Test(arguments: SignatureAlgorithm.allCases)
    func signParseVerifyRoundTrip(_ algorithm: SignatureAlgorithm) throws {
        let key = try SigningKey.generate(algorithm)
        let token = try JWT.sign(payload: payload, key: key, kid: "key-1", type: "JWT")
        let parsed = try JWT.parse(token)
        #expect(parsed.header == JWT.Header(alg: algorithm.rawValue, kid: "key-1", typ: "JWT"))
        #expect(String(decoding: parsed.headerJSON, as: UTF8.self)
            == #"{"alg":"\#(algorithm.rawValue)","kid":"key-1","typ":"JWT"}"#)
        #expect(parsed.payload == payload)
        #expect(JWT.verify(parsed, with: try VerificationKey(jwk: key.publicJWK(kid: "key-1"))))
    }

    @Test func typIsOmittedWhenNil() throws {
        let token = try JWT.sign(payload: payload, key: try SigningKey.generate(.es256), kid: "k")
        #expect(String(decoding: try JWT.parse(token).headerJSON, as: UTF8.self) == #"{"alg":"ES256","kid":"k"}"#)
    }

    @Test func headerStringsAreEscaped() throws {
        let kid = "k\"\\/\u{1}\n é"
        let token = try JWT.sign(payload: payload, key: try SigningKey.generate(.es256), kid: kid, type: "at+jwt")
        let parsed = try JWT.parse(token)
        #expect(parsed.header.kid == kid)
        #expect(String(decoding: parsed.headerJSON, as: UTF8.self) == #"{"alg":"ES256","kid":"k\"\\/\u0001\n é","typ":"at+jwt"}"#)
    }

    @Test(arguments: ["a.b", "a.b.c.d", "", "..", "abc"])
    func parseRejectsWrongPartCounts(_ token: String) {
        #expect { try JWT.parse(token) } throws: { ($0 as? CryptoError)?.code == .malformedInput }
    }

    @Test func parseRejectsOversizeTokens() throws {
        let key = try SigningKey.generate(.es256)
        let token = try JWT.sign(payload: [UInt8](repeating: 0x61, count: 13_000), key: key, kid: "k")
        #expect(token.utf8.count > 16384)
        #expect { try JWT.parse(token) } throws: { ($0 as? CryptoError)?.code == .malformedInput }
        let small = try JWT.sign(payload: payload, key: key, kid: "k")
        #expect { try JWT.parse(small, maxLength: small.utf8.count - 1) } throws: { ($0 as? CryptoError)?.code == .malformedInput }
        _ = try JWT.parse(small, maxLength: small.utf8.count)
    }

    @Test func parseRejectsBadBase64AndBadHeaders() throws {
        let header = Base64URL.encode(#"{"alg":"ES256"}"#.utf8)
        let body = Base64URL.encode(payload)
        func rejects(_ token: String) {
            #expect { try JWT.parse(token) } throws: { ($0 as? CryptoError)?.code == .malformedInput }
        }
        rejects("\(header)=.\(body).AAAA")
        rejects("\(header).\(body)+/.AAAA")
        rejects("\(header).\(body).AA AA")
        rejects("\(header).\(body).A")
        rejects("\(Base64URL.encode("[1,2]".utf8)).\(body).AAAA")
        rejects("\(Base64URL.encode(#"{"alg":256}"#.utf8)).\(body).AAAA")
        rejects("\(Base64URL.encode(#"{"typ":"JWT"}"#.utf8)).\(body).AAAA")
        rejects("\(Base64URL.encode("not json".utf8)).\(body).AAAA")
        rejects("\(Base64URL.encode(#"{"alg":"ES256","crit":["exp"]}"#.utf8)).\(body).AAAA")
        _ = try JWT.parse("\(header).\(body).AAAA")
    }

    @Test func verifyRejectsAlgNone() throws {
        let key = try SigningKey.generate(.rs256)
        let unsigned = "\(Base64URL.encode(#"{"alg":"none"}"#.utf8)).\(Base64URL.encode(payload))."
        #expect(!JWT.verify(try JWT.parse(unsigned), with: key.verificationKey))
    }

    @Test func verifyRejectsHS256HeaderWithAnRSAKey() throws {
        // The classic confusion attack: HMAC the token with the RSA public key's bytes.
        let key = try SigningKey.generate(.rs256)
        let input = "\(Base64URL.encode(#"{"alg":"HS256","kid":"k"}"#.utf8)).\(Base64URL.encode(payload))"
        let mac = Digest.hmacSHA256(key: Array(key.verificationKey.spkiPEM().utf8), data: input.utf8)
        let parsed = try JWT.parse("\(input).\(Base64URL.encode(mac))")
        #expect(!JWT.verify(parsed, with: key.verificationKey))
    }

    @Test func verifyRejectsAlgorithmMismatchWithAValidSignature() throws {
        // An ES256 signature under a header that claims RS256 is refused before any crypto.
        let key = try SigningKey.generate(.es256)
        let input = "\(Base64URL.encode(#"{"alg":"RS256"}"#.utf8)).\(Base64URL.encode(payload))"
        let parsed = try JWT.parse("\(input).\(Base64URL.encode(try key.sign(Array(input.utf8))))")
        #expect(!JWT.verify(parsed, with: key.verificationKey))
    }

    @Test(arguments: SignatureAlgorithm.allCases)
    func verifyRejectsTamperedPayload(_ algorithm: SignatureAlgorithm) throws {
        let key = try SigningKey.generate(algorithm)
        let parts = try JWT.sign(payload: payload, key: key, kid: "k").split(separator: ".")
        let forged = Base64URL.encode(#"{"sub":"admin","iss":"https://id.example"}"#.utf8)
        let parsed = try JWT.parse("\(parts[0]).\(forged).\(parts[2])")
        #expect(!JWT.verify(parsed, with: key.verificationKey))
    }

    @Test(arguments: SignatureAlgorithm.allCases)
    func verifyRejectsTheWrongKey(_ algorithm: SignatureAlgorithm) throws {
        let token = try JWT.sign(payload: payload, key: try SigningKey.generate(algorithm), kid: "k")
        #expect(!JWT.verify(try JWT.parse(token), with: try SigningKey.generate(algorithm).verificationKey))
    }

    /// PyJWT + pyca/cryptography (independent of our code) must accept our RS256 and ES256 tokens
    /// against the published JWKs, and produce ES256/RS256 tokens from our PKCS#8 keys that we accept.
    @Test func pythonPyJWTInteroperates() throws {
        var cases: [[String: String]] = []
        var keys: [String: SigningKey] = [:]
        for algorithm in SignatureAlgorithm.allCases {
            let key = try SigningKey.generate(algorithm)
            keys[algorithm.rawValue] = key
            let jwk = String(decoding: try JSONEncoder().encode(key.publicJWK(kid: "kid-\(algorithm.rawValue)")), as: UTF8.self)
            let token = try JWT.sign(payload: payload, key: key, kid: "kid-\(algorithm.rawValue)", type: "JWT")
            cases.append(["alg": algorithm.rawValue, "jwk": jwk, "token": token, "pem": key.pkcs8PEM()])
        }
        let script = """
            import json, sys, jwt
            out = {}
            for case in json.load(sys.stdin):
                key = jwt.PyJWK(json.loads(case["jwk"]))
                claims = jwt.decode(case["token"], key=key.key, algorithms=[case["alg"]])
                assert claims["sub"] == "user-1", claims
                header = jwt.get_unverified_header(case["token"])
                assert header["kid"] == "kid-" + case["alg"] and header["typ"] == "JWT", header
                out[case["alg"]] = jwt.encode({"sub": "from-python"}, case["pem"], algorithm=case["alg"], headers={"kid": "py"})
            print(json.dumps(out))
            """
        let input = String(decoding: try JSONSerialization.data(withJSONObject: cases), as: UTF8.self)
        let result = try ExternalTool.run("/usr/bin/python3", ["-c", script], input: input)
        try #require(result.status == 0, "python failed: \(result.stderr)")
        let pythonTokens = try #require(
            try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: String])
        for (alg, token) in pythonTokens {
            let parsed = try JWT.parse(token)
            #expect(parsed.header.alg == alg && parsed.header.kid == "py")
            #expect(String(decoding: parsed.payload, as: UTF8.self).contains("from-python"))
            #expect(JWT.verify(parsed, with: try #require(keys[alg]).verificationKey))
        }
        #expect(pythonTokens.count == 2)
    }
}
