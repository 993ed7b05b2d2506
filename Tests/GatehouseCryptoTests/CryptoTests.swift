import Foundation
import GatehouseCrypto
import Testing

@Suite("Digests, encodings, random, AES-GCM")
struct PrimitiveTests {
    @Test
    func sha256AndHMACKnownAnswers() {
        #expect(Digest.hex(Digest.sha256("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        // RFC 4231, test case 2.
        #expect(
            Digest.hex(Digest.hmacSHA256(key: Array("Jefe".utf8), data: "what do ya want for nothing?".utf8))
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    @Test
    func base64URLRoundTripsAndIsStrict() {
        for length in 0..<70 {
            let bytes = SecureRandom.bytes(length)
            #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
        }
        #expect(Base64URL.encode([0xFB, 0xFF]) == "-_8")
        #expect(Base64URL.decode("-_8") == [0xFB, 0xFF])
        for bad in ["a", "ab=", "a+b/", "a b", "-_9"] { #expect(Base64URL.decode(bad) == nil, "\(bad)") }
    }

    @Test
    func randomTokensDiffer() {
        let a = SecureRandom.token(), b = SecureRandom.token()
        #expect(a != b)
        #expect(Base64URL.decode(a)?.count == 32)
    }

    @Test
    func constantTimeComparison() {
        #expect(constantTimeEquals([1, 2, 3], [1, 2, 3]))
        #expect(!constantTimeEquals([1, 2, 3], [1, 2, 4]))
        #expect(!constantTimeEquals([1, 2, 3], [1, 2]))
    }

    @Test
    func aesGCMOpensOnlyWhatItSealedWithTheSameKeyAndData() throws {
        let key = SecureRandom.bytes(32)
        let cipher = try AESGCM(key: key)
        let box = cipher.seal(Array("secret".utf8), associatedData: Array("app_1/field".utf8))
        #expect(try cipher.open(box, associatedData: Array("app_1/field".utf8)) == Array("secret".utf8))
        #expect(throws: CryptoError.self) { try cipher.open(box, associatedData: Array("app_2/field".utf8)) }
        var tampered = box
        tampered[tampered.count / 2] ^= 1
        #expect(throws: CryptoError.self) { try cipher.open(tampered, associatedData: Array("app_1/field".utf8)) }
        #expect(throws: CryptoError.self) { try AESGCM(key: SecureRandom.bytes(32)).open(box, associatedData: Array("app_1/field".utf8)) }
        #expect(throws: CryptoError.self) { try AESGCM(key: SecureRandom.bytes(16)) }
        #expect(cipher.seal(Array("secret".utf8)) != cipher.seal(Array("secret".utf8)), "a fresh nonce each time")
    }
}

@Suite("Signing keys and JWS")
struct SigningTests {
    @Test(arguments: SignatureAlgorithm.allCases)
    func signAndVerifyThroughThePublicJWK(_ algorithm: SignatureAlgorithm) throws {
        let key = try SigningKey.generate(algorithm)
        let message = Array("header.payload".utf8)
        let signature = try key.sign(message)
        if algorithm == .es256 { #expect(signature.count == 64) }
        let jwk = key.publicJWK(kid: "k1")
        #expect(jwk.alg == algorithm.rawValue && jwk.kid == "k1" && jwk.use == "sig")
        let verifier = try VerificationKey(jwk: jwk)
        #expect(verifier.verify(signature: signature, message: message))
        #expect(!verifier.verify(signature: signature, message: Array("header.payloae".utf8)))
        #expect(!(try VerificationKey(jwk: SigningKey.generate(algorithm).publicJWK(kid: "k2"))).verify(signature: signature, message: message))
        // The PEM round trip keeps the key.
        let reloaded = try SigningKey(pem: key.pkcs8PEM(), algorithm: algorithm)
        #expect(reloaded.publicJWK(kid: "k1") == jwk)
        #expect(throws: CryptoError.self) { try SigningKey(pem: key.pkcs8PEM(), algorithm: algorithm == .rs256 ? .es256 : .rs256) }
    }

    @Test(arguments: SignatureAlgorithm.allCases)
    func signaturesMadeByTheOpenSSLCommandVerify(_ algorithm: SignatureAlgorithm) throws {
        let folder = NSTemporaryDirectory() + "gh-crypto-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let genArgs = algorithm == .rs256 ? ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"] : ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]
        try openssl(["genpkey"] + genArgs + ["-out", "\(folder)/key.pem"])
        try openssl(["pkey", "-in", "\(folder)/key.pem", "-pubout", "-out", "\(folder)/pub.pem"])
        try Data("interop".utf8).write(to: URL(fileURLWithPath: "\(folder)/msg"))
        try openssl(["dgst", "-sha256", "-sign", "\(folder)/key.pem", "-out", "\(folder)/sig", "\(folder)/msg"])
        var signature = Array(try Data(contentsOf: URL(fileURLWithPath: "\(folder)/sig")))
        if algorithm == .es256 { signature = try derToRaw(signature) }
        let verifier = try VerificationKey(pem: String(contentsOfFile: "\(folder)/pub.pem", encoding: .utf8))
        #expect(verifier.algorithm == algorithm)
        #expect(verifier.verify(signature: signature, message: Array("interop".utf8)))
        // And our key loads the PEM openssl wrote.
        _ = try SigningKey(pem: String(contentsOfFile: "\(folder)/key.pem", encoding: .utf8), algorithm: algorithm)
    }

    @Test
    func weakOrUnsupportedKeysAreRefused() throws {
        #expect(throws: CryptoError.self) { try VerificationKey(jwk: JWK(kty: "oct")) }
        #expect(throws: CryptoError.self) { try VerificationKey(jwk: JWK(kty: "EC", crv: "P-384", x: "AA", y: "AA")) }
        // A 1024-bit RSA modulus.
        let small = JWK(kty: "RSA", n: Base64URL.encode([0x80] + Array(repeating: 1, count: 127)), e: "AQAB")
        #expect(throws: CryptoError.self) { try VerificationKey(jwk: small) }
    }

    @Test
    func jwtSignParseVerify() throws {
        let key = try SigningKey.generate(.rs256)
        let token = try JWT.sign(payload: Array(#"{"sub":"u1"}"#.utf8), key: key, kid: "kid-1", type: "at+jwt")
        let parsed = try JWT.parse(token)
        #expect(parsed.header == JWT.Header(alg: "RS256", kid: "kid-1", typ: "at+jwt"))
        #expect(parsed.payload == Array(#"{"sub":"u1"}"#.utf8))
        #expect(JWT.verify(parsed, with: key.verificationKey))
    }

    @Test
    func jwtParsingRefusesMalformedTokens() throws {
        let key = try SigningKey.generate(.es256)
        let token = try JWT.sign(payload: Array("{}".utf8), key: key, kid: "k")
        let parts = token.split(separator: ".").map(String.init)
        for bad in ["a.b", token + ".x", String(repeating: "a", count: 20_000), "!!.!!.!!", "\(Base64URL.encode("[1]".utf8)).\(parts[1]).\(parts[2])",
            "\(Base64URL.encode(#"{"alg":5}"#.utf8)).\(parts[1]).\(parts[2])", ".\(parts[1]).\(parts[2])"]
        {
            #expect(throws: CryptoError.self, "\(bad.prefix(30))") { try JWT.parse(bad) }
        }
    }

    @Test
    func jwtVerificationRefusesOtherAlgorithmsAndTampering() throws {
        let key = try SigningKey.generate(.rs256)
        let token = try JWT.sign(payload: Array(#"{"sub":"u1"}"#.utf8), key: key, kid: "k")
        let parts = token.split(separator: ".").map(String.init)
        let verifier = key.verificationKey
        // alg none, empty signature.
        let none = Base64URL.encode(#"{"alg":"none","kid":"k"}"#.utf8) + "." + parts[1] + "."
        #expect(!JWT.verify(try JWT.parse(none), with: verifier))
        // HS256 "signed" with the public key as the HMAC secret (the classic confusion attack).
        let hsHeader = Base64URL.encode(#"{"alg":"HS256","kid":"k"}"#.utf8)
        let publicKeyBytes = Array(Base64URL.decode(key.publicJWK(kid: "k").n!)!)
        let hmac = Digest.hmacSHA256(key: publicKeyBytes, data: Array("\(hsHeader).\(parts[1])".utf8))
        #expect(!JWT.verify(try JWT.parse("\(hsHeader).\(parts[1]).\(Base64URL.encode(hmac))"), with: verifier))
        // Tampered payload.
        let tampered = parts[0] + "." + Base64URL.encode(#"{"sub":"u2"}"#.utf8) + "." + parts[2]
        #expect(!JWT.verify(try JWT.parse(tampered), with: verifier))
        // An ES256 key does not accept an RS256 token, whatever the signature.
        #expect(!JWT.verify(try JWT.parse(token), with: try SigningKey.generate(.es256).verificationKey))
    }

    func openssl(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.standardError = Pipe()
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "openssl \(arguments.joined(separator: " "))")
    }

    /// DER ECDSA-Sig-Value → r || s, parsed by hand here only so the test does not reuse the code it checks.
    func derToRaw(_ der: [UInt8]) throws -> [UInt8] {
        var index = 2
        func integer() -> [UInt8] {
            let length = Int(der[index + 1])
            var value = Array(der[(index + 2)..<(index + 2 + length)])
            index += 2 + length
            while value.count > 32 && value.first == 0 { value.removeFirst() }
            return Array(repeating: 0, count: 32 - value.count) + value
        }
        try #require(der.first == 0x30)
        return integer() + integer()
    }
}

@Suite("argon2id")
struct Argon2Tests {
    let small = Argon2id.Parameters(memoryKiB: 1024, iterations: 1, parallelism: 1)

    @Test
    func hashVerifyAndRehash() throws {
        let encoded = try Argon2id.hash(password: Array("correct horse".utf8), parameters: small)
        #expect(encoded.hasPrefix("$argon2id$v=19$m=1024,t=1,p=1$"))
        #expect(Argon2id.verify(password: Array("correct horse".utf8), encoded: encoded))
        #expect(!Argon2id.verify(password: Array("correct horsf".utf8), encoded: encoded))
        #expect(!Argon2id.verify(password: Array("correct horse".utf8), encoded: "$argon2i$garbage"))
        #expect(try Argon2id.hash(password: Array("correct horse".utf8), parameters: small) != encoded, "salted")
        #expect(!Argon2id.needsRehash(encoded: encoded, parameters: small))
        #expect(Argon2id.needsRehash(encoded: encoded, parameters: .owasp))
    }

    @Test
    func owaspParameters() throws {
        let encoded = try Argon2id.hash(password: Array("pw".utf8), parameters: .owasp)
        #expect(encoded.contains("m=19456,t=2,p=1"))
        #expect(Argon2id.verify(password: Array("pw".utf8), encoded: encoded))
    }
}
